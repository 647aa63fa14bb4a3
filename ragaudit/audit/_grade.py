"""A day's served documents graded: the judgment store first, then the judge.

Through :func:`ragaudit.judging.grade_through_store`, the one way a grade goes through the store
(the sort stage and a tune grade through it too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragaudit._conversation_config import ConversationConfig
from ragaudit.audit._served import AuditDay, Served, judgment_store
from ragaudit.cache import Gateway
from ragaudit.dataset import Question
from ragaudit.judging import Judge, grade_through_store, text_hash
from ragaudit.secrets import redact


def skip_reason(doc: Mapping[str, Any]) -> str | None:
    if doc["changed"]:
        return "the document's text changed since it was served: not graded against the new one"
    if not doc["text"] or not str(doc["text"]).strip():
        return "no text: the log carries only the id and the backend had none for it"
    return None


def verdict_row(day: AuditDay, s: Served, doc: Mapping[str, Any], **values: Any) -> dict[str, Any]:
    return {
        "audit": day.section.name,
        "day": day.day.isoformat(),
        "request_id": s.request_id,
        "unit": s.unit,
        "rank": doc["rank"],
        "doc_id": doc["id"],
        "changed": doc["changed"],
        "text_hash": text_hash(doc["text"]) if doc["text"] else None,
        **s.turn_fields,
        **values,
    }


def pairs_of(
    served: Sequence[Served], conversation: ConversationConfig, judge: Judge
) -> tuple[dict[str, Question], dict[str, list[dict[str, str]]]]:
    """The sampled requests as questions and their gradable served documents as candidates.

    A request is the question its judge prompts are built from (:meth:`Served.judged`): a
    follow-up's text holds its session's earlier turns, so the store keys its grade by them
    too and a grade made under one history is never reused under another. A document's id in
    the grading is its rank (``r<rank>``): two documents of one request never share one,
    whatever the log's ids; the store's grading fans one grade out to every served pair of
    the same question and text.
    """
    questions: dict[str, Question] = {}
    candidates: dict[str, list[dict[str, str]]] = {}
    for s in served:
        docs = [d for d in s.docs if skip_reason(d) is None]
        if docs:
            questions[s.request_id] = s.judged(conversation, judge)
            candidates[s.request_id] = [
                {"context_id": f"r{d['rank']}", "text": d["text"]} for d in docs
            ]
    return questions, candidates


async def grade_served(
    day: AuditDay, judge: Judge, gateway: Gateway, source: str, *, store: bool = True
) -> None:
    """Grade the served top-k of every sampled request: the store first, then the judge.

    Through :func:`ragaudit.judging.grade_through_store`, the one way a grade goes through the
    store: one grade per (question, text) — a follow-up's question holds its history — a text
    served to several requests of one question asked once, the store's lock held per batch
    from the look-up to the append (a second process pays none of the same grades). Each grade
    says where it came from: ``store`` (held before), ``memo`` (asked now, the memo answered)
    or ``paid``. With ``store`` False the store is neither read nor written (a judge check
    re-asks stored grades).
    """
    questions, candidates = pairs_of(day.served, day.config.conversation, judge)
    kept = judgment_store(day.config) if store else None
    with gateway.scope("audit-grade", run_id=source, calls_dir=day.folder / "llm_calls") as c:
        got = await grade_through_store(judge, questions, candidates, kept, source=source)
    add_counts(day.calls, c)
    for s in day.served:
        graded = got.graded.get(s.request_id)
        rows = {r["context_id"]: r for r in graded.rows} if graded is not None else {}
        for doc in s.docs:
            day.grading.pairs += 1
            why = skip_reason(doc)
            if why is not None:
                day.verdicts.append(
                    verdict_row(day, s, doc, grade=None, status="skipped", reason=why, source=None)
                )
                day.grading.skipped += 1
                continue
            cid = f"r{doc['rank']}"
            row = rows[cid]
            ok = row["grade"] is not None
            how = got.how[(s.request_id, cid)] if ok else None
            day.verdicts.append(
                verdict_row(
                    day,
                    s,
                    doc,
                    grade=int(row["grade"]) if ok else None,
                    status="ok" if ok else "failed",
                    reason=(row.get("reason") or "") if ok else redact(str(row.get("error"))),
                    source=how,
                )
            )
            if not ok:
                day.grading.failed += 1
            elif how == "store":
                day.grading.from_store += 1
            elif how == "memo":
                day.grading.from_memo += 1
            else:
                day.grading.paid += 1


def add_counts(total: dict[str, int], counts: Any) -> None:
    for name, value in counts.as_dict().items():
        total[name] = total.get(name, 0) + value


__all__ = ["add_counts", "grade_served", "pairs_of", "skip_reason", "verdict_row"]
