"""A full synthetic run folder for the HTML report's tests and bench: every table it reads.

Texts are real: DuReader questions and paragraphs (Chinese) and WikiEval questions and contexts
(English) from ``../shared/data`` when present, else the bundled demo set. Scores, verdicts
and the judge's reasons have the shapes the score and sort stages write (ragas-style
statements and verdicts); the agreement rows come from the sort stage's own ``agreement``.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import random
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ragaudit.agreement import JudgeOrder, aggregate, question_rows
from ragaudit.runfolder import RunFolder
from ragaudit.schemas import (
    AGREEMENT,
    ANSWERS,
    CANDIDATES,
    GROUND_TRUTH,
    QUESTIONS,
    RANKING,
    VERDICTS,
    to_table,
)
from support.paths import REPO_ROOT
from support.reporting_runs import write_run

REPO = REPO_ROOT
# A worktree sits one level deeper than the main checkout: the env var points at the data then.
SHARED = Path(os.environ.get("RAGAUDIT_SHARED_DATA", REPO.parent / "shared" / "data"))
CHROMIUM = Path("/usr/bin/chromium")
"""Debian's Chromium, driven headless by Playwright (its own browser download is unreachable)."""
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SMOKE_WARNING = (
    "The judge local/gemma-3-270m is a 270M base model: a smoke test of the pipeline, not an "
    "evaluation. Use a real judge (--judge openai/gpt-4o-mini, --judge ollama/qwen2.5:7b)."
)


