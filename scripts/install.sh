#!/usr/bin/env bash
# `make install`: the project and its `offline` extra, with llama-cpp-python compiled while the
# rest downloads.
#
# Compiling llama-cpp-python from source (the registry has no CPU wheel) is the one long step
# of a fresh install, and one `pip install -e ".[offline]"` starts it only after every other
# package is downloaded. So its wheel is built in the background from the start (`pip wheel`:
# nothing is installed into the environment while the rest installs), the rest installs
# meanwhile (`offline-prebuilt`: the offline extra without the judge's runtime), and the
# `offline` extra then installs from that wheel. A llama-cpp-python already at the pinned
# version is not built again.
#
# Environment: PYTHON (default python3), INSTALL_FLAGS (more pip options), CMAKE_ARGS (llama.cpp's
# build options, which the Makefile sets), WHEELS (where the wheel goes; default build/wheels).
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
read -r -a flags <<<"${INSTALL_FLAGS:-}"
export CMAKE_ARGS=${CMAKE_ARGS:-}
wheels=${WHEELS:-build/wheels}

# The pin, read from pyproject.toml's offline extra: one place says which version.
pin=$("$python" - <<'EOF'
import tomllib

extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["offline"]
print(next(r for r in extra if r.startswith("llama-cpp-python")))
EOF
)
have=$("$python" -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))' \
  2>/dev/null || true)

build=""
if [[ "llama-cpp-python==$have" != "$pin" ]]; then
  mkdir -p "$wheels"
  log="$wheels/llama-cpp-python-build.log"
  echo "install: building $pin in the background (about 5 minutes on 2 cores; log: $log)"
  "$python" -m pip wheel "${flags[@]}" --no-deps --wheel-dir "$wheels" "$pin" >"$log" 2>&1 &
  build=$!
  # A failed or interrupted install stops the build too.
  trap 'kill "$build" 2>/dev/null || true' EXIT
fi

"$python" -m pip install "${flags[@]}" -e ".[offline-prebuilt]"

if [[ -n "$build" ]]; then
  echo "install: waiting for $pin's build to finish (log: $log)"
  if ! wait "$build"; then
    trap - EXIT
    echo "install: building $pin failed; the end of its log ($log):" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
  trap - EXIT
fi
"$python" -m pip install "${flags[@]}" --find-links "$wheels" -e ".[offline]"
