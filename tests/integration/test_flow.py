"""The evaluate flow end to end under one Prefect test harness, with the fake judge."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import sys
from typing import Any

import polars as pl
import pytest

from ragaudit.config import RunConfig
from ragaudit.flows.evaluate import COMMANDS, evaluate
from ragaudit.runfolder import RunFolder
from ragaudit.schemas import TABLES

pytestmark = pytest.mark.usefixtures("prefect_harness")

STAGE_TABLES = [
    "questions",
    "candidates",
    "answers",
    "verdicts",
    "comparisons",
    "ranking",
    "agreement",
    "ground_truth",
    "scores",
    "summary",
]


def run_flow(
    config: RunConfig, run_id: str = "t", stages: list[str] | None = None
) -> dict[str, Any]:
    return asyncio.run(evaluate(config.model_dump_json(), run_id, stages))


def table(config: RunConfig, name: str, run_id: str = "t") -> pl.DataFrame:
    return pl.from_arrow(RunFolder(config.runs_root, run_id).read(name))


def test_end_to_end_writes_every_table_and_manifest(config_factory, fake) -> None:
    config = config_factory()
    manifest = run_flow(config)
    run = RunFolder(config.runs_root, "t")
    for name in STAGE_TABLES:
        assert run.has(name), name
        meta = run.read(name).schema.metadata
        assert meta[b"schema_version"] == TABLES[name].metadata[b"schema_version"]
        assert run.read(name).schema.equals(TABLES[name], check_metadata=False)
    on_disk = json.loads(run.manifest_path.read_text())
    assert on_disk == json.loads(json.dumps(manifest, default=str))
    assert on_disk["status"] == "completed"
    assert set(on_disk["llm"]) == {"calls", "cache_hits", "provider_calls"}
    assert on_disk["llm"]["provider_calls"] > 0
    assert (
        on_disk["llm"]["calls"] == on_disk["llm"]["cache_hits"] + on_disk["llm"]["provider_calls"]
    )
    assert on_disk["timings"]["total_s"] > 0
    assert on_disk["models"]["judge"] == "fake/judge"
    assert on_disk["config"]["models"]["judge"] == "fake/judge"
    assert "prefect" in on_disk["packages"] and on_disk["packages"]["prefect"]
    assert {"commit", "dirty"} <= set(on_disk["git"])
    # The call log holds one row per call the manifest counted.
    calls = pl.concat([pl.read_parquet(p) for p in (run.path / "llm_calls").glob("*.parquet")])
    assert calls.height == on_disk["llm"]["calls"]
    assert calls["cache_hit"].sum() == on_disk["llm"]["cache_hits"]

    candidates = table(config, "candidates")
    questions = table(config, "questions")
    assert set(candidates["question_id"]) == set(questions["question_id"])
    for qid, part in candidates.group_by("question_id"):
        assert part.sort("engine_rank")["engine_rank"].to_list() == list(range(1, part.height + 1))
        assert all(
            cid.startswith(qid[0]) for cid in part["context_id"]
        )  # filtered to its collection
    scores = table(config, "scores")
    assert set(scores["status"]) <= {"ok", "failed", "skipped"}
    assert scores.filter(pl.col("status") == "ok")["value"].is_nan().sum() == 0
    assert scores.filter(pl.col("status") != "ok")["error"].null_count() == 0
    # The WikiEval questions have no reference: ground_truth wrote one from the candidates.
    gt = table(config, "ground_truth")
    generated = gt.filter(pl.col("origin") == "generated")
    assert generated.height >= 1
    assert generated.filter(pl.col("status") == "ok")["reference"].null_count() == 0
    summary = table(config, "summary")
    assert set(summary["metric"]) == set(config.score.metrics)


def test_rerun_same_id_is_fully_cached(config_factory, fake) -> None:
    config = config_factory()
    first = run_flow(config, "again")
    calls_after_first = fake.stats.calls
    second = run_flow(config, "again")
    assert second["llm"] == {"calls": 0, "cache_hits": 0, "provider_calls": 0}
    assert fake.stats.calls == calls_after_first
    assert all(s["cached"] for s in second["stages"].values())
    assert second["timings"]["total_s"] < first["timings"]["total_s"]


def test_crashed_run_resumes_without_repeating_finished_work(
    config_factory, fake, monkeypatch
) -> None:
    from ragaudit.flows import evaluate as flow_mod

    config = config_factory()
    real = flow_mod.STAGES

    def crash(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("simulated crash after the metric tasks")

    crashing = tuple(
        dataclasses.replace(s, combine=crash) if s.name == "score" else s for s in real
    )
    monkeypatch.setattr(flow_mod, "STAGES", crashing)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_flow(config, "crash")
    crashed = RunFolder(config.runs_root, "crash").read_manifest()
    assert crashed["status"] == "failed"
    assert "simulated crash" in crashed["error"]
    paid = fake.stats.calls
    assert paid > 0

    monkeypatch.setattr(flow_mod, "STAGES", real)
    resumed = run_flow(config, "crash")
    assert resumed["status"] == "completed"
    assert fake.stats.calls == paid  # nothing asked twice
    assert resumed["llm"]["provider_calls"] == 0
    assert all(v["cached"] for k, v in resumed["stages"].items() if k != "report")


def test_changed_stage_config_reruns_only_that_stage(config_factory, fake) -> None:
    config = config_factory()
    run_flow(config, "partial")
    changed = config_factory(report__thresholds={"faithfulness": 0.99})
    manifest = run_flow(changed, "partial")
    cached = {k: v["cached"] for k, v in manifest["stages"].items()}
    assert cached["report"] is False
    assert all(v for k, v in cached.items() if k != "report")


def test_faults_end_in_ok_or_failed_with_reason(config_factory, fake) -> None:
    config = config_factory(
        judge="fake/judge?errors=0.2&malformed=0.1&seed=3", models__max_retries=3
    )
    manifest = run_flow(config, "faults")
    assert manifest["status"] == "completed"
    assert fake.stats.errors > 0 and fake.stats.malformed > 0
    scores = table(config, "scores", "faults")
    assert set(scores["status"]) <= {"ok", "failed", "skipped"}
    ok = scores.filter(pl.col("status") == "ok")
    assert ok["value"].null_count() == 0 and ok["value"].is_nan().sum() == 0
    bad = scores.filter(pl.col("status") != "ok")
    assert bad["error"].null_count() == 0 and all(e.strip() for e in bad["error"])
    verdicts = table(config, "verdicts", "faults")
    assert verdicts.filter(pl.col("status") == "failed")["error"].null_count() == 0
    assert not any(isinstance(v, float) and math.isnan(v) for v in ok["value"])


def test_stages_run_one_at_a_time(config_factory, fake) -> None:
    config = config_factory()
    for stage in COMMANDS:
        manifest = run_flow(config, "stepwise", [stage])
        assert manifest["status"] == "completed"
        assert any(k.split(":")[0] == stage for k in manifest["stages"])
    assert RunFolder(config.runs_root, "stepwise").has("summary")


def test_failing_answer_source_marks_questions_failed(
    config_factory, fake, tmp_path, monkeypatch
) -> None:
    module = tmp_path / "flaky_system.py"
    module.write_text(
        "def answer(question, filters):\n"
        "    if filters.get('collection', '').startswith('we'):\n"
        "        raise ConnectionError('service unavailable')\n"
        "    return 'An answer about ' + question\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("flaky_system", None)
    config = config_factory(
        collect__answers={"source": "entrypoint", "entrypoint": "flaky_system:answer", "retries": 1}
    )
    manifest = run_flow(config, "flaky")
    assert manifest["status"] == "completed"
    answers = table(config, "answers", "flaky")
    failed = answers.filter(pl.col("status") == "failed")
    assert set(failed["question_id"]) == {q for q in answers["question_id"] if q.startswith("we")}
    assert all("service unavailable" in e for e in failed["error"])
    scores = table(config, "scores", "flaky")
    faith = scores.filter(pl.col("metric") == "faithfulness")
    for row in faith.iter_rows(named=True):
        if row["question_id"].startswith("we"):
            assert row["status"] == "skipped" and "no response" in row["error"]
        else:
            assert row["status"] == "ok"


def test_missing_upstream_table_is_a_clear_error(config_factory, fake) -> None:
    from ragaudit.errors import StageError

    config = config_factory()
    with pytest.raises(Exception) as info:
        run_flow(config, "nothing-yet", ["sort"])
    chain, exc = [], info.value
    while exc is not None:
        chain.append(exc)
        exc = exc.__cause__
    assert any(isinstance(e, StageError) and "'questions' is missing" in str(e) for e in chain)


def _stage_states(manifest: dict[str, Any]) -> dict[str, bool]:
    """Stage name → cached (the score parts folded into one ``score`` entry: all cached)."""
    out: dict[str, bool] = {}
    for name, entry in manifest["stages"].items():
        stage = name.split(":")[0]
        out[stage] = out.get(stage, True) and entry["cached"]
    return out


def test_edited_stage_source_reruns_it_and_what_it_feeds(config_factory, fake, monkeypatch) -> None:
    """Editing tasks/sort.py re-runs sort; downstream re-runs when sort's tables change."""
    from ragaudit.flows import _stages
    from ragaudit.tasks import sort as sort_mod

    config = config_factory()
    first = run_flow(config, "edit")
    assert not any(_stage_states(first).values())
    digest = _stages.module_digest

    def edited(version: str):
        def module_digest(name: str) -> str:
            return digest(name) + (version if name == sort_mod.__name__ else "")

        return module_digest

    # 1. An edit that changes nothing sort writes (say a comment): sort re-runs (its code
    # changed), writes the same bytes, and every other stage stays cached.
    monkeypatch.setattr(_stages, "module_digest", edited("comment"))
    noop = _stage_states(run_flow(config, "edit"))
    assert noop == {
        "collect": True,
        "sort": False,
        "ground_truth": True,
        "score": True,
        "report": True,
    }

    # 2. An edit that changes what sort decides (no candidate is relevant any more): sort and
    # everything downstream re-run, collect (upstream) stays cached.
    real = sort_mod.judge_relevance

    async def nothing_relevant(ctx, questions, candidates):
        out = await real(ctx, questions, candidates)
        for rel in out.values():
            rel.irrelevant[:0], rel.relevant[:] = rel.relevant, []
        return out

    monkeypatch.setattr(_stages, "module_digest", edited("nothing relevant"))
    monkeypatch.setattr(sort_mod, "judge_relevance", nothing_relevant)
    calls = fake.stats.calls
    changed = _stage_states(run_flow(config, "edit"))
    assert changed == {
        "collect": True,
        "sort": False,
        "ground_truth": False,
        "score": False,
        "report": False,
    }
    # Nothing new reaches the judge: the grades are the first run's prompts (memo hits), no
    # candidate is relevant so nothing is ordered, a question without a relevant context gets
    # no reference call (the questions with a given reference keep it), and what score still
    # asks it asked the first time.
    assert fake.stats.calls == calls
    assert table(config, "ranking", "edit")["ordered_ids"].list.len().sum() == 0


