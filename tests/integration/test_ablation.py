"""Ablation sweeps: subsets, the plan, the reference pipeline end to end, charts in a browser."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.paths import REPO_ROOT

from ragaudit.ablation import AblateConfig, index_group, plan, point_id, select_subset
from ragaudit.config import load_config
from ragaudit.search import Document

REPO = REPO_ROOT
DEMO = REPO / "data" / "ablation"


def _config(tmp_path: Path, sweeps: dict[str, list[Any]] | None = None, **ablate: Any):
    cfg = load_config(
        DEMO / "ablate.yaml",
        {
            "questions": str(DEMO / "questions.jsonl"),
            "runs_root": str(tmp_path / "runs"),
            "cache_dir": str(tmp_path / "cache"),
            "limit": 5,
            # The fake generator answers with whole retrieved sentences: the demo's 256 output
            # tokens (sized for the offline model) would cut its longer Chinese answers off.
            "models": {
                "judge": "fake/judge",
                "embedder": "fake/embed",
                "backoff_s": 0.0,
                "max_output_tokens": 1024,
            },
            "report": {"bootstrap_samples": 200, "compare_resamples": 199},
            "ablate": {"corpus": str(DEMO / "corpus.jsonl"), **ablate},
        },
        environ={},
    )
    if sweeps is not None:  # replaced whole: a config file's sweeps merge key by key
        cfg = cfg.model_copy(update={"ablate": cfg.ablate.model_copy(update={"sweeps": sweeps})})
    return cfg


def test_subset_is_whole_documents_deterministic_and_nested() -> None:
    docs = [Document(id=f"d{i}", text="字" * (100 + i), metadata={}) for i in range(50)]
    small = select_subset(docs, 1000, {"d7"})
    large = select_subset(docs, 3000, {"d7"})
    assert small[0].id == "d7"  # the documents the questions name come first
    assert sum(len(d.text.encode()) for d in small) <= 1000
    assert [d.id for d in large[: len(small)]] == [d.id for d in small]  # nested
    assert [d.id for d in select_subset(list(reversed(docs)), 3000, {"d7"})] == [
        d.id for d in large
    ]  # deterministic whatever the corpus order
    assert all(d in docs for d in large)  # whole documents, never cut


def test_default_plan_is_baseline_plus_one_factor_sweeps() -> None:
    points = plan(AblateConfig())
    ids = [p.point_id for p in points]
    assert len(ids) == len(set(ids)) == 12  # 1 + 2 sizes + 4 chunk sizes + 1 context + 4 k
    assert ids[0] == "fs5000000-cs500-ov50-ctx1-k5"
    assert set(points[0].dimensions) == {"file_size", "chunk_size", "context", "top_k"}
    # One index per (subset, chunking): the five top-k points share the baseline's.
    assert len({index_group(p.point) for p in points}) == 8
    grid = plan(AblateConfig(sweeps={"top_k": [3, 5], "context": [True, False]}, grid=True))
    assert len(grid) == 4
    on_k = [p.point_id for p in grid if "top_k" in p.dimensions]
    assert all("ctx1" in pid for pid in on_k)  # the context=off points are off the k chart


@pytest.mark.parametrize("model", ["fake/judge", "gpt-4o-mini"])
@pytest.mark.parametrize(("size", "context"), [(60, True), (300, False), (500, True)])
def test_chunks_never_exceed_the_size_in_the_generators_tokens(
    model: str, size: int, context: bool
) -> None:
    from ragaudit.ablation import AblationPoint, chunk_tokenizer, chunking
    from ragaudit.cache import count_tokens
    from ragaudit.config import RunConfig
    from ragaudit.search import chunk_documents, read_corpus

    docs = read_corpus(DEMO / "corpus.jsonl")[:40]
    cfg = RunConfig.model_validate({"models": {"judge": "fake/judge", "generator": model}})
    assert chunk_tokenizer(cfg) == model  # the generator's tokenizer by default
    point = AblationPoint(chunk_size=size, overlap=50, context=context)
    chunks = chunk_documents(docs, chunking(point, chunk_tokenizer(cfg)))
    counts = [count_tokens(model, c.text) for c in chunks]
    assert max(counts) <= size  # the context line included
    assert sum(counts) / len(counts) > size / 2  # windows are filled, not cut short
    for doc in docs:  # every word of a document is in a chunk: windows overlap or touch
        spans = [
            (c.metadata["start"], c.metadata["end"])
            for c in chunks
            if c.id.startswith(f"{doc.id}#")
        ]
        for a, b in zip(spans, spans[1:], strict=False):
            assert not re.search(r"\w", doc.text[a[1] : b[0]]), doc.id
        assert not re.search(r"\w", doc.text[spans[-1][1] :])  # at most closing punctuation
    # The old unit (a CJK character or a Latin word each) stays available, and differs.
    words = cfg.model_copy(update={"ablate": cfg.ablate.model_copy(update={"chunk_unit": "words"})})
    assert chunk_tokenizer(words) is None
    by_words = chunk_documents(docs, chunking(point, chunk_tokenizer(words)))
    assert max(count_tokens(model, c.text) for c in by_words) > size


def test_bad_sweep_names_the_dimension(tmp_path: Path) -> None:
    from ragaudit.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown dimension 'chunks'"):
        load_config(overrides={"ablate": {"sweeps": {"chunks": [1]}}}, environ={})
    with pytest.raises(ConfigError, match="not a size"):
        load_config(overrides={"ablate": {"sweeps": {"file_size": ["big"]}}}, environ={})


def _report(cells: dict[str, list[tuple[str, float | None, str | None]]]) -> Any:
    """A stand-in for a point's report: its questions' score cells, metric by metric."""
    from types import SimpleNamespace

    from ragaudit.reporting._model import ScoreCell

    n = len(next(iter(cells.values())))
    questions = [
        SimpleNamespace(
            question_id=f"q{i}",
            scores={
                m: ScoreCell(
                    metric=m, value=rows[i][1], status=rows[i][0], error=rows[i][2], reason=None
                )  # fmt: skip
                for m, rows in cells.items()
            },
        )
        for i in range(n)
    ]
    return SimpleNamespace(questions=questions, summary=[])


def test_the_default_objective_leaves_out_a_metric_no_point_scored(tmp_path: Path) -> None:
    """The offline embedder skips answer relevancy on every Chinese question: the default
    objective is then the other metrics, and says so; a configured one is kept as written."""
    from ragaudit.ablation import effective_objective, question_objective

    why = "the embedder is English-only"
    reports = [
        _report(
            {
                "faithfulness": [("ok", 0.5 + p / 10, None), ("failed", None, "no verdicts")],
                "answer_relevancy": [("skipped", None, why), ("skipped", None, why)],
                "context_precision": [("ok", 0.9, None), ("ok", 0.7, None)],
                "nonllm_context_recall": [("ok", 1.0, None), ("ok", 0.0, None)],
            }
        )
        for p in range(2)
    ]
    weights, left_out = effective_objective(_config(tmp_path), reports)
    assert left_out == {"answer_relevancy": why}
    assert set(weights) == {"faithfulness", "context_precision", "nonllm_context_recall"}
    # The first question now has an objective at every point; the second, a failed cell, none.
    assert [sorted(question_objective(r, weights)) for r in reports] == [["q0"], ["q0"]]

    chosen = _config(tmp_path, objective={"faithfulness": 1.0, "answer_relevancy": 1.0})
    assert effective_objective(chosen, reports) == (
        {"faithfulness": 1.0, "answer_relevancy": 1.0},
        {},
    )
    nothing = [_report({m: [("skipped", None, why)] for m in weights | {"answer_relevancy": 1}})]
    assert effective_objective(_config(tmp_path), nothing)[1] == {}


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory, prefect_harness: None) -> dict[str, Any]:
    """One small sweep run twice: top-k 1/3/5/10 at a fixed chunking, and context on/off."""
    from ragaudit.cache._fake import FAKE
    from ragaudit.flows.ablate import run_ablation

    tmp = tmp_path_factory.mktemp("ablate")
    cfg = _config(
        tmp,
        baseline={"file_size": "80KB", "chunk_size": 300, "top_k": 3},
        sweeps={"top_k": [1, 3, 5, 10], "context": [True, False]},
        parallel=3,
    )
    FAKE.reset()
    first = run_ablation(cfg)
    FAKE.reset()
    second = run_ablation(cfg)
    return {"config": cfg, "first": first, "second": second, "calls": FAKE.stats.calls}


def test_context_recall_never_falls_as_top_k_grows(swept: dict[str, Any]) -> None:
    from ragaudit.ablation import ablation_dir

    folder = ablation_dir(swept["config"])
    table = pl.read_parquet(folder / "ablation.parquet")
    recall = (
        table.filter((pl.col("metric") == "nonllm_context_recall") & pl.col("context"))
        .sort("top_k")
        .select("top_k", "mean", "chunk_size", "file_size")
    )
    assert recall["top_k"].to_list() == [1, 3, 5, 10]
    assert recall["chunk_size"].n_unique() == 1 and recall["file_size"].n_unique() == 1
    means = recall["mean"].to_list()
    assert all(b >= a for a, b in zip(means, means[1:], strict=False)), means
    assert means[-1] > means[0]  # the sweep moves it at all
    # Per question too: a larger k retrieves a superset, so no question loses recall.
    per_q = {}
    for k in (1, 3, 5, 10):
        rid = point_id(swept["config"].ablate.baseline.model_copy(update={"top_k": k}))
        scores = pl.read_parquet(folder / "points" / rid / "scores.parquet").filter(
            pl.col("metric") == "nonllm_context_recall"
        )
        per_q[k] = dict(zip(scores["question_id"], scores["value"], strict=True))
    for a, b in ((1, 3), (3, 5), (5, 10)):
        assert all(per_q[b][q] >= per_q[a][q] for q in per_q[a])


def test_every_point_folder_is_complete(swept: dict[str, Any]) -> None:
    from ragaudit.ablation import ablation_dir

    folder = ablation_dir(swept["config"])
    first = swept["first"]
    assert first["points"] == first["evaluated"] == 5 and not first["failed"]
    assert first["indexes"] == first["indexes_built"] == 2  # context on / off
    for rid in [p.point_id for p in plan(swept["config"].ablate)]:
        run = folder / "points" / rid
        manifest = json.loads((run / "manifest.json").read_text())
        assert manifest["status"] == "completed", rid
        for table in ("questions", "candidates", "answers", "retrieval", "scores", "summary"):
            assert (run / f"{table}.parquet").is_file(), (rid, table)
        # report.formats is empty for a point: the ablation's own report covers them all.
        assert not (run / "report.html").exists() and not (run / "report.xlsx").exists()
        answers = pl.read_parquet(run / "answers.parquet")
        assert answers["status"].to_list() == ["ok"] * 5
        k = int(rid.rsplit("k", 1)[1])
        cands = pl.read_parquet(run / "candidates.parquet")
        assert cands.group_by("question_id").len()["len"].max() <= k
        # The generator answered from what it retrieved: its answer is made of those chunks.
        pipe = [json.loads(x) for x in (run / "pipeline.jsonl").read_text().splitlines()]
        for row in pipe:
            if row["response"] != "I do not know.":
                assert any(s[:10] in "".join(row["retrieved_contexts"]) for s in [row["response"]])
    for name in ("ablation.parquet", "outliers.parquet", "report.html", "ablation.xlsx"):
        assert (folder / name).is_file()
    summary = json.loads((folder / "ablation.json").read_text())
    table = pl.read_parquet(folder / "ablation.parquet")
    best = table.filter(pl.col("is_best"))["point_id"].unique().to_list()
    assert best == [summary["best"]]
    objective = table.filter(pl.col("metric") == "objective")
    assert objective["mean"].max() == objective.filter(pl.col("is_best"))["mean"][0]
    assert set(table.columns) >= {"mean", "ci_low", "ci_high", "n_ok", "n_failed", "n_skipped"}
    assert set(table.columns) >= {"calls", "cost_usd", "indistinguishable"}


def test_second_run_resumes_without_provider_calls(swept: dict[str, Any]) -> None:
    second = swept["second"]
    assert swept["calls"] == 0
    assert second["llm"]["provider_calls"] == 0 and second["llm"]["cache_hits"] > 0
    assert second["indexes_built"] == 0


def test_charts_render_in_headless_chromium(swept: dict[str, Any], tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    from ragaudit.ablation import ablation_dir

    folder = ablation_dir(swept["config"])
    charts = sorted((folder / "charts").glob("*.svg"))
    assert [c.stem for c in charts] == ["context", "top_k"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--no-first-run",
            ],
        )
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto((folder / "report.html").as_uri())
        svgs = page.locator("figure svg")
        assert svgs.count() == 2
        for i in range(2):
            box = svgs.nth(i).bounding_box()
            assert box is not None and box["width"] > 300 and box["height"] > 200
        text = page.inner_text("body")
        assert "Best combination" in text and "fixed:" in text
        svgs.nth(1).screenshot(path=str(tmp_path / "top_k.png"))
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        browser.close()
    assert all(u.startswith("file:") for u in requests)  # self-contained: nothing fetched
    assert (tmp_path / "top_k.png").stat().st_size > 5000


def test_a_failed_generation_fails_the_answer_and_skips_its_metrics(
    tmp_path: Path, prefect_harness: None
) -> None:
    from ragaudit.ablation import ablation_dir
    from ragaudit.cache._fake import FAKE, FakeRequest
    from ragaudit.flows.ablate import run_ablation

    cfg = _config(
        tmp_path,
        {},
        baseline={"file_size": "80KB", "chunk_size": 300, "top_k": 3},
        name="failing",
    )
    cfg = cfg.model_copy(update={"limit": 3})
    from ragaudit.ablation import question_set
    from ragaudit.dataset import load_questions

    target = load_questions(question_set(cfg), limit=cfg.limit)[1]
    bad = target.question_id

    def broken(req: FakeRequest) -> Any:
        # The generator's reply for one question is never valid JSON: the gateway gives up.
        if req.title == "RagAnswer" and req.payload.get("question") == target.question:
            return "no JSON here"
        return None

    with FAKE.script(broken):
        out = run_ablation(cfg)
    assert out["evaluated"] == 1 and not out["failed"]
    run = ablation_dir(cfg) / "points" / point_id(cfg.ablate.baseline)
    answers = pl.read_parquet(run / "answers.parquet")
    failed = answers.filter(pl.col("status") == "failed")
    assert failed["question_id"].to_list() == [bad]
    assert answers.filter(pl.col("status") == "ok").height == 2
    assert "the system gave no answer" in failed["error"][0]
    scores = pl.read_parquet(run / "scores.parquet").filter(pl.col("question_id") == bad)
    by_metric = dict(zip(scores["metric"], scores["status"], strict=True))
    # Metrics that read the answer are skipped naming the failed answer; retrieval's are scored.
    assert by_metric["faithfulness"] == by_metric["answer_relevancy"] == "skipped"
    assert "answer failed" in scores.filter(pl.col("metric") == "faithfulness")["error"][0]
    assert by_metric["nonllm_context_recall"] == "ok"


def test_a_generated_test_set_drives_an_ablation(tmp_path: Path, prefect_harness: None) -> None:
    """``ragaudit testset`` output from the ablation's own corpus, used as ``ablate.questions``."""
    import asyncio

    from ragaudit.ablation import ablation_dir
    from ragaudit.cache import Gateway
    from ragaudit.cache._fake import FAKE, FakeRequest
    from ragaudit.flows.ablate import run_ablation
    from ragaudit.lang import sentences
    from ragaudit.metrics import Deps
    from ragaudit.testset import generate_testset, write_question_set

    corpus = [json.loads(x) for x in (DEMO / "corpus.jsonl").read_text().splitlines()[:12]]
    small = tmp_path / "corpus.jsonl"
    small.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in corpus))

    def writer(req: FakeRequest) -> Any:
        # The fake generator asks about a context's first sentence; the checker accepts it.
        if req.title == "GeneratedQuestion":
            first = sentences(req.payload["contexts"][0])[0][:40]
            return {"question": f"{first}是什么？", "reference": first}
        if req.title == "AnswerabilityVerdict":
            return {"answerable": True, "reason": "scripted"}
        return None

    gateway = Gateway(tmp_path / "testset-memo", concurrency=8, backoff_s=0.0)
    deps = Deps.of(gateway=gateway, judge="fake/judge", embedder="fake/embed", options={})
    try:
        with FAKE.script(writer):
            rows = asyncio.run(generate_testset(corpus, deps, size=4, kinds=("single_document",)))
    finally:
        gateway.close()
    generated = write_question_set(rows, tmp_path / "testset.jsonl")
    assert len(rows) == 4

    cfg = _config(
        tmp_path,
        {"top_k": [1, 3]},
        baseline={"file_size": "80KB", "chunk_size": 300, "top_k": 3},
        corpus=str(small),
        questions=str(generated),
        name="from-testset",
    )
    cfg = cfg.model_copy(update={"limit": None})
    out = run_ablation(cfg)
    assert out["points"] == out["evaluated"] == 2 and not out["failed"]
    for k in (1, 3):
        run = (
            ablation_dir(cfg)
            / "points"
            / point_id(cfg.ablate.baseline.model_copy(update={"top_k": k}))
        )
        pipe = [json.loads(x) for x in (run / "pipeline.jsonl").read_text().splitlines()]
        assert [r["question_id"] for r in pipe] == [r["question_id"] for r in rows]
        assert all(r["reference_contexts"] for r in pipe)  # the generated references, as is
        scores = pl.read_parquet(run / "scores.parquet")
        recall = scores.filter(pl.col("metric") == "nonllm_context_recall")
        assert recall["status"].to_list() == ["ok"] * 4
    # The questions' own documents are in the subset first: their chunks are retrievable.
    subset = (ablation_dir(cfg) / "indexes").glob("*/subset.jsonl")
    ids = {json.loads(x)["id"] for f in subset for x in f.read_text().splitlines()}
    assert {i for r in rows for i in r["reference_context_ids"]} <= ids
