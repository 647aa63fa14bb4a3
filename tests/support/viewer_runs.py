"""Run folders and a live ``ragaudit view`` server for the viewer's tests and bench."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import polars as pl

from ragaudit.config import ReportConfig
from ragaudit.reporting import breakdown_rows, breakdowns, directions, summarise
from ragaudit.runfolder import RunFolder
from ragaudit.schemas import SUMMARY, to_table
from support.html_runs import write_full_run

METRICS = ["faithfulness", "answer_relevancy", "rouge_l"]


def write_summary(run_dir: Path) -> None:
    """The report stage's ``summary`` table of a synthetic run (``tasks/report.write_summary``)."""
    run = RunFolder(run_dir.parent, run_dir.name)
    scores = pl.from_arrow(run.read("scores"))
    assert isinstance(scores, pl.DataFrame)
    cfg = ReportConfig()
    metrics = scores["metric"].unique(maintain_order=True).to_list()
    rows = [
        {
            "run_id": run.run_id,
            **{k: v for k, v in dataclasses.asdict(s).items() if k != "higher_is_better"},
        }
        for s in summarise(scores, cfg.thresholds, 200, directions(metrics))
    ]
    found = breakdowns(run.questions(), scores, cfg.thresholds, 200, directions(metrics))
    run.write("summary", to_table(rows + breakdown_rows(run.run_id, found), SUMMARY))


def write_runs(root: Path, n: int, questions: int = 12) -> list[Path]:
    """``n`` finished runs of one question set, judged by the fake judge, each with its summary."""
    out = []
    for i in range(n):
        run_dir = write_full_run(root, f"run-{i}", questions, METRICS, n_candidates=8, seed=i)
        write_summary(run_dir)
        out.append(run_dir)
        # Distinct start times: the list and the trend order runs by them.
        time.sleep(0.002)
    return out


_URL = re.compile(r"at (http://\S+)")


@contextlib.contextmanager
def serving(*args: str, timeout_s: float = 60.0, wait: bool = True) -> Iterator[str]:
    """``python -m ragaudit ARGS`` serving the viewer (``view``, ``label``); yields its URL.

    The URL is the address the command printed, as printed. With ``wait``, once it answers (the
    socket listens before the address is printed, so a request made then waits for the server
    rather than failing).
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragaudit", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "400"},
    )
    try:
        assert proc.stdout is not None
        found = None
        for _ in range(5):  # `label` says what it drew before the address
            line = proc.stdout.readline()
            found = _URL.search(line)
            if found is not None or not line:
                break
        if found is None:
            proc.kill()
            _, err = proc.communicate(timeout=10)
            raise RuntimeError(f"ragaudit {args[0]} printed no address: {line!r} {err[-2000:]}")
        url = found.group(1)
        if wait:
            httpx.get(url, timeout=timeout_s).raise_for_status()
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def running_view(
    root: Path, *args: str, timeout_s: float = 60.0, wait: bool = True
) -> Iterator[str]:
    """``python -m ragaudit view ROOT --port 0 --no-browser`` as a real server; yields its URL."""
    with serving(
        "view", str(root), "--port", "0", "--no-browser", *args, timeout_s=timeout_s, wait=wait
    ) as url:
        yield url


__all__ = ["METRICS", "running_view", "serving", "write_runs", "write_summary"]
