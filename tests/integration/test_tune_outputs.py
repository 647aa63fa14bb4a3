"""What a tune's outputs say about what it measured: folds and a holdout's reach, the pool a
figure depends on, ids graded once for one text; and the files: in the question set's order on
every rerun, no stale run file, a page whose intervals stay on one line at 1400 px."""

from __future__ import annotations

import asyncio
import copy
import html
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.html_runs import CHROMIUM, chromium_page
from support.runs import make_config

from ragaudit.cache import hold_gateway
from ragaudit.tuning import (
    POOL_NOTE,
    QRELS,
    REPORT,
    console_lines,
    recommend,
    render_html,
    run_tune,
    split_questions,
    summary,
    table_rows,
    write_outputs,
)


def _values(n: int, gains: dict[str, float], seed: int = 3) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    qids = [f"q{i:03d}" for i in range(n)]
    base = {q: float(rng.uniform(0.3, 0.9)) for q in qids}
    out: dict[str, Any] = {"baseline": {"ndcg": base}}
    for name, gain in gains.items():
        out[name] = {"ndcg": {q: base[q] + gain + float(rng.normal(0, 0.08)) for q in qids}}
    return out


def _decide(values: dict[str, Any], folds: int | None) -> Any:
    qids = list(values["baseline"]["ndcg"])
    splits = split_questions(qids, 0.3, 0, folds)
    return recommend(values, "baseline", ["ndcg"], splits, resamples=999, bootstrap_samples=200)


def test_a_small_holdout_says_what_it_can_detect_and_advises_folds() -> None:
    d = _decide(_values(100, {"a": 0.02, "b": 0.018}), None)
    assert d.winner == "a" and d.recommended == "baseline"
    note = d.holdout_note or ""
    found = re.search(r"30 held-out questions detect a gain of about \+(\d\.\d{3}) or more", note)
    assert found, note
    # The figure is the normal approximation's: (z(.975) + z(.8)) · s / √30.
    seen = float(re.search(r"tuning questions' gain, \+(\d\.\d{3})", note).group(1))  # type: ignore[union-attr]
    assert seen < float(found.group(1)) and "set tune.folds" in note
    assert note in d.why
    # Too few to ever move: said as such.
    few = _decide(_values(12, {"a": 0.05}), None)
    assert (few.holdout_note or "").startswith("4 held-out questions can never show a gain")


def test_folds_say_the_gain_pools_each_folds_winner() -> None:
    d = _decide(_values(100, {"a": 0.02, "b": 0.019}, seed=5), 5)
    assert len(d.fold_winners) == 5
    assert d.holdout_note is None
    assert re.search(r"each fold's winner \(\w+ in (all 5|\d of 5) folds", d.why), d.why
    assert all(name in d.why for name in set(d.fold_winners)), d.why


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("outputs")
    tune = {
        "name": "outputs",
        "depth": 5,
        "metrics": ["ndcg", "precision", "recall", "mrr"],
        "variants": {
            "hybrid-long-variant-name": {"mode": "hybrid", "vector_weight": 0.25, "rrf_k": 10},
            "vector": {"mode": "vector"},
            "short": {"top_n": 3},
        },
    }
    config = make_config(
        tmp,
        collect__top_n=10,
        tune=tune,
        report={"compare_resamples": 199, "bootstrap_samples": 100},
    )
    with hold_gateway(config) as gateway:
        out = asyncio.run(run_tune(config, gateway))
    return out


def test_the_pool_note_is_on_the_page_the_console_and_tune_json(tuned: Any, tmp_path: Path) -> None:
    assert "depends on which variants were pooled" in POOL_NOTE
    assert POOL_NOTE in console_lines(tuned, tmp_path)
    assert summary(tuned)["pool_note"] == POOL_NOTE
    assert POOL_NOTE in html.unescape(render_html(tuned))


def test_the_console_says_why_calls_are_fewer_than_the_pool(tuned: Any, tmp_path: Path) -> None:
    # The demo corpus holds one paragraph under two ids: graded once, for both.
    texts = [
        (tuned.questions[q].question, t)
        for q, docs in tuned.pool.texts.items()
        for t in docs.values()
    ]
    shared = len(texts) - len(set(texts))
    assert shared > 0
    assert tuned.calls["provider_calls"] == tuned.pool.size - shared
    first = console_lines(tuned, tmp_path)[0]
    assert f"pool {tuned.pool.size} documents; {tuned.pool.size - shared} judge calls" in first
    assert f"{shared} pooled ids share a text with another and take its grade" in first
    assert summary(tuned)["shared_texts"] == shared


