"""Agreement rows of the ``agreement`` table: judge vs engine, and each vs gold relevance.

Per question: the judge's order against the engine's (Spearman, Kendall tau-b, top-k overlap,
NDCG@k with graded gains from the judge's order, MRR, hit/precision/recall@k), and, when the
question set has gold relevance, the engine's order and the judge's against it (graded NDCG@k
with the gold grades as gains; the binary metrics count a grade above 0 as relevant). Rows with
``question_id == "__all__"`` hold the mean over the questions where a metric is defined.

A figure resting on no judgement (every relevance verdict of the question failed) is
``failed`` with the reason, never a 0 computed from nothing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragaudit import ranking
from ragaudit.dataset import Question

ALL_QUESTIONS = "__all__"
"""``question_id`` of the agreement rows that average over every question."""

JUDGE_VS_ENGINE = "judge_vs_engine"
ENGINE_VS_GOLD = "engine_vs_gold"
JUDGE_VS_GOLD = "judge_vs_gold"


@dataclass(frozen=True)
class JudgeOrder:
    """What the judge made of one question's candidates.

    Attributes:
        ordered: The relevant ids, best first.
        groups: Tie group of each id of ``ordered``.
        irrelevant: Ids judged not relevant.
        unjudged: Ids whose relevance verdict failed.
    """

    ordered: list[str]
    groups: list[int]
    irrelevant: list[str]
    unjudged: list[str] = field(default_factory=list)
    grades: Mapping[str, int] | None = None
    exact_k: int | None = None
    ordering_asked: int = 0
    ordering_failed: int = 0

    @property
    def order_failure(self) -> str | None:
        """Why the judge's order rests on nothing: every ordering call failed (else None)."""
        if self.ordering_asked and self.ordering_failed >= self.ordering_asked:
            return (
                f"every ordering call failed ({self.ordering_failed} of {self.ordering_asked}):"
                " no judged order to compare"
            )
        return None

    @property
    def order_doubt(self) -> str | None:
        """A note when some, not all, ordering calls failed (else None)."""
        if self.ordering_failed and self.order_failure is None:
            return (
                f"{self.ordering_failed} of {self.ordering_asked} ordering calls failed:"
                " the order there is the engine's"
            )
        return None

    @property
    def judged(self) -> list[str]:
        """Every id with a verdict: the relevant ones in order, then the irrelevant ones."""
        return [*self.ordered, *self.irrelevant]

    @property
    def failed(self) -> bool:
        """True when verdicts were asked for and none came back."""
        return not self.judged and bool(self.unjudged)


def gold_grades(
    question: Question, candidates: Sequence[Mapping[str, Any]]
) -> dict[str, int] | None:
    """The question's gold relevance as context id → grade, or None when it has none.

    Graded gold (``reference_context_grades``, from the question set or a qrels file) comes
    first; ``reference_context_ids`` not graded there count as grade 1; candidates the question
    set marks gold by text (``reference_contexts``) count as 1, the others as judged 0.
    """
    has_labels = any(c.get("gold_relevant") is not None for c in candidates)
    if (
        question.reference_context_grades is None
        and question.reference_context_ids is None
        and not has_labels
    ):
        return None
    grades: dict[str, int] = {}
    for c in candidates:
        if c.get("gold_relevant") is not None:
            grades[c["context_id"]] = int(bool(c["gold_relevant"]))
    for cid in question.reference_context_ids or []:
        grades[cid] = max(grades.get(cid, 0), 1)
    grades.update(question.reference_context_grades or {})
    return grades


def _judge_gains(judge: JudgeOrder) -> dict[str, float]:
    # Graded gains when the judge graded (TREC's NDCG); else gains from its order.
    if judge.grades is not None:
        return {c: float(g) for c, g in judge.grades.items() if g > 0}
    return ranking.judge_gains(judge.ordered, judge.groups)


def ndcg_at_k(
    engine: Sequence[str],
    k: int,
    *,
    judge: JudgeOrder | None,
    gold: Mapping[str, int] | None,
) -> dict[str, float]:
    """One question's NDCG@k of each comparison, the figure of the table and of the report's chart.

    The engine's order against the judge's graded gains (``judge_vs_engine``), and the engine's
    and the judge's orders against the gold grades as gains (``engine_vs_gold``,
    ``judge_vs_gold``, trec_eval's linear gain). A comparison that does not apply (no judge, no
    gold) is absent; one that is undefined (no gain) or rests on no judgement is NaN.
    """
    out: dict[str, float] = {}
    failed = judge is not None and judge.failed
    if judge is not None:
        out[JUDGE_VS_ENGINE] = (
            math.nan if failed else ranking.ndcg_at_k(engine, _judge_gains(judge), k)
        )
    if gold is not None:
        gains = {c: float(g) for c, g in gold.items() if g > 0}
        out[ENGINE_VS_GOLD] = ranking.ndcg_at_k(engine, gains, k)
        if judge is not None:
            out[JUDGE_VS_GOLD] = math.nan if failed else ranking.ndcg_at_k(judge.judged, gains, k)
    return out


