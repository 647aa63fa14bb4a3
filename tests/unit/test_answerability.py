"""Answerability: each turn's label read or judged, the refusal check of answers, the answer
metrics conditioned on the label as MTRAG's judge does, refusal precision and recall.

Every figure below is worked by hand from the labels and the scripted judge's verdicts; a set
without labels is scored exactly as before (no refusal check asked, no new column filled).
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pytest

from ragaudit.cache import Gateway
from ragaudit.cache._fake import FakeRequest
from ragaudit.dataset import ANSWERABILITY, Question, Turn
from ragaudit.dryrun import Assumptions, Plan, estimate_ground_truth, estimate_score
from ragaudit.metrics import (
    METRICS,
    Deps,
    Sample,
    answerability_rule,
    condition_on_answerability,
    resolve,
)
from ragaudit.prompts.answerability import Answerability
from ragaudit.reporting import summarise
from ragaudit.runfolder import RunFolder
from ragaudit.schemas import AUDIT_SCORES, CANDIDATES, QUESTIONS, RANKING, SCORES, to_table
from ragaudit.scoring import build_samples, score_rows
from ragaudit.tasks._common import StageContext, gateway_for
from ragaudit.tasks.collect import question_row
from ragaudit.tasks.ground_truth import ground_truth

HISTORY = [
    Turn(role="user", text="When was the Eiffel Tower completed?"),
    Turn(role="assistant", text="It was completed in 1889."),
]
HEIGHT = "The Eiffel Tower is 330 metres tall."


def test_the_judge_labels_exactly_the_datasets_labels() -> None:
    assert tuple(Answerability.__args__) == ANSWERABILITY  # type: ignore[attr-defined]


# -- labels: read where given, judged where not ----------------------------------------------


def _questions() -> list[Question]:
    return [
        Question(
            question_id="tower::1",
            question="When was the Eiffel Tower completed?",
            conversation_id="tower",
            turn=1,
            answerability="answerable",
        ),
        Question(
            question_id="tower::2",
            question="How tall is it?",
            conversation_id="tower",
            turn=2,
            history=HISTORY,
        ),
        Question(question_id="lone", question="Who designed the Eiffel Tower?"),
    ]


def _stage(config_factory: Any, run_id: str, **kw: Any) -> StageContext:
    config = config_factory(**kw)
    ctx = StageContext(
        config=config, run=RunFolder(config.runs_root, run_id), gateway=gateway_for(config)
    )
    questions = _questions()
    ctx.run.write("questions", to_table([question_row(q, run_id, 0) for q in questions], QUESTIONS))
    cands = [
        {
            "run_id": run_id,
            "question_id": q.question_id,
            "context_id": f"{q.question_id}#{k}",
            "text": text,
            "engine_rank": k + 1,
        }
        for q in questions
        for k, text in enumerate([HEIGHT, "Paris has many museums."])
    ]
    ctx.run.write("candidates", to_table(cands, CANDIDATES))
    ranking = [
        {
            "run_id": run_id,
            "question_id": q.question_id,
            "ordered_ids": [f"{q.question_id}#0"],
            "irrelevant_ids": [f"{q.question_id}#1"],
            "unjudged_ids": [],
            "status": "ok",
        }
        for q in questions
    ]
    ctx.run.write("ranking", to_table(ranking, RANKING))
    return ctx


def _labels(req: FakeRequest) -> dict[str, Any] | None:
    if req.title != "AnswerabilityLabel":
        return None
    return {"reason": "the passage gives the height", "label": "answerable"}


def _asked(fake: Any, title: str) -> list[FakeRequest]:
    return [r for r in fake.stats.requests if r.title == title]


async def test_labels_are_read_where_given_and_judged_in_context_where_not(
    config_factory, fake
) -> None:
    ctx = _stage(config_factory, "auto")
    with fake.script(_labels):
        await ground_truth(ctx)
    rows = ctx.run.ground_truth()
    assert (rows["tower::1"]["answerability"], rows["tower::1"]["answerability_source"]) == (
        "answerable",
        "given",
    )
    judged = rows["tower::2"]
    assert (judged["answerability"], judged["answerability_source"]) == ("answerable", "judged")
    assert judged["answerability_reason"] == "the passage gives the height"
    # auto: a question standing alone is not labelled, so it is scored as it always was.
    lone = rows["lone"]
    assert (lone["answerability"], lone["answerability_source"]) == (None, None)
    (asked,) = _asked(fake, "AnswerabilityLabel")
    # The turn in its conversation, with its relevant passage and not the irrelevant one.
    assert "When was the Eiffel Tower completed?" in asked.payload["question"]
    assert asked.payload["question"].endswith("How tall is it?")
    assert asked.payload["passages"] == [HEIGHT]

    # Memoised: the stage again asks the judge nothing new.
    before = len(_asked(fake, "AnswerabilityLabel"))
    with fake.script(_labels):
        await ground_truth(ctx)
    assert len(_asked(fake, "AnswerabilityLabel")) == before

    # The score stage reads the labels with their source.
    samples, _ = build_samples(
        ctx.judged_questions(), {}, ctx.run.ground_truth(), ctx.run.candidates(), 3
    )
    assert [(s.answerability, s.answerability_source) for s in samples] == [
        ("answerable", "given"),
        ("answerable", "judged"),
        (None, None),
    ]


async def test_judge_mode_labels_every_question_and_a_failed_label_fails_its_rows(
    config_factory, fake
) -> None:
    ctx = _stage(config_factory, "every", ground_truth__answerability="judge")

    def broken(req: FakeRequest) -> dict[str, Any] | None:
        if req.title == "AnswerabilityLabel" and "Who designed" in req.payload["question"]:
            return {"label": "perhaps"}  # outside the labels: repaired, then failed
        return _labels(req)

    with fake.script(broken):
        await ground_truth(ctx)
    rows = ctx.run.ground_truth()
    lone = rows["lone"]
    assert (lone["answerability"], lone["answerability_source"]) == (None, "judged")
    assert lone["answerability_reason"].startswith("the judge gave no label")
    assert rows["tower::2"]["answerability_source"] == "judged"
    # A conditioned metric cannot score that turn: its row fails with the reason.
    samples, _ = build_samples(
        ctx.judged_questions(), {}, ctx.run.ground_truth(), ctx.run.candidates(), 3
    )
    failed = next(s for s in samples if s.question_id == "lone")
    deps = Deps.of(ctx.gateway, "fake/judge", "fake/embed", {})
    failed = Sample(
        **{**failed.__dict__, "response": "Gustave Eiffel's company.", "reference": "x"}
    )
    (row,) = await score_rows(resolve("rouge_l"), [failed], deps, window=100_000)
    assert row["status"] == "failed"
    assert "answerability could not be judged: the judge gave no label" in row["error"]


# -- the refusal and clarification check ----------------------------------------------------


@pytest.fixture
def deps(gateway: Gateway) -> Deps:
    return Deps.of(gateway, "fake/judge", "fake/embed", {})


def turn(
    qid: str,
    response: str,
    label: str | None,
    reference: str | None = "The Eiffel Tower is 330 metres tall.",
    language: str = "en",
    question: str = "How tall is the Eiffel Tower?",
) -> Sample:
    return Sample(
        question_id=qid,
        question=question,
        language=language,
        response=response,
        reference=reference,
        contexts=[HEIGHT],
        context_ids=["c0"],
        reference_contexts=None,
        reference_context_ids=None,
        answerability=label,
        answerability_source=None if label is None else "given",
    )


@pytest.mark.parametrize(
    ("response", "language", "refusal", "clarification"),
    [
        ("I don't know.", "en", "yes", "no"),
        ("The documents do not provide its cost. It is 330 metres tall.", "en", "partial", "no"),
        ("Which tower do you mean?", "en", "no", "yes"),
        ("It is 330 metres tall.", "en", "no", "no"),
        ("抱歉，我不知道。", "zh", "yes", "no"),
        ("请问您指的是哪一座塔？", "zh", "no", "yes"),
        ("埃菲尔铁塔高330米。", "zh", "no", "no"),
    ],
)
async def test_the_offline_checks_verdicts_in_both_languages(
    fake, deps, response: str, language: str, refusal: str, clarification: str
) -> None:
    ruled = await condition_on_answerability(
        turn("q", response, "answerable", language=language), deps
    )
    assert (ruled.args["refusal"], ruled.args["clarification"]) == (refusal, clarification)
    (asked,) = _asked(fake, "RefusalVerdict")
    assert asked.payload == {"question": "How tall is the Eiffel Tower?", "response": response}
    lang_marker = "下面是真实输入" if language == "zh" else "Now the real input"
    assert lang_marker in asked.user


async def test_the_check_is_asked_once_per_answer_whatever_the_metrics(fake, deps) -> None:
    s = turn("q", "I don't know.", "unanswerable", reference=None)
    names = ["rouge_l", "bleu", "faithfulness", "answer_relevancy", "refusal_recall"]
    rows = {n: (await score_rows(resolve(n), [s], deps, window=100_000))[0] for n in names}
    assert len(_asked(fake, "RefusalVerdict")) == 1
    assert all(r["status"] == "ok" and r["value"] == 1.0 for r in rows.values()), rows
    # The settled rows never asked their metric: the check was the only call.
    assert len(fake.stats.requests) == 1
    steps = json.loads(rows["rouge_l"]["reason"])["steps"]
    assert [step["step"] for step in steps] == ["refusal"]


# -- the conditioning rule -------------------------------------------------------------------


# MTRAG's rule, stated once by hand: (label, refusal, clarification) → value (None: own value).
RULE = {
    ("answerable", "no", "no"): None,
    ("answerable", "partial", "no"): None,
    ("answerable", "yes", "no"): 0.0,
    ("answerable", "no", "yes"): None,
    ("partial", "no", "no"): None,
    ("partial", "yes", "no"): 0.0,
    ("unanswerable", "yes", "no"): 1.0,
    ("unanswerable", "partial", "no"): 0.0,
    ("unanswerable", "no", "no"): 0.0,
    ("unanswerable", "no", "yes"): 0.0,
    ("conversational", "yes", "no"): 1.0,
    ("conversational", "no", "no"): 0.0,
    ("underspecified", "no", "yes"): 1.0,
    ("underspecified", "yes", "yes"): 1.0,
    ("underspecified", "yes", "no"): 0.0,
    ("underspecified", "no", "no"): 0.0,
}


def test_the_rule_is_mtrags() -> None:
    for (label, refusal, clarification), expected in RULE.items():
        value, why = answerability_rule(label, refusal, clarification)
        assert value == expected, (label, refusal, clarification)
        assert (why is None) == (expected is None)


def verdicts(table: dict[str, tuple[str, str]]):
    """A judge whose refusal check answers ``response → (refusal, clarification)``."""

    def respond(req: FakeRequest) -> dict[str, Any] | None:
        if req.title != "RefusalVerdict":
            return None
        refusal, clarification = table[req.payload["response"]]
        return {"reason": "scripted", "refusal": refusal, "clarification": clarification}

    return respond


HAND_BUILT = [
    # (question id, response, label, the check's verdicts)
    ("a1", "It is 330 metres tall.", "answerable", ("no", "no")),
    ("a2", "I cannot say.", "answerable", ("yes", "no")),
    ("p1", "It is tall; its cost is not given.", "partial", ("partial", "no")),
    ("u1", "The documents do not say.", "unanswerable", ("yes", "no")),
    ("u2", "It cost a fortune.", "unanswerable", ("no", "no")),
    ("s1", "Which tower do you mean?", "underspecified", ("no", "yes")),
    ("c1", "You are welcome!", "conversational", ("no", "no")),
]


async def test_conditioned_scores_on_a_hand_built_example(fake, deps) -> None:
    samples = [turn(q, r, label) for q, r, label, _ in HAND_BUILT]
    table = {r: v for _, r, _, v in HAND_BUILT}
    # ROUGE-L's own values, unconditioned (the option off), as the rule's fall-back.
    raw_deps = Deps.of(
        deps.gateway, "fake/judge", "fake/embed", {"condition_on_answerability": False}
    )
    raw = await score_rows(resolve("rouge_l"), samples, raw_deps, window=100_000)
    own = {r["question_id"]: r["value"] for r in raw}
    assert all("answerability" not in r for r in raw)
    assert 0 < own["a1"] < 1 and 0 < own["p1"] < 1
    with fake.script(verdicts(table)):
        rows = await score_rows(resolve("rouge_l"), samples, deps, window=100_000)
    got = {r["question_id"]: r for r in rows}
    expected = {
        "a1": own["a1"],  # answered an answerable turn: its own value
        "a2": 0.0,  # declined an answerable turn: the penalty
        "p1": own["p1"],  # a partial decline keeps the value
        "u1": 1.0,  # declined an unanswerable turn: full credit
        "u2": 0.0,  # answered it anyway
        "s1": 1.0,  # asked the user back on an underspecified turn
        "c1": 0.0,  # MTRAG groups conversational turns with unanswerable ones
    }
    for qid, _, label, (refusal, clarification) in HAND_BUILT:
        row = got[qid]
        assert row["status"] == "ok" and row["value"] == pytest.approx(expected[qid]), qid
        assert row["answerability"] == label
        args = json.loads(row["metric_args"])["answerability"]
        assert args == {
            "label": label,
            "source": "given",
            "refusal": refusal,
            "clarification": clarification,
        }
    assert {q for q, r in got.items() if r["conditioned"]} == {"a2", "u1", "u2", "s1", "c1"}
    assert got["a2"]["conditioned"] == "declined a turn labelled answerable: no credit"
    assert got["u1"]["conditioned"] == "declined a turn labelled unanswerable: full credit"
    assert got["a1"]["conditioned"] is None
    # The rows fit the scores table (version 3) as the stage writes them.
    stored = to_table([{"run_id": "r", **r} for r in rows], SCORES)
    assert stored.column("conditioned").null_count == 2


async def test_a_settled_row_never_asks_its_metric(fake, deps) -> None:
    settled = [turn(q, r, label) for q, r, label, _ in HAND_BUILT if q in {"a2", "u1", "u2", "s1"}]
    table = {r: v for _, r, _, v in HAND_BUILT}
    with fake.script(verdicts(table)):
        rows = await score_rows(resolve("faithfulness"), settled, deps, window=100_000)
    assert [r["value"] for r in rows] == [0.0, 1.0, 0.0, 1.0]
    assert {r.title for r in fake.stats.requests} == {"RefusalVerdict"}


# -- refusal precision and recall ------------------------------------------------------------


P_R_TURNS = [
    ("u1", "unanswerable", "yes"),
    ("u2", "unanswerable", "yes"),
    ("u3", "unanswerable", "no"),
    ("u4", "unanswerable", "partial"),
    ("a1", "answerable", "yes"),
    ("a2", "answerable", "no"),
    ("p1", "partial", "no"),
    ("c1", "conversational", "yes"),
    ("s1", "underspecified", "yes"),
]


async def test_refusal_precision_and_recall_on_a_hand_computed_example(fake, deps) -> None:
    samples = [turn(q, f"answer {q}", label) for q, label, _ in P_R_TURNS]
    table = {f"answer {q}": (refusal, "no") for q, _, refusal in P_R_TURNS}
    with fake.script(verdicts(table)):
        recall = await score_rows(resolve("refusal_recall"), samples, deps, window=100_000)
        precision = await score_rows(resolve("refusal_precision"), samples, deps, window=100_000)
    # Recall: unanswerable turns u1-u4, declined u1 and u2 (a partial decline is none): 2 / 4.
    assert {r["question_id"]: r["value"] for r in recall if r["status"] == "ok"} == {
        "u1": 1.0,
        "u2": 1.0,
        "u3": 0.0,
        "u4": 0.0,
    }
    # Precision: the declines u1, u2, a1 (c1 and s1 are turns a plain decline does not meet):
    # 2 / 3.
    assert {r["question_id"]: r["value"] for r in precision if r["status"] == "ok"} == {
        "u1": 1.0,
        "u2": 1.0,
        "a1": 0.0,
    }
    skipped = {r["question_id"]: r["error"] for r in precision if r["status"] == "skipped"}
    assert skipped["a2"] == "the answer does not decline (refusal: no)"
    assert "underspecified" in skipped["s1"] and "conversational" in skipped["c1"]
    # Reported like every metric: the mean with its n and interval.
    frame = pl.DataFrame(
        [{k: r.get(k) for k in ("metric", "value", "status")} for r in recall + precision]
    )
    summary = {s.metric: s for s in summarise(frame, {}, 200)}
    assert (summary["refusal_recall"].mean, summary["refusal_recall"].n_ok) == (0.5, 4)
    assert summary["refusal_precision"].mean == pytest.approx(2 / 3)
    assert summary["refusal_precision"].n_ok == 3
    for s in summary.values():
        assert s.ci_low is not None and s.ci_low <= s.mean <= s.ci_high
    # Their registrations say what their values mean.
    for name, label in (
        ("refusal_recall", "refusal recall"),
        ("refusal_precision", "refusal precision"),
    ):
        info = METRICS[name].info
        assert (info.higher_is_better, info.range, info.label) == (True, (0.0, 1.0), label)
        assert info.threshold is None and not METRICS[name].conditioned


# -- a set without labels is scored as before ------------------------------------------------


async def test_a_standalone_sets_rows_are_unchanged(fake, deps) -> None:
    lone = turn("q", "It is 330 metres tall.", None)
    rows = {}
    for name in ("rouge_l", "faithfulness"):
        (rows[name],) = await score_rows(resolve(name), [lone], deps, window=100_000)
    # The keys a row had before answerability, and no refusal check asked.
    assert set(rows["rouge_l"]) == {
        "question_id",
        "metric",
        "judge",
        "k_used",
        "metric_args",
        "reason",
        "value",
        "status",
    }
    assert rows["rouge_l"]["judge"] is None
    assert set(json.loads(rows["rouge_l"]["reason"])) == {"precision", "recall"}
    assert "answerability" not in json.loads(rows["faithfulness"]["metric_args"])
    assert _asked(fake, "RefusalVerdict") == []
    # They still fit the audit's scores table, which has no answerability columns.
    audit_row = {k: v for k, v in rows["faithfulness"].items() if k != "question_id"}
    to_table([{"audit": "a", "day": "d", "request_id": "q", **audit_row}], AUDIT_SCORES)
    # And a question set's own label alone (no ground_truth row) is read as given.
    given = Question(question_id="g", question="x", answerability="unanswerable")
    (sample,), _ = build_samples([given], {}, {}, {}, 3)
    assert (sample.answerability, sample.answerability_source) == ("unanswerable", "given")


# -- the dry run counts both --------------------------------------------------------------


async def test_the_dry_run_counts_the_label_calls_and_one_check_per_answer(config_factory) -> None:
    config = config_factory(
        score__metrics=["rouge_l", "faithfulness", "refusal_recall"], ground_truth__nuggets=False
    )
    questions = _questions()
    unanswerable = Question(
        question_id="tower::3",
        question="What did it cost?",
        conversation_id="tower",
        turn=3,
        answerability="unanswerable",
    )
    plan = Plan(config, Assumptions(), [*questions, unanswerable])
    for q in plan.questions:
        plan.relevant[q.question_id] = [(f"{q.question_id}#0", HEIGHT)]
        plan.candidates[q.question_id] = [(f"{q.question_id}#0", HEIGHT)]
        plan.responses[q.question_id] = "It is 330 metres tall."
    await estimate_ground_truth(plan)
    await estimate_score(plan)
    lines = {(line.stage, line.step): line for line in plan.lines}
    # One label call: tower::2, the one turn the set does not label (lone stands alone).
    assert lines[("ground_truth", "answerability")].calls == 1
    checks = [line for line in plan.lines if line.step == "refusal check"]
    # One check per labelled answer (tower::1, ::2, ::3), whichever of the three metrics asks.
    assert sum(line.calls for line in checks) == 3
    # Faithfulness is not asked of the unanswerable turn: the check alone settles it.
    faithful = [
        line
        for line in plan.lines
        if line.stage == "score:faithfulness" and line.step != "refusal check"
    ]
    assert faithful and all(line.calls == 3 for line in faithful)