def _reversed(out: Any) -> Any:
    """``out`` as if every search and grade had finished in the opposite order."""
    other = copy.copy(out)
    other.runs = []
    for run in out.runs:
        moved = copy.copy(run)
        moved.questions = dict(reversed(list(run.questions.items())))
        other.runs.append(moved)
    other.pool = copy.copy(out.pool)
    other.pool.grades = {
        q: dict(reversed(list(g.items()))) for q, g in reversed(list(out.pool.grades.items()))
    }
    return other


def test_files_come_out_in_one_order_and_stale_run_files_go(tuned: Any, tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    tuned.config = tuned.config.model_copy(update={"runs_root": one})
    first = write_outputs(tuned)
    stale = first / "run.gone-variant.txt"
    stale.write_text("q 0 d 1 1 gone\n", encoding="utf-8")
    write_outputs(tuned)
    assert not stale.exists()
    other = _reversed(tuned)
    other.config = tuned.config.model_copy(update={"runs_root": two})
    second = write_outputs(other)
    names = sorted(p.name for p in first.glob("*.txt"))
    assert names == sorted(p.name for p in second.glob("*.txt")) and QRELS in names
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    qids = list(tuned.questions)
    seen = list(dict.fromkeys(line.split()[0] for line in (first / QRELS).read_text().splitlines()))
    assert seen == [q for q in qids if q in seen]


def test_the_gain_sentence_is_said_once(tuned: Any) -> None:
    out = copy.copy(tuned)
    qids = list(out.questions)
    rng = np.random.default_rng(0)
    base = {q: float(rng.uniform(0.2, 0.6)) for q in qids}
    metrics = out.config.tune.metrics
    lift = {r.variant.name: 0.2 if r.variant.name == "vector" else 0.0 for r in out.runs}
    out.values = {
        name: {m: {q: base[q] + up + float(rng.normal(0, 0.05)) for q in qids} for m in metrics}
        for name, up in lift.items()
    }
    out.decision = recommend(
        out.values, "baseline", metrics, out.splits, resamples=999, bootstrap_samples=100
    )
    assert out.decision.winner == "vector"
    page = render_html(out)
    gain = f"{out.decision.heldout_gain:+.3f}"
    section = page[page.index('id="recommendation"') : page.index("</section>")]
    assert section.count(gain) == 1, section


def test_folds_header_and_table_name_what_was_measured(tuned: Any) -> None:
    out = copy.copy(tuned)
    out.splits = split_questions(list(out.questions), 0.3, 0, 5)
    out.decision = recommend(
        out.values, "baseline", out.config.tune.metrics, out.splits, resamples=99
    )
    html = render_html(out)
    assert "5 questions in 5 folds (each held out once; each fold" in html
    assert "tuning, 5 held out" not in html
    assert "Held-out gain of each fold's winner" in html
    assert all(r["heldout_gain"] is None for r in table_rows(out) if r["status"] == "ok")


@pytest.mark.skipif(not CHROMIUM.exists(), reason="no Chromium at /usr/bin/chromium")
def test_the_variants_table_keeps_each_interval_on_one_line_at_1400px(
    tuned: Any, tmp_path: Path
) -> None:
    tuned.config = tuned.config.model_copy(update={"runs_root": tmp_path})
    page_path = write_outputs(tuned) / REPORT
    with chromium_page(lambda url: url == page_path.as_uri()) as (page, found):
        page.set_viewport_size({"width": 1400, "height": 900})
        page.goto(page_path.as_uri())
        # A metric's cell is its mean and, below it, its interval: each on one line.
        lines = page.evaluate(
            "() => [...document.querySelectorAll('#variants td.num')].flatMap(td =>"
            " [...td.childNodes].map(n => { const r = document.createRange();"
            " r.selectNodeContents(n.nodeType === 3 ? td : n); if (n.nodeType === 3)"
            " r.setEnd(n, n.length); return [n.textContent, r.getClientRects().length]; }))"
        )
        right = page.evaluate(
            "() => document.querySelector('#variants').getBoundingClientRect().right"
        )
    assert found["errors"] == []
    intervals = [(text, n) for text, n in lines if "–" in text]
    assert len(intervals) == 4 * len(tuned.runs), lines
    assert all(n == 1 for _, n in lines), lines
    assert right <= 1400


def test_the_prefect_database_follows_the_runs_root(tmp_path: Path) -> None:
    runs = tmp_path / "elsewhere" / "runs"
    code = (
        "from ragaudit.cli._app import load_paid_config\n"
        f"load_paid_config(None, {{'runs_root': {str(runs)!r}, 'models': {{'judge': 'fake/j'}}}})\n"
        "import prefect.settings\n"
        "print(prefect.settings.get_current_settings().home)\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PREFECT_HOME", "RAGAUDIT_HOME") and not k.startswith("PREFECT_")
    }
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip().splitlines()[-1]) == tmp_path / "elsewhere" / "prefect"