def test_stage_code_is_its_module_and_its_in_package_imports() -> None:
    from ragaudit.flows._stages import BY_NAME, code_modules

    sort_code = code_modules(BY_NAME["sort"].module)
    assert {"ragaudit.tasks.sort", "ragaudit.agreement", "ragaudit.ranking"} <= set(sort_code)
    assert "ragaudit.ordering" in sort_code and "ragaudit.prompts.pairwise" in sort_code
    # No stage's code holds another stage's module: an edit re-runs only its own stage.
    stage_modules = {s.module for s in BY_NAME.values()}
    for stage in BY_NAME.values():
        assert set(code_modules(stage.module)) & stage_modules == {stage.module}, stage.name
    assert "ragaudit.metrics._faithfulness" in code_modules(BY_NAME["score"].module)


async def test_retry_reads_the_exceptions_retryable_attribute() -> None:
    from prefect.states import Failed

    from ragaudit.errors import ConfigError, InputError, StageError, TransientError
    from ragaudit.flows.evaluate import retry_on_infrastructure
    from ragaudit.search import SearchError

    async def retried(exc: BaseException) -> bool:
        return await retry_on_infrastructure(
            None, None, Failed(data=exc, message="anything at all")
        )

    for final in (
        ConfigError("x"),
        InputError("x"),
        StageError("x"),
        SearchError("auth", "401"),
    ):
        assert await retried(final) is False, final
    for transient in (TransientError("x"), SearchError("timeout", "t"), OSError("disk")):
        assert await retried(transient) is True, transient
    # The class name in the message no longer decides: a retryable error mentioning one is
    # retried, a final one that does not is not.
    assert await retry_on_infrastructure(
        None, None, Failed(data=TransientError("x"), message="ConfigError")
    )
    assert not await retry_on_infrastructure(
        None, None, Failed(data=ConfigError("x"), message="Timeout")
    )


