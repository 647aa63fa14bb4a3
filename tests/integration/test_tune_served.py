"""A tuned variant is the variant ``best.yaml`` makes ``ragaudit run`` serve: on the local
backend with ``collect.top_n`` above the tune's depth, every variant's tuned top-k equals what
the run's collect stage serves with that variant's collect section, question by question."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from support.runs import make_config

from ragaudit.cache import hold_gateway
from ragaudit.config import RunConfig
from ragaudit.tuning import BEST, collect_section, run_tune, write_outputs


def _served(config: RunConfig, section: dict[str, Any], run_id: str) -> dict[str, list[str]]:
    """The top ``depth`` a run with ``section`` pasted as its collect section serves."""
    from ragaudit.flows.evaluate import evaluate

    data = config.model_dump(mode="json")
    data["collect"] = section["collect"]
    pasted = RunConfig.model_validate(data)
    asyncio.run(evaluate(pasted.model_dump_json(), run_id, ["collect"]))
    candidates = pl.read_parquet(Path(config.runs_root) / run_id / "candidates.parquet")
    return {
        qid: group.sort("engine_rank")["context_id"].to_list()[: config.tune.depth]
        for (qid,), group in candidates.group_by("question_id")
    }


@pytest.mark.usefixtures("prefect_harness")
def test_every_tuned_variant_is_what_run_serves_with_its_collect_section(
    tmp_path: Path, fake: Any
) -> None:
    tune: dict[str, Any] = {
        "name": "served",
        "depth": 10,
        "variants": {
            "weight-0.2": {"vector_weight": 0.2},
            "rrf-5": {"rrf_k": 5},
            "bm25": {"mode": "bm25"},
            "vector": {"mode": "vector"},
        },
    }
    config = make_config(tmp_path, collect__top_n=100, collect__mode="hybrid", tune=tune)
    with hold_gateway(config) as gateway:
        out = asyncio.run(run_tune(config, gateway))
    folder = write_outputs(out)
    assert all(run.status == "ok" for run in out.runs)
    for run in out.runs:
        section = collect_section(run.variant)
        if run.variant.name == out.decision.recommended:
            # The file itself for the variant it names.
            assert yaml.safe_load((folder / BEST).read_text()) == section
        served = _served(config, section, f"served-{run.variant.name}")
        tuned = {qid: got.ids for qid, got in run.questions.items()}
        assert tuned == served, run.variant.name
