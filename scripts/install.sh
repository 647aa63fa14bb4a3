#!/usr/bin/env bash
# `make install` and `make install-all`: the project and its extras, with llama-cpp-python
# compiled while the rest installs.
#
# Compiling llama-cpp-python from source (the registry has no CPU wheel) is the one long step
# of a fresh install, and one `pip install -e ".[offline]"` starts it only after every other
# package is downloaded. So its wheel is built in the background from the start (`pip wheel`:
# nothing is installed into the environment while the rest installs), the rest installs
# meanwhile (`offline-prebuilt`: the offline extra without the judge's runtime), and the
# extras asked for then install from that wheel. A llama-cpp-python already at the pinned
# version is not built again, and then the extras install in one step.
#
# The ~220 other packages install with uv (INSTALLER=uv, the default): pip spends minutes of
# one core unpacking and byte-compiling them, which the compile on both cores then waits for;
# uv does the same work, bytecode included, in a fraction of it. uv does not read pip's
# configuration, so what pip is configured with (its files and PIP_* variables) is handed to
# uv as UV_* variables by scripts/pip_config_for_uv.py, which says which.
# INSTALLER=pip installs with pip alone.
#
# Environment: PYTHON (default python3), EXTRAS (default offline), INSTALLER (uv or pip),
# INSTALL_FLAGS (more pip options: the build, and everything under INSTALLER=pip), CMAKE_ARGS
# (llama.cpp's build options, which the Makefile sets), WHEELS (where the wheel goes; default
# build/wheels).
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
extras=${EXTRAS:-offline}
installer=${INSTALLER:-uv}
read -r -a flags <<<"${INSTALL_FLAGS:-}"
export CMAKE_ARGS=${CMAKE_ARGS:-}
wheels=${WHEELS:-build/wheels}

case "$installer" in
  uv | pip) ;;
  *) echo "install: INSTALLER must be uv or pip, not '$installer'" >&2; exit 2 ;;
esac

# The pin, read from pyproject.toml's offline extra: one place says which version.
pin=$("$python" - <<'EOF'
import tomllib

extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["offline"]
print(next(r for r in extra if r.startswith("llama-cpp-python")))
EOF
)
have=$("$python" -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))' \
  2>/dev/null || true)

# Only the `offline` extra holds the runtime (`offline-prebuilt` alone, say, needs no build).
mkdir -p "$wheels"
build=""
if [[ ",$extras," == *,offline,* && "llama-cpp-python==$have" != "$pin" ]]; then
  log="$wheels/llama-cpp-python-build.log"
  echo "install: building $pin in the background (a few minutes on 2 cores; log: $log)"
  "$python" -m pip wheel "${flags[@]}" --no-deps --wheel-dir "$wheels" "$pin" >"$log" 2>&1 &
  build=$!
  # A failed or interrupted install stops the build too.
  trap 'kill "$build" 2>/dev/null || true' EXIT
fi

if [[ "$installer" == uv ]]; then
  "$python" -m pip install "${flags[@]}" --quiet "uv>=0.9"
  eval "$("$python" scripts/pip_config_for_uv.py)"
  # The interpreter's own path: uv reads a bare `python` as "the active virtual environment's".
  target=$("$python" -c 'import sys; print(sys.executable)')
  install_pkgs() { "$python" -m uv pip install --python "$target" --compile-bytecode "$@"; }
else
  install_pkgs() { "$python" -m pip install "${flags[@]}" "$@"; }
fi

if [[ -n "$build" ]]; then
  # What installs while the runtime compiles; with no build the extras install in one step.
  install_pkgs -e ".[offline-prebuilt]"
  echo "install: waiting for $pin's build to finish (log: $log)"
  if ! wait "$build"; then
    trap - EXIT
    echo "install: building $pin failed; the end of its log ($log):" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
  trap - EXIT
fi
install_pkgs --find-links "$wheels" -e ".[$extras]"