def test_a_judge_that_always_fails_is_reported_not_averaged(config_factory, fake) -> None:
    # The demo questions carry gold (reference_context_ids), so judge-vs-gold rows exist.
    config = config_factory(judge="fake/judge?errors=1", models__max_retries=0)
    manifest = run_flow(config, "broken")
    assert manifest["status"] == "completed_with_failures"
    assert any("the judge failed on" in w and "verdicts" in w for w in manifest["warnings"])
    agreement = table(config, "agreement", "broken")
    judged = agreement.filter(pl.col("comparison") != "engine_vs_gold")
    assert judged.height > 0
    assert set(judged["status"]) == {"failed"}
    assert judged["value"].null_count() == judged.height
    assert all("verdict failed" in r or "every question" in r for r in judged["reason"])
    # The engine against gold needs no judge: still figures.
    gold = agreement.filter(pl.col("comparison") == "engine_vs_gold")
    assert "ok" in set(gold["status"])


def test_gold_agreement_runs_with_the_judge_off(config_factory, fake) -> None:
    # The sort command runs the judge-free gold stage when the judge stages are off.
    config = config_factory(
        sort__enabled=False,
        ground_truth__enabled=False,
        score__metrics=["rouge_l"],
    )
    manifest = run_flow(config, "judge-free", ["collect", "sort"])
    assert manifest["status"] == "completed"
    assert "gold" in manifest["stages"] and "sort" not in manifest["stages"]
    assert manifest["stages"]["gold"]["llm"]["calls"] == 0
    agreement = table(config, "agreement", "judge-free")
    assert set(agreement["comparison"]) == {"engine_vs_gold"}
    assert "ok" in set(agreement["status"])


