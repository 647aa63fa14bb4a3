"""Relevance grades asked several times: a judge's repeats, a jury, their agreement."""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from dataclasses import replace
from typing import Any

import openpyxl
import pytest
from support.runs import context, make_config, table, write_question

from ragaudit.cache._fake import FakeRequest
from ragaudit.flows import estimate_run
from ragaudit.judging import combined_grade
from ragaudit.judging._fake import overlap_grade
from ragaudit.reporting import build_report, render_html, write_xlsx
from ragaudit.schemas import CANDIDATES, QUESTIONS, to_table
from ragaudit.tasks.sort import combine_sort, sort
from ragaudit.trec import QRELS_JUDGE, export_trec, juror_qrels_name

QUESTION = "harbour built year history"
WORDS = ["harbour", "built", "year", "history"]


def _texts(n: int = 20) -> dict[str, str]:
    """Candidates holding 4, 3, 2, 1 or 0 of the question's words: every grade, several times."""
    return {
        f"c{i:02d}": " ".join(WORDS[: 4 - i % 5] if i % 5 < 4 else ["weather"]) + f" passage {i}"
        for i in range(n)
    }


def _unit(*parts: Any) -> float:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class NoisyGrader:
    """The fake judge's grade, moved one grade up or down with probability ``flip`` per call.

    Each call of the same request draws anew (a count per request), so the samples of one
    candidate differ as a sampled model's would; the draw depends only on the request and how
    many times it was asked, so a run's multiset of grades per candidate is reproducible.
    """

    def __init__(self, flip: float) -> None:
        self.flip = flip
        self.asked: Counter[str] = Counter()

    def __call__(self, req: FakeRequest) -> dict[str, Any] | None:
        if req.title != "RelevanceGrade":
            return None
        digest = req.digest() + repr(req.params.get("temperature"))
        self.asked[digest] += 1
        grade, _ = overlap_grade(req.payload["question"], req.payload["context"])
        u = _unit(digest, self.asked[digest])
        if u < self.flip:
            grade = grade + 1 if grade < 3 and u < self.flip / 2 or grade == 0 else grade - 1
        return {"grade": grade, "reason": f"noisy grade {grade}"}


async def test_repeats_keep_every_sample_and_a_rerun_pays_nothing(tmp_path, fake) -> None:
    config = make_config(tmp_path, models__judge_repeats=3, sort__order="none")
    with fake.script(NoisyGrader(0.3)):
        ctx = context(config, "r1")
        write_question(ctx.run, _texts(), QUESTION)
        await sort(ctx)
        paid = fake.stats.calls
        assert paid == 3 * 20
        verdicts = table(ctx.run, "verdicts")
        assert all(len(v["grade_samples"]) == 3 for v in verdicts)
        assert all(v["grade_judges"] == ["fake/judge"] * 3 for v in verdicts)
        # The candidate's grade is the majority of its samples, ties to the lower grade.
        for v in verdicts:
            assert v["grade"] == combined_grade(v["grade_samples"], "majority")
            assert v["relevant"] == (v["grade"] >= 2)
        assert any(len(set(v["grade_samples"])) > 1 for v in verdicts)  # the noise is there
        ranking = table(ctx.run, "ranking")[0]
        assert ranking["relevance_calls"] == 60

        noise = {(r["kind"], r["scale"]): r for r in table(ctx.run, "grade_noise")}
        grade = noise[("self", "grade")]
        assert grade["judge"] == "fake/judge" and grade["level"] == "nominal"
        assert grade["n_items"] == 20 and grade["n_raters"] == 3
        assert grade["ci_low"] <= grade["alpha"] <= grade["ci_high"] < 1
        assert grade["disagreed"] == sum(len(set(v["grade_samples"])) > 1 for v in verdicts)
        assert ("self", "relevant") in noise and ("jury", "grade") not in noise

        # Another run of the same candidates: every sample is a memo hit.
        ctx2 = context(config, "r2")
        write_question(ctx2.run, _texts(), QUESTION)
        await sort(ctx2)
        assert fake.stats.calls == paid
        again = {v["context_id"]: v["grade_samples"] for v in table(ctx2.run, "verdicts")}
        assert again == {v["context_id"]: v["grade_samples"] for v in verdicts}


