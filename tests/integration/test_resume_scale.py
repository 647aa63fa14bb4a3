"""Crash and resume at scale: ``kill -9`` of the CLI mid-score, then a re-run with the same id."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import diskcache
import polars as pl
import pyarrow.parquet as pq
import pytest
import yaml
from support.shared_count import SharedCount, shared_env
from support.synthetic import write_questions

from ragaudit.config import load_config
from ragaudit.flows.evaluate import evaluate
from ragaudit.runfolder import RunFolder

pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.slow]

QUESTIONS = 200
JUDGE = "fake/judge?latency=0.1"


def _config(tmp: Path, questions: Path, cache: str) -> dict:
    return {
        "questions": str(questions),
        "runs_root": str(tmp / "runs"),
        "cache_dir": str(tmp / cache),
        "collect": {"backend": "question_set"},
        "sort": {"enabled": False},
        "ground_truth": {"enabled": False},
        "models": {"judge": JUDGE, "embedder": "fake/embed", "concurrency": 8, "backoff_s": 0},
        "score": {"metrics": ["faithfulness", "nonllm_context_recall"], "top_k": 3},
    }


def _cli(config: Path, run_id: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ragaudit", "run", "--config", str(config), "--run-id", run_id],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        # Its own process group: the kill takes Prefect's ephemeral server along with it.
        start_new_session=True,
    )


def _logged(run: RunFolder, stage: str) -> int:
    parts = list(run.calls_dir.glob(f"{stage}*.parquet")) if run.calls_dir.is_dir() else []
    return sum(pq.ParquetFile(p).metadata.num_rows for p in parts)


def _scores(run: RunFolder) -> pl.DataFrame:
    df = pl.from_arrow(run.read("scores")).drop("run_id")
    return df.sort(["metric", "question_id"])


def test_kill_mid_score_then_resume_repeats_no_finished_call(tmp_path: Path) -> None:
    questions = write_questions(tmp_path / "questions.jsonl", QUESTIONS, candidates=6)

    # The uninterrupted run, in this process, with its own memo: how many calls it takes.
    whole = load_config(None, _config(tmp_path, questions, "cache-whole"), environ={})
    manifest = asyncio.run(evaluate(whole.model_dump_json(), "whole"))
    total = manifest["llm"]["provider_calls"]
    assert total >= 2 * QUESTIONS

    cfg_path = tmp_path / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(_config(tmp_path, questions, "cache")))
    counter = tmp_path / "provider.json"
    env = {**os.environ, **shared_env(counter)}
    run = RunFolder(tmp_path / "runs", "crash")

    proc = _cli(cfg_path, "crash", env)
    deadline = time.monotonic() + 180
    # Killed once the score stage's call log shows a third of its calls, well before the end.
    while _logged(run, "score") < total // 3:
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline, "the score stage never logged its calls"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not run.has("scores"), "the run finished before the kill"

    with diskcache.Cache(str(tmp_path / "cache")) as memo:
        finished = len(memo)  # answers stored before the kill: the re-run must not ask again
    assert 0 < finished < total
    unfinished = total - finished

    counter.unlink()
    rerun = _cli(cfg_path, "crash", env)
    _, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err.decode()[-2000:]
    provider_calls = SharedCount(counter).read()["calls"]
    assert 0 < provider_calls <= unfinished

    # No partial Parquet: no temp file left, every table readable.
    assert not list(run.path.rglob("*.tmp"))
    for path in run.path.rglob("*.parquet"):
        pq.read_table(path)
    # Every answer the memo holds was paid by a call that is in the run's call log, the
    # calls of the killed process included (recovered from its journal by the re-run).
    calls = pl.concat([pl.read_parquet(p) for p in run.calls_dir.glob("*.parquet")])
    paid = set(calls.filter(~pl.col("cache_hit"))["key_hash"])
    with diskcache.Cache(str(tmp_path / "cache")) as memo:
        assert set(memo.iterkeys()) <= paid
    on_disk = json.loads(run.manifest_path.read_text())
    assert on_disk["status"] == "completed"
    assert _scores(run).equals(_scores(RunFolder(tmp_path / "runs", "whole")), null_equal=True)
