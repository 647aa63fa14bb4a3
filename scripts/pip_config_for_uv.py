"""pip's configured package sources as uv's environment variables, printed as shell exports.

uv does not read pip's configuration, so ``scripts/install.sh`` (and ``bench/bench_install.py``)
run ``eval "$(python scripts/pip_config_for_uv.py)"`` before ``uv pip install``: the indexes,
find-links, constraints, certificate, trusted hosts and ``no-index`` pip is configured with
(its files and ``PIP_*`` variables, as ``pip config list`` shows them) become ``UV_*``
variables, each only where the caller has not set it. pip looks for a package on every index
and takes the best version; uv by default stops at the first index that has it, so with more
than one source uv is told to do as pip does. Run with the interpreter whose pip is meant.
"""

from __future__ import annotations

import ast
import os
import shlex
import subprocess
import sys

# pip's precedence: its PIP_* variables, then the site, user and global files.
RANK = {":env:": 3, "site": 2, "user": 1, "global": 0}
AS_UV = {
    "index-url": "UV_INDEX_URL",
    "extra-index-url": "UV_EXTRA_INDEX_URL",
    "find-links": "UV_FIND_LINKS",
    "constraint": "UV_CONSTRAINT",
    "cert": "SSL_CERT_FILE",
    "trusted-host": "UV_INSECURE_HOST",
}


def exports() -> list[str]:
    """The ``export NAME=value`` lines for this interpreter's pip configuration."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    found: dict[str, tuple[int, str]] = {}
    for line in listed.splitlines():
        key, _, raw = line.partition("=")
        scope, _, name = key.rpartition(".")
        value = " ".join(str(ast.literal_eval(raw)).split())  # several lines: one list
        if name not in found or RANK.get(scope, 0) >= found[name][0]:
            found[name] = (RANK.get(scope, 0), value)
    out = [
        f"export {variable}={shlex.quote(found[name][1])}"
        for name, variable in AS_UV.items()
        if name in found and variable not in os.environ
    ]
    # pip's --no-index (only find-links): an offline mirror must not become a look-up online.
    no_index = found.get("no-index", (0, ""))[1].lower() in ("1", "true", "yes", "on")
    if no_index and "UV_NO_INDEX" not in os.environ:
        out.append("export UV_NO_INDEX=1")
    several = "extra-index-url" in found or "find-links" in found
    if several and "UV_INDEX_STRATEGY" not in os.environ:
        out.append("export UV_INDEX_STRATEGY=unsafe-best-match")
    return out


if __name__ == "__main__":
    print("\n".join(exports()))