def text_pool() -> tuple[list[tuple[str, str]], list[str]]:
    """(question, language) pairs and context paragraphs, Chinese and English."""
    questions: list[tuple[str, str]] = []
    paragraphs: list[str] = []
    dureader = SHARED / "dureader" / "search.dev.jsonl"
    wikieval = SHARED / "wikieval" / "ff.csv"
    if dureader.is_file() and wikieval.is_file():
        for line in dureader.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            questions.append((row["question"], "zh"))
            for doc in row["documents"]:
                paragraphs += [p for p in doc["paragraphs"] if 40 <= len(p) <= 600]
        with wikieval.open(encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                questions.append((row["question"], "en"))
                paragraphs += [p for p in row["context"].split("\n") if 80 <= len(p) <= 900]
    else:
        for line in (REPO / "data" / "demo" / "questions.jsonl").read_text().splitlines():
            row = json.loads(line)
            questions.append((row["question"], "zh" if row["question_id"][:2] == "dr" else "en"))
        for line in (REPO / "data" / "demo" / "corpus.jsonl").read_text().splitlines():
            paragraphs.append(json.loads(line)["text"])
    return questions, paragraphs


def _sentences(text: str, n: int, rng: random.Random) -> list[str]:
    parts = [s.strip() for s in text.replace("。", "。\n").replace(". ", ".\n").split("\n")]
    parts = [s for s in parts if len(s) > 8] or [text[:80]]
    return [rng.choice(parts)[:160] for _ in range(n)]


def _reason(metric: str, value: float, answer: str, contexts: list[str], rng: random.Random):
    """The judge's parsed answer as the score stage stores it, by the metric's family."""
    if metric in {"rouge_l", "bleu", "jaccard", "semantic_similarity"}:
        return {"precision": round(rng.random(), 4), "recall": round(rng.random(), 4)}
    if metric.startswith("context_precision") or metric == "context_relevance":
        return {
            "verdicts": [
                {"reason": _sentences(c, 1, rng)[0], "verdict": int(rng.random() < value)}
                for c in contexts[:5]
            ]
        }
    statements = _sentences(answer + "。" + " ".join(contexts[:2]), rng.randint(1, 5), rng)
    return {
        "metric": None,
        "steps": [
            {"step": "StatementGeneratorOutput", "output": {"statements": statements}},
            {
                "step": "NLIStatementOutput",
                "output": {
                    "statements": [
                        {
                            "statement": s,
                            "reason": _sentences(rng.choice(contexts), 1, rng)[0],
                            "verdict": int(rng.random() < value),
                        }
                        for s in statements
                    ]
                },
            },
        ],
    }


def write_full_run(
    root: Path,
    run_id: str,
    n_questions: int,
    metrics: list[str],
    *,
    top_k: int = 10,
    n_candidates: int = 20,
    warnings: list[str] | None = None,
    seed: int = 0,
) -> Path:
    """A run folder with every table the report reads; ~3% of score rows failed, 2% skipped."""
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    pool_q, pool_p = text_pool()
    # Chinese questions first so that the first one is always Chinese.
    pool_q.sort(key=lambda q: q[1] != "zh")
    ids = [f"q{i:04d}" for i in range(n_questions)]
    values: dict[str, list[float | None]] = {
        m: [None if rng.random() < 0.03 else float(v) for v in nrng.beta(4, 1.6, n_questions)]
        for m in metrics
    }
    run_dir = write_run(
        root,
        run_id,
        values,
        judge="fake/judge",
        question_ids=ids,
        warnings=warnings,
        score_overrides={"top_k": top_k},
        calls=[
            {
                "stage": stage,
                "model": "fake/judge",
                "tokens_in": 900,
                "tokens_out": 120,
                "latency_s": 0.2 + rng.random(),
                "cache_hit": rng.random() < 0.3,
                "cost_usd": 0.0003,
                "prompt_version": f"{stage}@2",
            }
            for stage in ["sort"] * 40 + ["ground_truth"] * 10 + [f"score:{m}" for m in metrics]
        ],
    )
    run = RunFolder(root, run_id)
    questions, answers, cands, verdicts, rankings, agree, truth = [], [], [], [], [], [], []
    contexts_of: dict[str, list[str]] = {}
    for i, qid in enumerate(ids):
        text, lang = pool_q[i % len(pool_q)]
        chosen = rng.sample(pool_p, n_candidates)
        gold = [f"{qid}-c{j}" for j in rng.sample(range(n_candidates), 2)]
        answer = _sentences(" ".join(chosen[:3]), 2, rng)
        questions.append(
            {
                "run_id": run_id,
                "question_id": qid,
                "question": text,
                "language": lang,
                "filters": "{}",
                "reference_context_ids": gold,
                "metadata": "{}",
            }
        )
        answers.append(
            {
                "run_id": run_id,
                "question_id": qid,
                "response": ("" if lang == "zh" else " ").join(answer),
                "status": "ok",
                "source": "column",
            }
        )
        relevant_ids, irrelevant_ids = [], []
        for j, ctx in enumerate(chosen):
            cid = f"{qid}-c{j}"
            rel = cid in gold or rng.random() < 0.35
            (relevant_ids if rel else irrelevant_ids).append(cid)
            cands.append(
                {
                    "run_id": run_id,
                    "question_id": qid,
                    "context_id": cid,
                    "text": ctx,
                    "engine_rank": j + 1,
                    "engine_score": float(n_candidates - j),
                    "gold_relevant": cid in gold,
                    "source": "{}",
                }
            )
            verdicts.append(
                {
                    "run_id": run_id,
                    "question_id": qid,
                    "context_id": cid,
                    "relevant": rel,
                    "reason": _sentences(ctx, 1, rng)[0],
                    "status": "ok",
                }
            )
        rng.shuffle(relevant_ids)
        groups = list(range(len(relevant_ids)))
        rankings.append(
            {
                "run_id": run_id,
                "question_id": qid,
                "ordered_ids": relevant_ids,
                "tie_group": groups,
                "irrelevant_ids": irrelevant_ids,
                "unjudged_ids": [],
                "strategy": "sample",
                "status": "ok",
            }
        )
        engine = [f"{qid}-c{j}" for j in range(n_candidates)]
        agree += question_rows(
            run_id,
            qid,
            engine,
            top_k,
            judge=JudgeOrder(relevant_ids, groups, irrelevant_ids, []),
            gold={cid: 1 for cid in gold},
        )
        truth.append(
            {
                "run_id": run_id,
                "question_id": qid,
                "reference": " ".join(_sentences(" ".join(chosen[:4]), 3, rng)),
                "origin": "generated",
                "mode": "fast",
                "status": "ok" if rng.random() > 0.05 else "partial",
                "supporting_ids": relevant_ids[:3],
                "calls": 3,
            }
        )
        contexts_of[qid] = chosen[:top_k]
    run.write("questions", to_table(questions, QUESTIONS))
    run.write("answers", to_table(answers, ANSWERS))
    run.write("candidates", to_table(cands, CANDIDATES))
    run.write("verdicts", to_table(verdicts, VERDICTS))
    run.write("ranking", to_table(rankings, RANKING))
    run.write("agreement", to_table(agree + aggregate(run_id, agree), AGREEMENT))
    run.write("ground_truth", to_table(truth, GROUND_TRUTH))
    # Scores: the judge's reasons in the shapes the metrics store, some rows skipped.
    scores = run.read("scores").to_pylist()
    by_q = {a["question_id"]: a["response"] for a in answers}
    for row in scores:
        if row["status"] == "ok" and rng.random() < 0.02:
            row.update(status="skipped", value=None, reason=None, error="no reference contexts")
        elif row["status"] == "ok":
            row["reason"] = json.dumps(
                _reason(
                    row["metric"],
                    row["value"],
                    by_q[row["question_id"]],
                    contexts_of[row["question_id"]],
                    rng,
                ),
                ensure_ascii=False,
            )
    from ragaudit.schemas import SCORES

    run.write("scores", to_table(scores, SCORES))
    return run_dir


UNREADABLE = re.compile(r"\b(None|nan|NaN|undefined|null)\b|\[object Object\]|-0\.0+\b")
"""What a rendered page must never show: Python's and JavaScript's names for nothing, a sign
on zero."""


@contextlib.contextmanager
def chromium_page(allowed: Callable[[str], bool]) -> Iterator[tuple[Any, dict]]:
    """A headless Chromium page that may fetch only the URLs ``allowed`` says yes to.

    Yields the page and what it saw: ``errors`` (console errors, page errors), ``requests``
    (every URL asked for) and ``outside`` (those refused).
    """
    from playwright.sync_api import sync_playwright

    found: dict = {"errors": [], "requests": [], "outside": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on(
                "console", lambda m: found["errors"].append(m.text) if m.type == "error" else None
            )
            page.on("pageerror", lambda e: found["errors"].append(str(e)))

            def route(r: Any) -> None:
                url = r.request.url
                found["requests"].append(url)
                if allowed(url):
                    r.continue_()
                else:
                    found["outside"].append(url)
                    r.abort()

            page.route("**/*", route)
            yield page, found
        finally:
            browser.close()


def served_from(origin: str) -> Callable[[str], bool]:
    """URLs of one server (``http://127.0.0.1:8765``), and data: URLs the page builds itself."""
    return lambda url: url.startswith(origin + "/") or url.startswith("data:")


@contextlib.contextmanager
def offline_page(page_path: Path) -> Iterator[tuple[Any, dict]]:
    """A headless Chromium page on ``page_path`` that may fetch nothing else (loaded)."""
    with chromium_page(lambda url: url == page_path.as_uri()) as (page, found):
        page.goto(page_path.as_uri())
        yield page, found


def browse(page_path: Path, *, open_all: bool = False, screenshot: Path | None = None) -> dict:
    """Load a page offline in headless Chromium: its console errors, requests and text.

    With ``open_all``, every question of a run's page is opened first (its drill-down drawn).
    ``split_tokens`` counts short tokens of the judge's reasons (ids, verdicts) set on more
    than one line.
    """
    with offline_page(page_path) as (page, found):
        if open_all:
            page.wait_for_selector("html[data-drill=ready]", timeout=10_000)
            page.click("#expand")
            page.wait_for_function(
                "() => [...document.querySelectorAll('details.q')].every("
                "d => d.querySelector('.body h3'))",
                timeout=10_000,
            )
        found["text"] = page.inner_text("body")
        found["split_tokens"] = page.evaluate(
            "() => [...document.querySelectorAll('.why .tok, .why dt')]"
            ".filter(e => e.getClientRects().length > 1 || e.getBoundingClientRect().height"
            " > 1.6 * parseFloat(getComputedStyle(e).lineHeight || 16)).map(e => e.textContent)"
        )
        if screenshot is not None:
            page.screenshot(path=str(screenshot), full_page=True)
    return found


__all__ = ["SMOKE_WARNING", "UNREADABLE", "browse", "offline_page", "text_pool", "write_full_run"]