async def test_one_sample_is_todays_request_and_verdict(tmp_path, fake) -> None:
    one = make_config(tmp_path, sort__order="none")
    ctx = context(one, "one")
    write_question(ctx.run, _texts(), QUESTION)
    await sort(ctx)
    assert fake.stats.calls == 20
    verdicts = table(ctx.run, "verdicts")
    assert all(v["grade_samples"] is None and v["grade_judges"] is None for v in verdicts)
    assert table(ctx.run, "grade_noise") == []
    truth = {f"c{i:02d}": overlap_grade(QUESTION, t)[0] for i, t in enumerate(_texts().values())}
    assert {v["context_id"]: v["grade"] for v in verdicts} == truth

    # Three samples on the same memo: sample 0 is the request asked above, a memo hit.
    three = make_config(tmp_path, sort__order="none", models__judge_repeats=3)
    ctx3 = context(three, "three")
    write_question(ctx3.run, _texts(), QUESTION)
    await sort(ctx3)
    assert fake.stats.calls == 20 + 2 * 20
    sampled = [r for r in fake.stats.requests if r.title == "RelevanceGrade"]
    temperatures = Counter(r.params.get("temperature") for r in sampled)
    assert temperatures == {0.0: 20, three.score.sampling_temperature: 40}


@pytest.mark.parametrize("batch", [1, 4], ids=["one-a-call", "batched"])
async def test_a_jury_keeps_each_judges_grade_and_takes_the_majority(tmp_path, fake, batch) -> None:
    jury = ["fake/a", "fake/b?wrong=0.3&seed=1", "fake/c?wrong=0.3&seed=2"]
    config = make_config(
        tmp_path,
        models__jury=jury,
        sort__order="none",
        sort__grade_batch=batch,
    )
    ctx = context(config)
    write_question(ctx.run, _texts(), QUESTION)
    await sort(ctx)
    verdicts = table(ctx.run, "verdicts")
    assert all(v["grade_judges"] == jury for v in verdicts)
    truth = {f"c{i:02d}": overlap_grade(QUESTION, t)[0] for i, t in enumerate(_texts().values())}
    if batch == 1:
        # ``wrong`` mirrors a grade (g → 3 − g): a judge answers the truth or its mirror.
        for v in verdicts:
            true = truth[v["context_id"]]
            assert set(v["grade_samples"]) <= {true, 3 - true}
            assert v["grade_samples"][0] == true
    flipped = [v for v in verdicts if len(set(v["grade_samples"])) > 1]
    assert flipped, "the two noisy jurors disagree somewhere"
    for v in verdicts:
        assert v["grade"] == combined_grade(v["grade_samples"], "majority")
    if batch == 1:
        # Two honest answers of three outvote one mirrored grade.
        for v in verdicts:
            honest = v["grade_samples"].count(truth[v["context_id"]])
            assert (v["grade"] == truth[v["context_id"]]) == (honest >= 2)
    noise = {(r["kind"], r["scale"]): r for r in table(ctx.run, "grade_noise")}
    assert noise[("jury", "grade")]["n_raters"] == 3
    assert noise[("jury", "grade")]["judge"] == ", ".join(jury)
    assert noise[("jury", "grade")]["disagreed"] == len(flipped)
    assert not any(kind == "self" for kind, _ in noise)  # one sample per juror

    # qrels from the aggregated grade; one file per juror besides.
    written = {p.name for p in export_trec(ctx.run.path)}
    qrels = (ctx.run.path / QRELS_JUDGE).read_text().splitlines()
    assert {line.split()[2]: int(line.split()[3]) for line in qrels} == {
        v["context_id"]: v["grade"] for v in verdicts
    }
    per_judge = sorted(n for n in written if n.startswith("qrels.judge.") and n != QRELS_JUDGE)
    assert per_judge == [juror_qrels_name(k, m) for k, m in enumerate(jury, start=1)]
    mirrored = ctx.run.path / juror_qrels_name(2, jury[1])
    grades_b = {ln.split()[2]: int(ln.split()[3]) for ln in mirrored.read_text().splitlines()}
    assert grades_b == {v["context_id"]: v["grade_samples"][1] for v in verdicts}

    # The report: the agreement table, and each judge's grade where the judges differ.
    report = build_report(ctx.run.path)
    assert {(g.kind, g.scale) for g in report.grade_noise} == {
        ("jury", "grade"),
        ("jury", "relevant"),
    }
    shown = {c.context_id: c for q in report.questions for c in q.contexts}
    split = [c for c in shown.values() if c.judges_disagree]
    # The drill-down shows the engine's top k (no manifest here: the default k).
    assert split and {c.context_id for c in split} == {v["context_id"] for v in flipped} & set(
        shown
    )
    for c in shown.values():
        assert [j for j, _ in c.grade_samples] == jury
    page = render_html(report)
    assert 'id="grade-noise"' in page and "Judge noise on relevance grades" in page
    sheet = openpyxl.load_workbook(write_xlsx(report, tmp_path / "r.xlsx"))["grade_noise"]
    header = [c.value for c in sheet[1]]
    assert header[:3] == ["kind", "judge", "scale"] and sheet.max_row == 3


