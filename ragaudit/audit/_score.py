"""A day's sampled requests scored: the served list's metrics and the answers' metrics.

The list's metrics come from its grades, no call; the answers' reference-free metrics go
through ``scoring`` and the memo, which answers whatever a re-run asks again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from ragaudit._conversation_config import ConversationConfig
from ragaudit.audit._grade import add_counts, skip_reason
from ragaudit.audit._listmetrics import list_metrics
from ragaudit.audit._served import AuditDay, Served
from ragaudit.cache import Gateway, items_in_flight
from ragaudit.errors import ConfigError
from ragaudit.judging import Judge
from ragaudit.metrics import Sample, resolve
from ragaudit.scoring import make_deps, make_panel, score_rows


def _citations(text: str | None) -> tuple[list[str] | None, list[list[str]] | None]:
    """The log's citations: a list of ids (marker n → the n-th) or one list per sentence."""
    if not text:
        return None, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None, None
    if isinstance(value, list) and value and all(isinstance(v, list) for v in value):
        return None, [[str(x) for x in v] for v in value]
    if isinstance(value, list) and value:
        return [str(v) for v in value], None
    return None, None


def samples_of(
    served: Sequence[Served], conversation: ConversationConfig, judge: Judge
) -> tuple[list[Sample], dict[str, str]]:
    """The sampled requests as metric samples, the graded documents as contexts.

    A sample's question is the one the request's judge prompts are built from
    (:meth:`Served.judged`): a follow-up with its session's earlier turns, as a run scores a
    turn. A document whose text changed since it was served, or that has no text, is left out
    of the contexts: the answer was written from what was served, which is then unknown.
    """
    out, no_answer = [], {}
    for s in served:
        docs = [d for d in s.docs if skip_reason(d) is None]
        ids, per_sentence = _citations(s.citations)
        if not (s.answer or "").strip():
            no_answer[s.request_id] = "no answer in the log for this request"
        q = s.judged(conversation, judge)
        out.append(
            Sample(
                question_id=s.request_id,
                question=q.question,
                language=q.language,
                response=s.answer,
                reference=None,
                contexts=[d["text"] for d in docs],
                context_ids=[d["id"] for d in docs],
                reference_contexts=None,
                reference_context_ids=None,
                citation_ids=ids,
                citations=per_sentence,
            )
        )
    return out, no_answer


async def score_answers(day: AuditDay, judge: Judge, gateway: Gateway, run_id: str) -> None:
    """Score every sampled request's answer with the audit's metrics (scoring.py, the memo)."""
    config = day.config
    samples, no_answer = samples_of(day.served, config.conversation, judge)
    place = {s.request_id: s for s in day.served}
    deps = make_deps(config, judge)
    for name in day.section.metrics:
        try:
            m = resolve(name, config.score.model_dump())
        except (KeyError, ValueError) as exc:
            raise ConfigError(f"audit.metrics: {exc.args[0]}") from None
        with gateway.scope(
            f"audit-score:{name}", run_id=run_id, calls_dir=day.folder / "llm_calls"
        ) as c:
            rows = await score_rows(
                m,
                samples,
                deps,
                window=judge.window or 0,
                no_answer=no_answer,
                limit=items_in_flight(config),
                panel=make_panel(config, judge, name),
            )
        add_counts(day.calls, c)
        for row in rows:
            s = place[row.pop("question_id")]
            day.scores.append(score_row(day, s, row))


def score_row(day: AuditDay, s: Served, row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "audit": day.section.name,
        "day": day.day.isoformat(),
        "request_id": s.request_id,
        "unit": s.unit,
        "segment": s.segment,
        **s.turn_fields,
        **row,
    }


def score_lists(day: AuditDay) -> None:
    """The served list's metrics of every sampled request, from its grades (no call)."""
    k = day.section.k
    relevant = day.config.sort.relevant_grade
    grades: dict[str, dict[int, dict[str, Any]]] = {}
    for v in day.verdicts:
        grades.setdefault(v["request_id"], {})[v["rank"]] = v
    for s in day.served:
        got = grades.get(s.request_id, {})
        ranked = [got[d["rank"]] for d in s.docs]
        missing = [v for v in ranked if v["status"] != "ok"]
        values = list_metrics([v["grade"] for v in ranked], k, relevant)
        for metric, value in values.items():
            if value is not None:
                status, error = "ok", None
            elif not ranked:
                status, error = "skipped", "nothing was served"
            elif missing:
                first = missing[0]
                status = "failed" if first["status"] == "failed" else "skipped"
                error = f"rank {first['rank']} has no grade: {first['reason']}"
            else:
                status, error = "skipped", "undefined for this list (every grade 0)"
            day.scores.append(
                score_row(
                    day,
                    s,
                    {
                        "metric": metric,
                        "value": value,
                        "status": status,
                        "error": error,
                        "k_used": len(ranked),
                        "metric_args": json.dumps({"k": k, "relevant_grade": relevant}),
                    },
                )
            )


def values_frame(scores: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """Graded request × metric × value with status: what the estimator reads."""
    return pl.DataFrame(
        [
            {
                "request_id": r["request_id"],
                "unit": r["unit"],
                "metric": r["metric"],
                "value": r.get("value"),
                "status": r["status"],
            }
            for r in scores
        ],
        schema={
            "request_id": pl.String,
            "unit": pl.String,
            "metric": pl.String,
            "value": pl.Float64,
            "status": pl.String,
        },
    )


__all__ = ["samples_of", "score_answers", "score_lists", "score_row", "values_frame"]
