"""A fresh clone's install and first demo, and pip against uv for the packages, timed.

Run: ``python bench/bench_install.py [--packages] [--fresh-clone] [--installer uv|pip]``.

``--packages`` (the default when neither is given): the ``offline-prebuilt`` extra (everything
the demo needs but llama-cpp-python, ~220 packages) installed into a new venv with an empty
cache by ``scripts/install.sh`` itself (``EXTRAS=offline-prebuilt``, which needs no compile),
once with ``INSTALLER=pip`` and once with ``INSTALLER=uv``, one after the other in one run,
with the ratio. ``--fresh-clone``: this repository's HEAD cloned into a scratch folder, a new venv
(``python3.11 -m venv``), empty pip, uv and memo caches (``PIP_CACHE_DIR``, ``XDG_CACHE_HOME``),
then ``make install`` and ``make demo`` timed by the clock, the goal being both within ten
minutes on 2 cores. Each figure is printed with the load average at its start and end: a
machine shared with other work slows every wall time here several-fold.

Nothing of this environment is touched: every install goes into its own venv under a scratch
folder, deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _util import REPO, load_average, scratch, table

GOAL_S = 600.0  # a fresh clone to its first demo result, install included


def venv(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    return folder / "bin" / "python"


def clean_env(cache: Path) -> dict[str, str]:
    """This process's environment with empty caches for pip, uv and the demo's memo."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "VIRTUAL_ENV"))}
    env |= {
        "PIP_CACHE_DIR": str(cache / "pip"),
        "XDG_CACHE_HOME": str(cache),
        "PIP_PROGRESS_BAR": "off",
        "RAGAUDIT_HOME": str(cache / "home"),
    }
    env.pop("PYTHONPATH", None)
    return env


def timed(cmd: list[str], *, cwd: Path, env: dict[str, str], log: Path) -> tuple[float, int, str]:
    """Wall seconds, exit code and the load average before and after one command."""
    before = load_average()
    started = time.perf_counter()
    with log.open("w") as out:
        rc = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    return time.perf_counter() - started, rc, f"{before} -> {load_average()}"


def packages(work: Path) -> None:
    """pip against uv for the offline-prebuilt extra, fresh venv and empty cache each."""
    rows = []
    seconds = {}
    for installer in ("pip", "uv"):
        folder = work / installer
        python = venv(folder / "venv")
        env = clean_env(folder / "cache")
        # The script itself, asked for the extra that needs no compile: its uv path includes
        # installing uv and handing it pip's configuration.
        env |= {"INSTALLER": installer, "EXTRAS": "offline-prebuilt", "PYTHON": str(python)}
        env["WHEELS"] = str(folder / "wheels")
        cmd = ["bash", str(REPO / "scripts" / "install.sh")]
        wall, rc, loads = timed(cmd, cwd=REPO, env=env, log=folder / "install.log")
        seconds[installer] = wall
        rows.append((installer, f"{wall:.0f}", rc, loads))
        shutil.rmtree(folder, ignore_errors=True)
    print("the offline-prebuilt extra into a new venv with an empty cache")
    print(table(rows, ("installer", "wall s", "rc", "load average start -> end")))
    print(f"uv / pip wall: {seconds['uv'] / seconds['pip']:.2f}x")


def fresh_clone(work: Path, installer: str) -> None:
    """make install then make demo in a fresh clone, timed; the ten-minute goal."""
    src = work / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(src)], check=True)
    python = venv(work / "venv")
    env = clean_env(work / "cache") | {"INSTALLER": installer}
    env["PATH"] = f"{python.parent}{os.pathsep}{env['PATH']}"
    make = ["make", f"PYTHON={python}"]
    install_s, rc, install_load = timed(
        [*make, "install"], cwd=src, env=env, log=work / "install.log"
    )
    if rc != 0:
        print(f"make install failed (rc {rc}); the end of its log:")
        print("\n".join((work / "install.log").read_text().splitlines()[-20:]))
        return
    demo_s, rc, demo_load = timed([*make, "demo"], cwd=src, env=env, log=work / "demo.log")
    rows = [
        ("make install", f"{install_s:.0f}", 0, install_load),
        ("make demo", f"{demo_s:.0f}", rc, demo_load),
    ]
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=src, capture_output=True, text=True
    ).stdout.strip()
    print(f"a fresh clone of {head}, INSTALLER={installer}, empty caches")
    print(table(rows, ("step", "wall s", "rc", "load average start -> end")))
    total = install_s + demo_s
    verdict = "met" if rc == 0 and total <= GOAL_S else "not met"
    why = "" if verdict == "met" else (f": demo rc {rc}" if rc else f": {total:.0f} s")
    print(
        f"goal make install + first make demo <= {GOAL_S / 60:.0f} min: {verdict}{why}"
        f" ({total:.0f} s = {total / 60:.1f} min)"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--packages", action="store_true", help="pip against uv, the extra alone")
    ap.add_argument("--fresh-clone", action="store_true", help="make install and make demo")
    ap.add_argument("--installer", choices=("uv", "pip"), default="uv")
    args = ap.parse_args()
    work = scratch("install")
    try:
        if args.packages or not args.fresh_clone:
            packages(work)
        if args.fresh_clone:
            fresh_clone(work, args.installer)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