def test_the_dry_run_counts_every_sample_of_every_juror(tmp_path) -> None:
    one = asyncio.run(estimate_run(make_config(tmp_path), use_history=False))
    base = next(line for line in one.lines if line.step == "relevance verdicts")
    jury = ["fake/a", "fake/b"]
    config = make_config(tmp_path, models__jury=jury, models__judge_repeats=3)
    many = asyncio.run(estimate_run(config, use_history=False))
    lines = {line.step: line for line in many.lines if line.step.startswith("relevance")}
    assert set(lines) == {f"relevance verdicts ({m})" for m in jury}
    for model in jury:
        line = lines[f"relevance verdicts ({model})"]
        assert line.model == model
        assert line.calls == 3 * base.calls
        assert line.tokens_in == pytest.approx(3 * base.tokens_in)
    # The orderings are still the judge's alone.
    ordering = [
        line for line in many.lines if line.stage == "sort" and "relevance" not in line.step
    ]
    assert ordering and all(line.model == "fake/judge" for line in ordering)


async def test_batches_give_one_grade_noise_over_the_whole_run(tmp_path, fake) -> None:
    config = make_config(tmp_path, models__judge_repeats=3, sort__order="none")
    ctx = context(config, "batched")
    texts = _texts()
    questions = [
        {"run_id": "batched", "question_id": q, "question": QUESTION, "language": "en"}
        for q in ("q0", "q1")
    ]
    candidates = [
        {
            "run_id": "batched",
            "question_id": q,
            "context_id": cid,
            "text": f"{text} {q}",
            "engine_rank": i + 1,
        }
        for q in ("q0", "q1")
        for i, (cid, text) in enumerate(texts.items())
    ]
    ctx.run.write("questions", to_table(questions, QUESTIONS))
    ctx.run.write("candidates", to_table(candidates, CANDIDATES))
    with fake.script(NoisyGrader(0.3)):
        for part, qid in (("b0000", "q0"), ("b0001", "q1")):
            await sort(replace(ctx, part=part, ids=frozenset({qid})))
        assert not ctx.run.has("grade_noise")  # a batch's figures would be a batch's
        combine_sort(ctx, ["b0000", "b0001"])
    (figure,) = [r for r in table(ctx.run, "grade_noise") if r["scale"] == "grade"]
    assert figure["n_items"] == 40 and figure["n_raters"] == 3
    assert len(table(ctx.run, "verdicts")) == 40


async def test_a_verdict_fails_only_when_every_sample_failed(tmp_path, fake) -> None:
    jury = ["fake/a", "fake/broken", "fake/c"]
    config = make_config(tmp_path, models__jury=jury, sort__order="none")

    def broken(req: FakeRequest) -> str | None:
        # One juror never answers valid JSON; for c05 none does.
        if req.title == "RelevanceGrade" and (
            req.model == "broken" or "passage 5" in req.payload["context"]
        ):
            return "not json"
        return None

    with fake.script(broken):
        ctx = context(config)
        write_question(ctx.run, _texts(10), QUESTION)
        await sort(ctx)
    verdicts = {v["context_id"]: v for v in table(ctx.run, "verdicts")}
    lost = verdicts.pop("c05")
    assert lost["status"] != "ok" and lost["grade"] is None and lost["relevant"] is None
    assert lost["grade_samples"] == [None, None, None]
    for v in verdicts.values():
        assert v["status"] == "ok" and v["grade_samples"][1] is None
        assert v["grade"] == v["grade_samples"][0] == v["grade_samples"][2]
        assert "1 of 3 grade samples failed" in v["note"]
    ranking = table(ctx.run, "ranking")[0]
    assert ranking["unjudged_ids"] == ["c05"]
