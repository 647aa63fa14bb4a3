"""The demo's judge calls, this tree against an earlier commit, side by side.

Run: ``python bench/bench_demo.py --against REV [--rounds N]``.

Each round runs ``ragaudit demo`` once from this tree and once from ``REV`` (checked out into a
temporary git worktree, removed at the end), the first of the two alternating from round to
round, each with its own empty memo, runs root and ``RAGAUDIT_HOME`` (so each assembles its
model file and starts its Prefect database as a fresh clone's first demo does). Both run in
this Python environment: the same llama-cpp-python, the same model packages, the same machine
at nearly the same moment, so only ragaudit's code differs.

Printed per demo: its wall and CPU seconds, the judge's completion calls (from the run's call
log, memo hits left out), their mean prompt and answer tokens, and the demo's wall seconds a
judge call; then this tree's demo wall over ``REV``'s. This machine's speed varies from
session to session by more than any code change to the judge's path, so a seconds-a-call
figure alone says little about the code; the ratio beside an earlier commit, in one run, does.

Goals: the same judge calls as ``REV`` (their count, and their mean prompt tokens within 2 %:
the same work), and this tree's
demo no slower than ``REV``'s by more than 10 %.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from _util import REPO, load_average, scratch, table

SLOWER_AT_MOST = 1.10  # this tree's demo wall over REV's


@dataclass(frozen=True)
class Demo:
    """One demo run's figures."""

    label: str
    wall_s: float
    cpu_s: float
    calls: int
    tokens_in: float
    tokens_out: float
    load: str

    @property
    def per_call(self) -> float:
        return self.wall_s / max(self.calls, 1)


def judge_calls(runs: Path) -> tuple[int, float, float]:
    """Completion calls the judge answered (no memo hits) and their mean tokens in and out."""
    import polars as pl

    from ragaudit.reporting import read_calls

    log = read_calls(runs / "demo" / "llm_calls")
    calls = (
        log.filter(~pl.col("cache_hit") & (pl.col("kind") == "completion"))
        if log is not None
        else None
    )
    if calls is None or calls.is_empty():
        return 0, 0.0, 0.0
    return calls.height, float(calls["tokens_in"].mean()), float(calls["tokens_out"].mean())


def run_demo(label: str, tree: Path, work: Path) -> Demo:
    """``ragaudit demo`` from ``tree`` with an empty memo, runs root and home, timed."""
    folder = work / f"{label}-{time.monotonic_ns()}"
    folder.mkdir()
    env = dict(os.environ, PYTHONPATH=str(tree), RAGAUDIT_HOME=str(folder / "home"))
    cmd = [sys.executable, "-m", "ragaudit", "demo", "--runs-root", str(folder / "runs")]
    cmd += ["--set", f"cache_dir={folder / 'memo'}"]
    before, cpu_before = load_average(), resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with (folder / "log.txt").open("w") as log:
        rc = subprocess.run(cmd, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if rc.returncode != 0:
        tail = (folder / "log.txt").read_text(errors="replace").splitlines()[-5:]
        raise SystemExit(f"the demo of {label} exited {rc.returncode}:\n" + "\n".join(tail))
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    calls, tokens_in, tokens_out = judge_calls(folder / "runs")
    shutil.rmtree(folder / "home", ignore_errors=True)  # the 250 MB model file
    return Demo(label, wall, cpu, calls, tokens_in, tokens_out, f"{before} -> {load_average()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--against", required=True, help="the earlier commit (any git revision)")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    rev = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", args.against],
        capture_output=True,
        text=True,
    )
    if rev.returncode != 0:
        raise SystemExit(f"--against {args.against!r}: not a revision of {REPO}")
    here = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    old_label, new_label = rev.stdout.strip(), f"this tree ({here})"
    work = scratch("demo")
    other = work / "tree"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(other), old_label],
        check=True,
    )
    demos: list[tuple[int, Demo]] = []
    try:
        for i in range(args.rounds):
            order = [(new_label, REPO), (old_label, other)]
            for label, tree in order if i % 2 == 0 else order[::-1]:
                demos.append((i + 1, run_demo(label, tree, work)))
                print(f"round {i + 1}: {label} {demos[-1][1].wall_s:.0f} s", flush=True)
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(other)])
        shutil.rmtree(work, ignore_errors=True)
    rows = [
        (
            d.label,
            i,
            f"{d.wall_s:.0f}",
            f"{d.cpu_s:.0f}",
            d.calls,
            f"{d.tokens_in:.0f}/{d.tokens_out:.0f}",
            f"{d.per_call:.2f}",
            d.load,
        )
        for i, d in demos
    ]
    headers = ("tree", "round", "wall s", "CPU s", "judge calls", "tokens in/out")
    print(f"\nragaudit demo, {args.rounds} round(s), an empty memo each")
    print(table(rows, (*headers, "wall s a judge call", "load average start -> end")))
    new = [d for _, d in demos if d.label == new_label]
    old = [d for _, d in demos if d.label == old_label]
    ratio = sum(d.wall_s for d in new) / sum(d.wall_s for d in old)
    print(f"{new_label} / {old_label}: {ratio:.2f}x the demo's wall")
    # The prompts are the work the code asks for; answers (and so the prompts built from them)
    # move with llama.cpp's numerics from run to run, hence a margin on the mean.
    counts = {d.calls for d in new + old}
    prompts = [d.tokens_in for d in new + old]
    same = len(counts) == 1 and max(prompts) <= min(prompts) * 1.02
    shown = ", ".join(f"{d.calls} calls of {d.tokens_in:.0f}" for d in new + old)
    print(f"goal the same judge calls as {old_label}: {'met' if same else f'not met: {shown}'}")
    verdict = "met" if ratio <= SLOWER_AT_MOST else f"not met: {ratio:.2f}x"
    print(f"goal {new_label} no more than {SLOWER_AT_MOST:.2f}x {old_label}'s demo: {verdict}")


if __name__ == "__main__":
    main()
