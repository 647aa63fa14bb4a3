"""The whole loop in one ``ragaudit view`` on loopback, driven in one headless Chromium.

Three runs: the list, a run's report, a comparison of two, a trend; then from a run's page the
sample is drawn and labelled with the keyboard, the page reloaded, a second person labels some
of the same items, and the run's page, built afresh from the folder, shows how far the judge
agrees with them and the figures they correct. The judge's grades are planted so that some
keys disagree with them; every figure checked is recomputed here from the files themselves.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pyarrow.parquet as pq
import pytest
from support.html_runs import CHROMIUM, chromium_page, served_from
from support.viewer_runs import running_view, write_runs

from ragaudit import labels
from ragaudit.runfolder import RunFolder
from ragaudit.schemas import CANDIDATES, VERDICTS, to_table

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium")

LABELLED = "run-1"


def _plant_grades(run_dir: Path) -> dict[str, int]:
    """Judge grades 0-3 on every candidate of the run; the grade of each grade item."""
    run = RunFolder(run_dir.parent, run_dir.name)
    rows = run.read("verdicts").to_pylist()
    for i, row in enumerate(rows):
        grade = (i * 7 + len(row["question_id"])) % 4
        row.update(grade=grade, relevant=grade >= 2, status="ok")
    run.write("verdicts", to_table(rows, VERDICTS))
    return {labels.item_id("grade", r["question_id"], r["context_id"]): r["grade"] for r in rows}


def _unique_texts(run_dir: Path) -> None:
    """Each candidate's text made its own: a pair labelled once is never asked again, and the
    bundled pools repeat a question and a passage across questions (a test of its own)."""
    run = RunFolder(run_dir.parent, run_dir.name)
    rows = run.read("candidates").to_pylist()
    for row in rows:
        row["text"] = f"{row['text']} [{row['context_id']}]"
    run.write("candidates", to_table(rows, CANDIDATES))


def _ann_key(position: int, judged: int) -> int:
    # Agrees with the judge on two items in three and reverses the scale on the third.
    return judged if position % 3 else 3 - judged


def _ready(page: Any, position: int) -> None:
    page.wait_for_selector(
        f"html[data-position='{position}'][data-state='ready'], html[data-state='done']",
        timeout=20_000,
    )


def _label(page: Any, ids: list[str], start: int, keys: dict[int, int]) -> None:
    """Answer items ``start``.. with the keyboard, one key per position in ``keys``."""
    for position in range(start, start + len(keys)):
        _ready(page, position)
        shown = page.eval_on_selector_all("#choices button", "bs => bs.map(b => b.dataset.key)")
        assert shown[0] == "0", f"item {position} ({ids[position]}) is not a grade item"
        page.keyboard.press(str(keys[position]))


def _latest(run_dir: Path) -> dict[tuple[str, str], float]:
    rows = labels.latest_labels(labels.read_labels(run_dir)).to_pylist()
    return {(r["annotator"], r["item_id"]): r["label"] for r in rows if r["label"] is not None}


def _row(rows: list[list[str]], between: str, statistic: str) -> list[str]:
    return next(r for r in rows if r[:3] == ["grade", between, statistic])


def test_list_compare_trend_label_and_see_the_judge_against_people(tmp_path: Path) -> None:
    from sklearn.metrics import cohen_kappa_score

    root = tmp_path / "runs"
    runs = write_runs(root, 3)
    run_dir = runs[1]
    _unique_texts(run_dir)
    judge = _plant_grades(run_dir)
    before = {f.name for f in run_dir.iterdir()}
    with running_view(root) as url:
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(url))
        with chromium_page(served_from(origin)) as (page, found):
            # The list; a run's report; two runs compared; a metric's trend.
            page.goto(url)
            listed = page.eval_on_selector_all("#runs tbody tr", "rs => rs.map(r => r.dataset.run)")
            assert sorted(listed) == ["run-0", "run-1", "run-2"]
            page.click("#runs a[href='/runs/run-0']")
            page.wait_for_selector("html[data-drill=ready]", timeout=60_000)
            assert "Metric means" in page.inner_text("body")
            page.go_back()
            page.check("input[name=a][value=run-0]")
            page.check("input[name=b][value=run-2]")
            page.click("#compare")
            page.wait_for_url(re.compile(r"/compare\?"))
            assert parse_qs(urlsplit(page.url).query) == {"a": ["run-0"], "b": ["run-2"]}
            assert "verdict" in page.inner_text("body").lower()
            page.go_back()
            page.click("tr[data-run=run-1] td:nth-child(9) a")
            page.wait_for_selector("#trend-figure svg")
            trend = page.eval_on_selector_all(
                "#trend tbody tr td:first-child", "t => t.map(x => x.innerText)"
            )
            assert trend == ["run-0", "run-1", "run-2"]

            # The run's page before any label: no people's section, a button to label.
            page.goto(f"{origin}/runs/{LABELLED}")
            page.wait_for_selector("html[data-drill=ready]", timeout=60_000)
            assert page.locator("#people").count() == 0
            page.click("form.ra-draw button")
            page.wait_for_url(re.compile(rf"/runs/{LABELLED}/label$"))
            sample = labels.read_sample(run_dir)
            assert sample is not None
            ids = sample["item_id"].to_pylist()

            # The first person: a name, then 20 items with the keyboard.
            page.wait_for_selector("#name", state="visible")
            page.fill("#name", "ann")
            page.press("#name", "Enter")
            ann = {p: _ann_key(p, judge[ids[p]]) for p in range(20)}
            _label(page, ids, 0, ann)
            _ready(page, 20)
            page.reload()
            _ready(page, 20)
            assert "20 labelled by you" in page.inner_text("#progress")

            # A second person on the first 8 of those items, differing from ann on two.
            page.click("#who button")
            page.fill("#name", "bob")
            page.press("#name", "Enter")
            bob = {p: (ann[p] + 1) % 4 if p in (2, 5) else ann[p] for p in range(8)}
            _label(page, ids, 0, bob)
            _ready(page, 8)

            stored = _latest(run_dir)
            assert {i: v for (who, i), v in stored.items() if who == "ann"} == {
                ids[p]: float(k) for p, k in ann.items()
            }
            assert {i: v for (who, i), v in stored.items() if who == "bob"} == {
                ids[p]: float(k) for p, k in bob.items()
            }

            # The run's page again, built afresh since labels.parquet changed: the judge
            # against these people, the people against each other, the corrected figures.
            page.click("#run-page")
            page.wait_for_url(f"{origin}/runs/{LABELLED}")
            page.wait_for_selector("#people-agreement", timeout=60_000)
            rows = [
                r.split("\t") for r in page.locator("#people-agreement tbody tr").all_inner_texts()
            ]
            pairs = [(judge[i], int(v)) for (_, i), v in stored.items()]
            # The sample as labelled, unweighted (the run's figure, weighted back, beside it).
            assert _row(rows, "judge vs people", "weighted_kappa")
            kappa = _row(rows, "judge vs people (sample, unweighted)", "weighted_kappa")
            assert float(kappa[3]) < 0.9  # the planted disagreement shows
            assert float(kappa[3]) == pytest.approx(
                cohen_kappa_score(*zip(*pairs, strict=True), weights="quadratic"), abs=0.0015
            )
            assert int(kappa[5]) == len(pairs) == 28
            assert re.fullmatch(r"-?[\d.]+ – -?[\d.]+", kappa[4])
            alpha = _row(rows, "judge vs people", "krippendorff_alpha")
            assert re.fullmatch(r"-?[\d.]+ – -?[\d.]+", alpha[4])
            human = _row(rows, "people vs people", "weighted_kappa")
            both = [(ann[p], bob[p]) for p in range(8)]
            assert float(human[3]) == pytest.approx(
                cohen_kappa_score(*zip(*both, strict=True), weights="quadratic"), abs=0.0015
            )

            ppi = [r.split("\t") for r in page.locator("#people-ppi tbody tr").all_inner_texts()]
            share = next(r for r in ppi if r[0].startswith("relevant share"))
            judged = pq.read_table(run_dir / "verdicts.parquet")["grade"].to_pylist()
            judge_share = sum(g >= 2 for g in judged) / len(judged)
            assert float(share[1].split()[0]) == pytest.approx(judge_share, abs=0.0015)
            assert int(share[2]) == len(judged)
            assert re.fullmatch(r"-?[\d.]+ \(-?[\d.]+ – -?[\d.]+\)", share[3]), share
            # The same figure from the files: the judge's share plus the design-weighted
            # (Hájek) mean of people's relevant minus the judge's call. The sample took every
            # candidate of every question; the third question is labelled in part, so its
            # labelled candidates stand for its whole pool (weight: pool over labelled).
            people: dict[str, list[float]] = {}
            for (_, i), v in stored.items():
                people.setdefault(i, []).append(float(v >= 2))
            drawn = {r["item_id"]: r for r in sample.to_pylist()}
            per_question: dict[str, int] = {}
            for i in people:
                per_question[drawn[i]["question_id"]] = (
                    per_question.get(drawn[i]["question_id"], 0) + 1
                )
            w = np.array(
                [drawn[i]["stratum_size"] / per_question[drawn[i]["question_id"]] for i in people]
            )
            y = np.array([np.mean(v) for v in people.values()])
            f = np.array([float(judge[i] >= 2) for i in people])
            every = np.array([float(g >= 2) for g in judged])
            ppi_mean = float(every.mean() + np.average(y - f, weights=w))
            assert float(share[3].split()[0]) == pytest.approx(ppi_mean, abs=0.0015)
            assert abs(ppi_mean - judge_share) > 0.01  # the people moved the judge's figure
            # Labelled question by question: the labels with the questions they fill.
            assert share[4] == "20 in 3 questions" and len(people) == 20
            assert float(share[5].split()[0]) == pytest.approx(
                float(np.average(y, weights=w)), abs=0.0015
            )

            assert found["errors"] == []
            assert found["outside"] == []
    # The viewer wrote the sample into the run (and its lock), nothing else: the labels are
    # people's rows of the runs root's judgment store. No half-written file is left.
    added = {f.name for f in run_dir.iterdir()} - before
    assert added - {".labels.lock"} == {labels.SAMPLE_FILE}
    store = root / "judgments"
    assert any(store.glob("part-*.parquet"))
    assert not any(run_dir.glob(".*.tmp")) and not any(store.glob(".*.tmp"))
