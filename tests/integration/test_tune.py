"""``ragaudit tune`` end to end: on osmem-server (three template variants), on the local backend
(budget, resume), and its report in headless Chromium. The fake judge grades by token overlap.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from support.html_runs import CHROMIUM, offline_page
from support.runs import make_config
from support.servers import index_into, ragaudit

from ragaudit.cache import hold_gateway
from ragaudit.config import load_config
from ragaudit.errors import ConfigError
from ragaudit.tuning import REPORT, judgment_store, run_tune, write_outputs

TOPICS = {
    "refund": ("refund for a damaged parcel", "how do I get a refund for a damaged parcel"),
    "password": ("reset a forgotten password", "how can I reset a forgotten password"),
    "invoice": ("download an invoice as pdf", "where can I download an invoice as pdf"),
    "shipping": ("shipping to another country", "what does shipping to another country cost"),
    "warranty": ("warranty on a broken screen", "is a broken screen covered by the warranty"),
    "account": ("close my account for good", "how do I close my account for good"),
    "coupon": ("apply a coupon code at checkout", "how to apply a coupon code at checkout"),
    "delivery": ("track a late delivery", "how can I track a late delivery"),
}

BOOSTED = {  # the text's match against a title match: the boost sets their balance
    "query": {
        "bool": {
            "must": "{{ filter_clauses }}",
            "should": [
                {
                    "match": {
                        "{{ text_field }}": {
                            "query": "{{ question }}",
                            "boost": "{{ params.boost }}",
                        }
                    }
                },
                {"match": {"metadata.title": {"query": "{{ question }}"}}},
            ],
        }
    }
}
TWO_FIELDS = {
    "query": {
        "bool": {
            "must": "{{ filter_clauses }}",
            "should": [
                {"multi_match": {"query": "{{ question }}", "fields": ["text", "metadata.title^2"]}}
            ],
        }
    }
}


def _corpus(path: Path) -> Path:
    """Per topic a collection: documents saying more or less of the question, and distractors
    whose title (which the judge never sees) matches it."""
    rows = []
    for topic, (phrase, question) in TOPICS.items():
        words = question.split()
        for i in range(16):
            # Two documents say the whole question, four half of it, the rest a word or two.
            share = {7: 1.0, 5: 0.5, 6: 0.5}.get(i % 8, 0.15)
            said = " ".join(words[: max(1, round(len(words) * share))])
            rows.append(
                {
                    "id": f"{topic}-{i}",
                    "text": f"note {i} on {topic}: {said}. other matters of the {topic} desk.",
                    "metadata": {"collection": topic, "title": phrase if i % 3 == 0 else "general"},
                }
            )
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _questions(path: Path) -> Path:
    rows = [
        {"question_id": f"q-{t}", "question": q, "filters": {"collection": t}, "response": "r"}
        for t, (_, q) in TOPICS.items()
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def engine(osmem_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    clone = osmem_server.clone()
    try:
        index_into(clone.url, _corpus(tmp_path_factory.mktemp("tune") / "c.jsonl"), "tune")
        yield clone
    finally:
        clone.close()


def _tune_yaml(tmp: Path, url: str, extra_variants: dict[str, Any] | None = None) -> Path:
    config = {
        "questions": str(_questions(tmp / "q.jsonl")),
        "runs_root": str(tmp / "runs"),
        "cache_dir": str(tmp / "cache"),
        "models": {"judge": "fake/judge", "embedder": "fake/embed", "backoff_s": 0.0},
        "collect": {
            "backend": "opensearch",
            "top_n": 20,
            "opensearch": {
                "hosts": [url],
                "index": "tune",
                "retries": 0,
                "query_template": BOOSTED,
            },
        },
        "report": {"compare_resamples": 999, "bootstrap_samples": 200},
        "tune": {
            "name": "engine-tune",
            "depth": 5,
            "params": {"boost": [1, 8]},
            "variants": {
                "two-fields": {"opensearch": {"query_template": TWO_FIELDS}},
                **(extra_variants or {}),
            },
            "metrics": ["ndcg", "precision", "recall", "mrr"],
        },
    }
    path = tmp / "tune.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tuned(
    engine: Any, tmp_path_factory: pytest.TempPathFactory, prefect_harness: None
) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("tuned")
    bad = {
        # Renders for no question (a name it lacks), and a query the engine refuses.
        "unrenderable": {
            "opensearch": {"query_template": {"query": {"match": {"text": "{{ nope }}"}}}}
        },
        "rejected": {"opensearch": {"query_template": {"query": {"no_such_query": {"x": 1}}}}},
    }
    path = _tune_yaml(tmp, engine.url, bad)
    dry = ragaudit("tune", "-c", str(path), "--dry-run")
    first = ragaudit("tune", "-c", str(path))
    second = ragaudit("tune", "-c", str(path))
    return {
        "tmp": tmp,
        "dry": dry,
        "first": first,
        "second": second,
        "folder": tmp / "runs" / "engine-tune",
    }


def test_three_template_variants_on_osmem_server(tuned: dict[str, Any]) -> None:
    folder = tuned["folder"]
    table = pl.read_parquet(folder / "tune.parquet")
    ok = table.filter(pl.col("status") == "ok")
    assert sorted(ok["variant"].unique()) == ["baseline", "boost=8", "two-fields"]
    assert ok.height == 3 * 4  # variant × metric
    assert ok.filter(pl.col("variant") == "baseline")["p_value"].is_null().all()
    tested = ok.filter(pl.col("variant") != "baseline")
    assert tested["p_adjusted"].is_not_null().all()
    assert (tested["p_adjusted"] >= tested["p_value"]).all()
    assert (ok["judged_at_k"] == 1.0).all()  # no budget: the whole pool is graded
    assert ok["ci_low"].is_not_null().all()
    # The failed variants are failed with their message, the others went on.
    failed = {
        r["variant"]: r["error"]
        for r in table.filter(pl.col("status") == "failed").iter_rows(named=True)
    }
    assert set(failed) == {"unrenderable", "rejected"}
    assert "nope" in failed["unrenderable"]
    assert "rejected the query" in failed["rejected"]
    # TREC files: the pool's qrels and one run per variant that searched.
    qrels = (folder / "pool.qrels.txt").read_text().splitlines()
    pooled = set()
    for name in ("baseline", "boost=8", "two-fields"):
        run = (folder / f"run.{name}.txt").read_text().splitlines()
        assert len(run) == 5 * len(TOPICS)
        pooled |= {(r.split()[0], r.split()[2]) for r in run}
    assert {(r.split()[0], r.split()[2]) for r in qrels} == pooled
    best = yaml.safe_load((folder / "best.yaml").read_text())
    assert best["collect"]["backend"] == "opensearch"
    summary = json.loads((folder / "tune.json").read_text())
    assert summary["pool_size"] == len(pooled)


def test_dry_run_prints_pool_and_tokens_and_the_rerun_pays_nothing(tuned: dict[str, Any]) -> None:
    dry = tuned["dry"]
    assert "boost=8" in dry and "two-fields" in dry and "prompt tokens" in dry
    pool_size = json.loads((tuned["folder"] / "tune.json").read_text())["pool_size"]
    assert f"pool {pool_size} documents: 0 graded already" in dry
    assert f"{pool_size} judge calls" in tuned["first"]
    assert "0 judge calls (all from the store/memo" in tuned["second"]
    assert "variant rejected failed" in tuned["second"]
    # The console's table: every variant that ran, ranked as tune.parquet ranks them.
    table = pl.read_parquet(tuned["folder"] / "tune.parquet").filter(pl.col("status") == "ok")
    ranked = table.filter(pl.col("metric") == table["metric"][0]).sort("rank")["variant"]
    lines = [line for line in tuned["second"].splitlines() if line.startswith("│")]
    assert [line.split("│")[2].split()[0] for line in lines] == ranked.to_list()


@pytest.mark.skipif(not CHROMIUM.exists(), reason="no Chromium at /usr/bin/chromium")
def test_tune_report_in_chromium(tuned: dict[str, Any]) -> None:
    page_path = tuned["folder"] / REPORT
    with offline_page(page_path) as (page, found):
        assert page.is_visible("#recommendation")
        recommendation = page.inner_text("#recommendation")
        gain = page.inner_text("#heldout-gain")
        variants = page.inner_text("#variants")
        marks = page.evaluate("() => document.querySelectorAll('figure.chart svg path').length")
        page.screenshot(path=str(tuned["tmp"] / "tune.png"), full_page=True)
    assert found["errors"] == []
    assert found["requests"] == [page_path.as_uri()]
    assert "Keep the baseline" in recommendation or "Recommended:" in recommendation
    table = pl.read_parquet(tuned["folder"] / "tune.parquet")
    winner = table.filter(pl.col("winner"))["variant"][0]
    assert gain.startswith("Held-out gain")
    # The figure is shown with its interval, or why there is none to show.
    assert ("95% CI" in gain) if winner != "baseline" else ("baseline itself scored best" in gain)
    assert "two-fields" in variants and "failed:" in variants
    assert marks > 3  # the boost sweep's chart is drawn


def test_a_budget_below_the_baselines_pool_fails_before_any_judge_call(
    tmp_path: Path, fake: Any
) -> None:
    config = make_config(
        tmp_path,
        collect__top_n=10,
        tune={"depth": 5, "max_judge_tokens": 100, "variants": {"deep": {"top_n": 3}}},
    )
    with (
        hold_gateway(config) as gateway,
        pytest.raises(ConfigError, match=r"^tune\.max_judge_tokens: "),
    ):
        asyncio.run(run_tune(config, gateway))
    assert fake.stats.calls == 0


def test_a_stopped_tune_pays_only_what_it_had_not_graded(tmp_path: Path, fake: Any) -> None:
    """A budget stops the first tune part-way (as a kill would); the memo is then deleted, so
    only the judgment store can spare the second tune the grades already paid."""
    tune: dict[str, Any] = {
        "depth": 5,
        "variants": {"hybrid": {"mode": "hybrid"}, "vector": {"mode": "vector"}},
    }
    first_cfg = make_config(tmp_path, collect__top_n=10, tune={**tune, "max_judge_tokens": 14_000})
    with hold_gateway(first_cfg) as gateway:
        first = asyncio.run(run_tune(first_cfg, gateway))
    paid = first.calls["provider_calls"]
    assert first.grading.left_ungraded > 0 and paid == first.grading.graded
    assert any(v < 1.0 for v in first.judged.values())
    write_outputs(first)
    shutil.rmtree(tmp_path / "cache")
    config = make_config(tmp_path, collect__top_n=10, tune=tune)
    with hold_gateway(config) as gateway:
        second = asyncio.run(run_tune(config, gateway))
    assert second.grading.found_in_store >= paid
    now = second.calls["provider_calls"]
    assert now == second.grading.graded > 0
    # Every grade is in the store once: what the first paid was never asked again.
    assert len(judgment_store(config)) == paid + now
    assert all(v == 1.0 for v in second.judged.values())


def test_optuna_trials_are_pooled_variants(engine: Any, tmp_path: Path, fake: Any) -> None:
    path = _tune_yaml(tmp_path, engine.url)
    data = yaml.safe_load(path.read_text())
    data["tune"].update(
        {
            "search": "optuna",
            "trials": 3,
            "params": {},
            "ranges": {"boost": {"low": 1, "high": 16, "log": True}},
        }
    )
    data["tune"]["baseline_params"] = {"boost": 1}
    config = load_config(None, data, environ={})
    with hold_gateway(config) as gateway:
        out = asyncio.run(run_tune(config, gateway))
    names = [r.variant.name for r in out.runs]
    assert names == ["baseline", "two-fields", "trial-1", "trial-2", "trial-3"]
    boosts = [r.variant.params["boost"] for r in out.runs[2:]]
    assert all(1 <= b <= 16 for b in boosts)
    assert {s.variant for s in out.decision.stats} == set(names)
    # Every trial's documents were graded once: the pool's calls and the store agree.
    assert out.calls["provider_calls"] == out.grading.graded == len(judgment_store(config))


def test_bad_input_is_one_line_naming_the_field_before_anything_runs(
    tmp_path: Path, fake: Any
) -> None:
    from typer.testing import CliRunner

    from ragaudit.cli import app

    config = {
        "questions": str(_questions(tmp_path / "q.jsonl")),
        "runs_root": str(tmp_path / "runs"),
        "models": {"judge": "fake/judge"},
        "collect": {"backend": "opensearch", "opensearch": {"query_template": BOOSTED}},
        "tune": {"params": {"boost": list(range(1, 60))}},
    }
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    result = CliRunner().invoke(app, ["tune", "-c", str(path)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: tune.max_variants: 59 variants"), lines
    assert "Traceback" not in result.output
    assert fake.stats.calls == 0
    assert not (tmp_path / "runs").exists()


@pytest.mark.usefixtures("prefect_harness")
def _earlier_run(tmp_path: Path, **overrides: Any) -> tuple[Any, list[dict[str, Any]]]:
    from ragaudit.flows.evaluate import evaluate

    config = make_config(
        tmp_path,
        collect__top_n=10,
        sort__order="none",
        ground_truth__enabled=False,
        score__metrics=["rouge_l"],
        report__formats=[],
        tune={"depth": 5, "variants": {"short": {"top_n": 3}}},
        **overrides,
    )
    asyncio.run(evaluate(config.model_dump_json(), "earlier", None))
    graded = [
        r
        for r in pl.read_parquet(tmp_path / "runs" / "earlier" / "verdicts.parquet").to_dicts()
        if r["status"] == "ok"
    ]
    # Another memo for the tune: only the store can spare the calls.
    return config.model_copy(update={"cache_dir": tmp_path / "other-cache"}), graded


def test_the_sort_stage_stores_its_grades_and_a_tune_pays_none_of_them_again(
    tmp_path: Path, fake: Any
) -> None:
    config, graded = _earlier_run(tmp_path)
    store = judgment_store(config)
    assert store.sources() == {"run:earlier"}
    assert 0 < len(store) <= len(graded)
    with hold_gateway(config) as gateway:
        out = asyncio.run(run_tune(config, gateway))
    assert out.from_runs == 0  # the sort stage already stored them: nothing left to import
    assert out.calls["provider_calls"] == 0  # every pooled document was in the run's top 10
    assert out.grading.found_in_store == out.pool.size


def test_grades_of_a_run_that_did_not_store_them_are_imported_once(
    tmp_path: Path, fake: Any
) -> None:
    config, graded = _earlier_run(tmp_path)
    # As a run made before the sort stage wrote to the store: its folder is the only record.
    shutil.rmtree(tmp_path / "runs" / "judgments")
    with hold_gateway(config) as gateway:
        out = asyncio.run(run_tune(config, gateway))
    assert 0 < out.from_runs <= len(graded)
    assert out.calls["provider_calls"] == 0
    assert out.grading.found_in_store == out.pool.size
    with hold_gateway(config) as gateway:
        again = asyncio.run(run_tune(config, gateway))
    assert again.from_runs == 0  # each run folder is read once


@pytest.mark.parametrize(
    "overrides",
    [{"models__judge_repeats": 2}, {"models__jury": ["fake/a", "fake/b"]}],
    ids=["repeats", "jury"],
)
def test_a_run_with_a_jury_or_repeats_stores_no_grade(
    tmp_path: Path, fake: Any, overrides: dict[str, Any]
) -> None:
    config, graded = _earlier_run(tmp_path, **overrides)
    assert graded  # the run did grade
    assert not (tmp_path / "runs" / "judgments").exists()
    with hold_gateway(config) as gateway:
        out = asyncio.run(run_tune(config, gateway))
    assert out.from_runs == 0  # nor are they imported from its folder
    assert out.calls["provider_calls"] > 0


def test_optuna_draws_the_local_backends_numeric_collect_fields(tmp_path: Path, fake: Any) -> None:
    tune: dict[str, Any] = {
        "depth": 5,
        "search": "optuna",
        "trials": 4,
        "collect_ranges": {
            "rrf_k": {"low": 1, "high": 100, "log": True},
            "vector_weight": {"low": 0.0, "high": 1.0},
            "top_n": {"low": 3, "high": 10},
        },
    }
    config = make_config(tmp_path, collect__top_n=10, collect__mode="hybrid", tune=tune)
    with hold_gateway(config) as gateway:
        out = asyncio.run(run_tune(config, gateway))
    assert [r.variant.name for r in out.runs] == ["baseline"] + [f"trial-{n}" for n in range(1, 5)]
    for run in out.runs[1:]:
        collect = run.variant.config.collect
        assert run.status == "ok"
        assert isinstance(collect.rrf_k, int) and 1 <= collect.rrf_k <= 100
        assert isinstance(collect.top_n, int) and 3 <= collect.top_n <= 10
        assert 0.0 <= collect.vector_weight <= 1.0
        # What was drawn is what the trial's collect section (best.yaml) says.
        assert run.variant.changes == {
            "rrf_k": collect.rrf_k,
            "vector_weight": collect.vector_weight,
            "top_n": collect.top_n,
        }
    # TPE drew different settings, and each trial's documents were graded once.
    assert len({tuple(sorted(r.variant.changes.items())) for r in out.runs[1:]}) > 1
    assert out.calls["provider_calls"] == out.grading.graded == len(judgment_store(config))
    assert {s.variant for s in out.decision.stats} == {r.variant.name for r in out.runs}


def test_tune_with_repeats_says_it_grades_with_the_judge_alone_before_any_call(
    tmp_path: Path, fake: Any
) -> None:
    config = make_config(
        tmp_path, collect__top_n=10, tune={"depth": 5, "variants": {"v": {"top_n": 3}}}
    )
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json")), encoding="utf-8")
    out = ragaudit("tune", "-c", str(path), "--dry-run", "--set", "models.judge_repeats=2")
    [line] = [x for x in out.splitlines() if "judge alone" in x]
    assert "ignores models.judge_repeats (2)" in line
    assert out.index("judge alone") < out.index("tune --dry-run")
    assert fake.stats.calls == 0


def test_a_store_part_with_a_string_grade_refuses_the_dry_run_in_one_line(
    tmp_path: Path, fake: Any
) -> None:
    """Round 5 #7: a part with a string grade crashed even ``--dry-run``."""
    from typer.testing import CliRunner

    from ragaudit.cli import app
    from ragaudit.schemas import JUDGMENTS

    config = make_config(
        tmp_path, collect__top_n=10, tune={"depth": 5, "variants": {"v": {"top_n": 3}}}
    )
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json")), encoding="utf-8")
    store = tmp_path / "runs" / "judgments"
    store.mkdir(parents=True)
    cols = {
        f.name: pa.array(["x"], f.type) if f.type == pa.string() else pa.nulls(1, f.type)
        for f in JUDGMENTS
    }
    cols["grade"] = pa.array(["3"])
    pq.write_table(pa.table(cols), store / "part-1-1-1.parquet")
    result = CliRunner().invoke(app, ["tune", "-c", str(path), "--dry-run"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "part-1-1-1.parquet" in result.output and "grade is string" in result.output
    assert fake.stats.calls == 0
