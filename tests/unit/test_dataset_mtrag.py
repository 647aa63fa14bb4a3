"""MTRAG's released files read as they are (fixtures cut from them: data/mtrag/NOTICE.md).

The retrieval query files in any of their three forms, with siblings and BEIR qrels found
beside; the generation tasks; the human-evaluated subset whose contexts name its documents.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.paths import REPO_ROOT

from ragaudit.dataset import load_questions, with_qrels
from ragaudit.errors import InputError

MTRAG = REPO_ROOT / "data" / "mtrag"
GOVT = MTRAG / "mtrag-human" / "retrieval_tasks" / "govt"
TASKS = MTRAG / "mtragun-human" / "generation_tasks" / "reference.jsonl"
RESPONSES = MTRAG / "scripts" / "evaluation" / "sample_data" / "responses-10.jsonl"
HUMAN = MTRAG / "mtrag-human" / "evaluations" / "reference_subset_with_human_evaluations.json"
CONVERSATION = "d44c3196b3d832f85160b5b4fbee1332"


@pytest.mark.parametrize("form", ["lastturn", "rewrite", "questions"])
def test_any_query_form_gives_the_turn_its_history_rewrite_and_gold(form: str) -> None:
    qs = load_questions(GOVT / f"govt_{form}.jsonl")
    assert [q.question_id for q in qs] == [f"{CONVERSATION}<::>{t}" for t in (1, 2, 3, 5)]
    assert all(q.conversation_id == CONVERSATION for q in qs)
    assert [q.turn for q in qs] == [1, 2, 3, 5]
    fifth = qs[-1]
    # The turn itself, not the rewrite nor every turn joined.
    assert fifth.question == (
        "I want to understand the definition of personal information we are talking about here"
    )
    # Turn 4 has no retrieval task (unanswerable), yet it is in turn 5's history.
    assert [t.text for t in fifth.history or []] == [
        "What is the Web extension for federal government websites and how do we ensure the "
        "site is secure?",
        "How can I protect my personal information from identity theft",
        "can you clarify the definition of identity theft?",
        "what do systems use to protect my personal information?",
    ]
    assert all(t.role == "user" for t in fifth.history or [])
    assert not qs[0].history and qs[0].turn == 1
    assert fifth.rewrite == "Could you define personal information in this context?"
    # Graded gold from qrels/dev.tsv beside the files (BEIR: query-id corpus-id score).
    assert qs[1].reference_context_grades == {
        "d63ebad40e46f471-10669-12870": 1,
        "d63ebad40e46f471-5080-7474": 1,
        "d63ebad40e46f471-6954-9447": 1,
        "d63ebad40e46f471-8900-11092": 1,
    }
    assert fifth.metadata == {"collection": "govt"}
    # The three forms are one question set.
    assert qs == load_questions(GOVT / "govt_lastturn.jsonl")


def test_a_query_file_alone_or_renamed_still_reads(tmp_path: Path) -> None:
    alone = tmp_path / "govt_lastturn.jsonl"
    shutil.copy(GOVT / "govt_lastturn.jsonl", alone)
    qs = load_questions(alone)
    # No sibling, no qrels: the turns as they are, without history, rewrite or gold.
    assert len(qs) == 4 and qs[3].turn == 5 and qs[3].question.startswith("I want to")
    assert all(q.history is None and q.rewrite is None for q in qs)
    assert all(q.reference_context_grades is None for q in qs)
    renamed = tmp_path / "chat.jsonl"
    shutil.copy(GOVT / "govt_questions.jsonl", renamed)
    last = load_questions(renamed)[-1]
    assert last.question.startswith("I want to") and len(last.history or []) == 4
    # The project's qrels reading merges the same gold over it.
    grades = {"d44c3196b3d832f85160b5b4fbee1332<::>5": {"x": 2}}
    assert with_qrels([last], grades)[0].reference_context_grades == {"x": 2}


def test_a_sibling_missing_a_query_is_named(tmp_path: Path) -> None:
    for form in ("lastturn", "rewrite"):
        shutil.copy(GOVT / f"govt_{form}.jsonl", tmp_path / f"govt_{form}.jsonl")
    lines = (tmp_path / "govt_rewrite.jsonl").read_text().splitlines()
    (tmp_path / "govt_rewrite.jsonl").write_text("\n".join(lines[:2]) + "\n")
    with pytest.raises(InputError, match=r"govt_rewrite.jsonl: no query '.*<::>3' \(2 missing\)"):
        load_questions(tmp_path / "govt_lastturn.jsonl")


def test_generation_tasks_read_as_turns_with_contexts_targets_and_labels() -> None:
    answerable, unanswerable, underspecified = load_questions(TASKS)
    assert answerable.question_id == "c4a3e249f847fe15dad10646b9d3d139<::>2"
    assert answerable.conversation_id == "c4a3e249f847fe15dad10646b9d3d139"
    assert answerable.turn == 2
    # The earlier turns, user and agent, are the history; the last user turn is the question.
    assert [t.role for t in answerable.history or []] == ["user", "assistant"]
    raw = json.loads(TASKS.read_text().splitlines()[0])
    assert answerable.question == raw["input"][-1]["text"].strip()
    assert answerable.reference == raw["targets"][0]["text"]
    assert answerable.reference_context_ids == [c["document_id"] for c in raw["contexts"]]
    assert answerable.reference_contexts == [c["text"] for c in raw["contexts"]]
    assert (answerable.answerability, answerable.turn_kind) == ("answerable", "follow-up")
    assert answerable.metadata["question_type"] == raw["Question Type"]
    assert answerable.metadata["collection"] == raw["Collection"]
    assert unanswerable.answerability == "unanswerable"
    assert unanswerable.reference_context_ids is None
    assert (underspecified.answerability, underspecified.turn_kind) == (
        "underspecified",
        "standalone",
    )


def test_mtrageval_responses_are_the_response_evaluated() -> None:
    first, second = load_questions(RESPONSES)
    raw = [json.loads(x) for x in RESPONSES.read_text().splitlines()]
    # The task id spells its separator "::" here; conversation and turn are given.
    assert second.conversation_id == raw[1]["conversation_id"] and second.turn == 2
    assert second.response == raw[1]["predictions"][0]["text"]
    # A label a pandas export wrote as NaN is no label.
    assert first.turn_kind is None and first.answerability == "unanswerable"
    assert second.turn_kind == "clarification"


def test_the_human_evaluated_subset_resolves_its_documents() -> None:
    first, second, unanswerable = load_questions(HUMAN)
    raw = json.loads(HUMAN.read_text())
    documents = {d["document_id"]: d["text"] for d in raw["documents"]}
    assert second.question_id == "f0d2873b877409f61da7dbdddd22d279<::>2" and second.turn == 2
    assert second.conversation_id == "f0d2873b877409f61da7dbdddd22d279"
    assert [t.role for t in second.history or []] == ["user", "assistant"]
    assert second.reference_context_ids and second.reference_contexts == [
        documents[d] for d in second.reference_context_ids
    ]
    assert first.turn_kind is None and first.answerability == "answerable"
    assert unanswerable.answerability == "unanswerable"
    # The answers the people rated ride along by model.
    assert set(second.metadata["responses"]) == {"reference", "llama-3.1-405b-instruct", "gpt-4o"}


def test_a_context_naming_an_absent_document_is_refused(tmp_path: Path) -> None:
    raw = json.loads(HUMAN.read_text())
    raw["documents"] = raw["documents"][1:]
    broken = tmp_path / "subset.json"
    broken.write_text(json.dumps(raw))
    with pytest.raises(InputError, match=r"subset.json: tasks, item 1: context document '.+' is"):
        load_questions(broken)


def test_a_task_ending_on_the_agents_turn_is_refused(tmp_path: Path) -> None:
    task = json.loads(TASKS.read_text().splitlines()[0])
    task["input"].append({"speaker": "agent", "text": "An answer nobody asked for."})
    bad = tmp_path / "tasks.jsonl"
    bad.write_text(json.dumps(task) + "\n")
    with pytest.raises(InputError, match=r"tasks.jsonl: line 1, column 'input': the last turn"):
        load_questions(bad)