def question_rows(
    run_id: str,
    qid: str,
    engine: Sequence[str],
    k: int,
    *,
    judge: JudgeOrder | None,
    gold: Mapping[str, int] | None,
) -> list[dict[str, Any]]:
    """Agreement rows of one question.

    Args:
        run_id: The run's id.
        qid: The question's id.
        engine: The engine's candidate ids, best first.
        k: k of the @k metrics.
        judge: The judge's verdicts and order, or None when the judge stages did not run.
        gold: Gold grades (context id → grade, 0 judged not relevant), or None without gold.
    """
    rows: list[dict[str, Any]] = []
    ndcg = ndcg_at_k(engine, k, judge=judge, gold=gold)

    def add(
        comparison: str,
        metric: str,
        value: float,
        overlap: list[str] | None = None,
        why: str = "undefined for this question (too few ranked or relevant items)",
        failed: str | None = None,
        partial: str | None = None,
    ) -> None:
        ok = failed is None and not math.isnan(value)
        doubt = partial if ok and partial is not None else None
        rows.append(
            {
                "run_id": run_id,
                "question_id": qid,
                "comparison": comparison,
                "metric": metric,
                "k": k,
                "value": value if ok else None,
                "overlap_ids": overlap,
                "n_questions": 1 if ok else 0,
                "status": ("partial" if doubt else "ok")
                if ok
                else "failed"
                if failed
                else "skipped",
                "reason": doubt if ok else failed or why,
                "exact_k": judge.exact_k
                if judge is not None and comparison != ENGINE_VS_GOLD
                else None,
            }
        )

    no_judgement = (
        f"every relevance verdict failed ({len(judge.unjudged)}): no judgement to compare"
        if judge is not None and judge.failed
        else None
    )
    if judge is not None:
        ordered, groups, irrelevant = judge.ordered, judge.groups, judge.irrelevant
        judge_ranks = ranking.full_judge_ranks(ordered, groups, irrelevant, judge.grades)
        engine_ranks = ranking.average_ranks([e for e in engine if e in judge_ranks])
        # Figures of the judge's order rest on its ordering calls as well as on its verdicts.
        order_failed = no_judgement or judge.order_failure
        doubt = judge.order_doubt
        for name, fn in (("spearman", ranking.spearman), ("kendall_tau", ranking.kendall_tau_b)):
            add(
                JUDGE_VS_ENGINE,
                name,
                fn(judge_ranks, engine_ranks),
                failed=order_failed,
                partial=doubt,
            )
        no_relevant = "the judge found no relevant candidate"
        share, overlap = ranking.top_k_overlap(judge.judged, engine, k)
        add(
            JUDGE_VS_ENGINE,
            "top_k_overlap",
            share if ordered else math.nan,
            overlap,
            no_relevant,
            order_failed,
            doubt,
        )
        add(
            JUDGE_VS_ENGINE,
            "ndcg",
            ndcg[JUDGE_VS_ENGINE],
            why=no_relevant if not _judge_gains(judge) else "undefined for this question",
            failed=no_judgement,
        )
        for name, value in ranking.order_vs_labels(engine, set(ordered), k).items():
            if name != "ndcg":
                add(
                    JUDGE_VS_ENGINE,
                    name,
                    value if ordered else math.nan,
                    why=no_relevant,
                    failed=no_judgement,
                )
    if gold is not None:
        no_gold = "no gold context for this question (no grade above 0)"
        has_relevant = any(g > 0 for g in gold.values())
        orders: list[tuple[str, Sequence[str], str | None]] = [(ENGINE_VS_GOLD, engine, None)]
        if judge is not None:
            orders.append((JUDGE_VS_GOLD, judge.judged, no_judgement))
        for comparison, order, failed in orders:
            for name, value in ranking.order_vs_grades(order, gold, k).items():
                if name == "ndcg":
                    value = ndcg[comparison]
                add(
                    comparison,
                    name,
                    value if has_relevant else math.nan,
                    why=no_gold,
                    failed=failed,
                )
    return rows


def aggregate(run_id: str, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per comparison and metric, the mean over the questions where it is defined.

    Written under ``question_id == "__all__"`` with ``n_questions`` saying how many questions
    the mean is over; ``failed`` when no question has a value and some failed, ``skipped``
    when it is undefined for every question.
    """
    values: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    failures: dict[tuple[str, str, int], int] = defaultdict(int)
    partial: dict[tuple[str, str, int], int] = defaultdict(int)
    for r in rows:
        key = (r["comparison"], r["metric"], r["k"])
        values.setdefault(key, [])
        if r["status"] in ("ok", "partial"):
            values[key].append(r["value"])
            partial[key] += r["status"] == "partial"
        elif r["status"] == "failed":
            failures[key] += 1
    out = []
    for key, vals in values.items():
        comparison, metric, k = key
        status, reason = "ok", None
        if partial[key]:
            status = "partial"
            reason = f"{partial[key]} of {len(vals)} questions rest on partly failed ordering calls"
        if not vals:
            status, reason = (
                ("failed", f"failed for every question it applies to ({failures[key]})")
                if failures[key]
                else ("skipped", "undefined for every question")
            )
        out.append(
            {
                "run_id": run_id,
                "question_id": ALL_QUESTIONS,
                "comparison": comparison,
                "metric": metric,
                "k": k,
                "value": math.fsum(vals) / len(vals) if vals else None,
                "overlap_ids": None,
                "n_questions": len(vals),
                "status": status,
                "reason": reason,
                "exact_k": None,
            }
        )
    return out


__all__ = [
    "ALL_QUESTIONS",
    "ENGINE_VS_GOLD",
    "JUDGE_VS_ENGINE",
    "JUDGE_VS_GOLD",
    "JudgeOrder",
    "aggregate",
    "gold_grades",
    "ndcg_at_k",
    "question_rows",
]