def test_cli_exits_3_when_the_judge_failed_on_most_calls(config_factory, fake, tmp_path) -> None:
    from typer.testing import CliRunner

    from ragaudit.cli import app

    config = config_factory(
        judge="fake/judge?errors=1", models__max_retries=0, score__metrics=["faithfulness"]
    )
    path = tmp_path / "config.json"
    path.write_text(config.model_dump_json(), encoding="utf-8")
    result = CliRunner().invoke(app, ["run", "--config", str(path), "--run-id", "cli-broken"])
    assert result.exit_code == 3, result.output
    assert "completed with failures" in result.output
    assert "Traceback" not in result.output
    manifest = RunFolder(config.runs_root, "cli-broken").read_manifest()
    assert manifest["status"] == "completed_with_failures" and manifest["warnings"]


def test_package_versions_are_read_once_and_handed_out_as_copies() -> None:
    from ragaudit.manifest import package_versions

    first = package_versions()
    first["prefect"] = "tampered"  # a caller's edit of its manifest must not reach the next
    second = package_versions()
    assert second["prefect"] and second["prefect"] != "tampered"
    assert second == package_versions() and second is not package_versions()


def test_a_table_read_again_is_served_until_the_file_changes(tmp_path) -> None:
    import pyarrow as pa

    run = RunFolder(tmp_path, "r")
    schema = TABLES["summary"]

    def one(metric: str) -> pa.Table:
        row = {f.name: None for f in schema}
        row.update({"metric": metric})
        return pa.Table.from_pylist([row], schema=schema)

    run.write("summary", one("faithfulness"))
    first = run.read("summary")
    assert run.read("summary") is first  # unchanged file: the same immutable Arrow table
    run.write("summary", one("answer_relevancy"))  # replaced by a rename: read anew
    assert run.read("summary")["metric"].to_pylist() == ["answer_relevancy"]


def test_a_second_run_builds_on_the_first_runs_judged_heads(config_factory, fake) -> None:
    """Two runs of one configuration: the second finds the first through its manifest
    (completed, earlier, same question set and config), reuses every head with no ordering
    call, and says so in its ranking table and manifest."""
    config = config_factory()
    first = run_flow(config, "night1", ["collect", "sort"])
    second = run_flow(config, "night2", ["collect", "sort"])
    assert first["ordering"]["head_source"].get("reused", 0) == 0
    night1, night2 = table(config, "ranking", "night1"), table(config, "ranking", "night2")
    judged = night2.filter(pl.col("head_source").is_not_null())
    assert judged.height > 0
    assert set(judged["head_source"]) == {"reused"}
    assert judged["ordering_calls"].sum() == 0
    assert night2["ordered_ids"].to_list() == night1["ordered_ids"].to_list()
    assert second["ordering"]["reused_share"] == 1.0
    assert second["ordering"]["signature"] == first["ordering"]["signature"]
