"""The dry run: per-stage estimates against the call log of the real run, with no model called."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from conftest import REPO, make_config
from typer.testing import CliRunner

from ragaudit.cache._fake import FakeRequest
from ragaudit.config import RunConfig, load_config
from ragaudit.errors import ConfigError
from ragaudit.estimate import Assumptions, estimate_run, price, simulated_comparisons
from ragaudit.flows.evaluate import evaluate
from ragaudit.runfolder import RunFolder

DEMO = REPO / "data" / "demo"


def demo_config(tmp_path: Path, judge: str = "fake/judge") -> RunConfig:
    """The bundled demo's config file with the fake judge and embedder, everything in tmp_path."""
    overrides = {
        "questions": str(DEMO / "questions.jsonl"),
        "runs_root": str(tmp_path / "runs"),
        "cache_dir": str(tmp_path / "cache"),
        "collect": {"index_path": str(tmp_path / "index"), "corpus": str(DEMO / "corpus.jsonl")},
        "models": {"judge": judge, "embedder": "fake/embed", "backoff_s": 0.0},
    }
    return load_config(DEMO / "config.yaml", overrides, environ={})


def every_candidate_relevant(req: FakeRequest) -> Any:
    """The judge finds every candidate relevant: the prior relevant_share=1.0 is then the truth."""
    if req.title == "RelevanceVerdict":
        return {"relevant": True, "reason": "scripted"}
    return None


def within(estimated: float, logged: float, tolerance: float = 0.10) -> bool:
    return abs(estimated - logged) <= tolerance * logged


@pytest.mark.usefixtures("prefect_harness")
def test_dry_run_matches_the_demo_call_log_within_10_percent(tmp_path, fake) -> None:
    config = demo_config(tmp_path)
    with fake.script(every_candidate_relevant):
        estimate = asyncio.run(estimate_run(config, Assumptions(relevant_share=1.0)))
        # The dry run asked no model: no completion, no embedding, nothing recorded.
        assert fake.stats.calls == 0 and fake.stats.embeddings == 0
        assert fake.stats.requests == []
        assert not RunFolder(config.runs_root, "demo").path.exists()

        asyncio.run(evaluate(config.model_dump_json(), "demo"))

    run = RunFolder(config.runs_root, "demo")
    calls = pl.concat([pl.read_parquet(p) for p in (run.path / "llm_calls").glob("*.parquet")])
    logged = {
        r["stage"]: r
        for r in calls.group_by("stage")
        .agg(pl.len().alias("calls"), pl.col("tokens_in").sum())
        .iter_rows(named=True)
    }
    estimated = {k: v for k, v in estimate.by_stage().items() if v["calls"]}
    assert set(estimated) == set(logged)
    # Every stage that calls a model in the demo is there, each judge metric on its own.
    assert {"sort", "ground_truth", "score:faithfulness", "score:context_recall"} <= set(logged)
    for stage, real in logged.items():
        est = estimated[stage]
        assert within(est["calls"], real["calls"]), (stage, est, real)
        assert within(est["tokens_in"], real["tokens_in"]), (stage, est, real)


def test_pairwise_counts_come_from_the_strategy_itself() -> None:
    assert asyncio.run(simulated_comparisons("merge", 1)) == 0
    assert asyncio.run(simulated_comparisons("merge", 2)) == 1
    # Binary insertion of 8 items needs at most sum(ceil(log2 k)) for k = 2..8 = 17 comparisons.
    insertion = asyncio.run(simulated_comparisons("insertion", 8))
    assert 7 <= insertion <= 17
    # The sample sort asks more than insertion to stand a noisy judge (pivot pairs, repair).
    assert asyncio.run(simulated_comparisons("sample", 50)) > asyncio.run(
        simulated_comparisons("insertion", 50)
    )


def test_prices_come_from_litellm_and_unknown_is_never_zero() -> None:
    assert price("openai/gpt-4o-mini", 1_000_000, 0) == pytest.approx(0.15)
    assert price("hosted_vllm/no-such-model", 1000, 100) is None
    # litellm itself answers 0 for ollama models it has no entry for: that is not a price.
    assert price("ollama/no-such-model:7b", 1000, 100) is None


def test_unknown_priced_model_prints_unknown_price(tmp_path) -> None:
    from ragaudit.cli import app

    config = make_config(tmp_path, judge="hosted_vllm/no-such-model")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config.model_dump(mode="json")), encoding="utf-8")
    result = CliRunner().invoke(app, ["run", "--config", str(path), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "unknown price for hosted_vllm/no-such-model" in result.output
    assert "$0.0000" not in result.output
    assert "relevant_share=0.3" in result.output  # the priors are printed
    assert not (tmp_path / "runs").exists()  # nothing was run


def test_bad_assumption_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match="relevant_shar=1.*relevant_share"):
        Assumptions.parse(["relevant_shar=1"])
    with pytest.raises(ConfigError, match="between 0 and 1"):
        Assumptions.parse(["relevant_share=3"])
    assert Assumptions.parse(["relevant_share=0.5", "orderings=2"]).relevant_share == 0.5
