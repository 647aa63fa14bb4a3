"""List metrics of one served list, from the grades its top k received.

The audit sees what a service *served*, not the corpus: nobody graded the documents it did
not return, so recall and a corpus-wide ideal ranking are unknowable. Every metric here is
therefore **within the served list**:

- ``precision@k``: documents of the top k graded at least ``relevant_grade``, over k (a list
  shorter than k is penalised, as trec_eval does);
- ``dcg@k``: linear gain (the grade 0-3), log2 discount (:func:`ragaudit.ranking.dcg`,
  trec_eval's and scikit-learn's convention);
- ``ndcg@k``: that DCG over the DCG of **the same served grades sorted best first**: 1 means
  the service put its own best documents first, not that it found the best documents there
  are. Undefined (None) when every served grade is 0: there is no better order to compare to;
- ``relevant share``: documents of the top k graded at least ``relevant_grade``, over the
  documents served in the top k.

A grade that failed or was skipped (None) leaves every metric of the request undefined
(None), never 0: a list with an unknown document in it has an unknown DCG, and counting the
failure as "not relevant" would drag the estimate down by the judge's failure rate.

What each figure is (direction, range, label) is declared with the other ranking figures in
:data:`ragaudit.directions.FIGURES`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragaudit.ranking import dcg

METRICS = ("precision@k", "dcg@k", "ndcg@k", "relevant share")
"""The names :func:`list_metrics` returns (``k`` spelled as a number by :func:`metric_names`)."""


def metric_names(k: int) -> tuple[str, ...]:
    """The metric names of :func:`list_metrics` at depth ``k`` (``ndcg@10`` ...)."""
    return tuple(name.replace("@k", f"@{k}") for name in METRICS)


def list_metrics(
    grades: Sequence[int | None], k: int, relevant_grade: int
) -> dict[str, float | None]:
    """Precision@k, DCG@k, nDCG@k and the relevant share of one served list.

    Args:
        grades: The served documents' grades in served order (0-3; None for a grade that
            failed or was skipped). Only the first ``k`` count.
        k: The depth graded.
        relevant_grade: The lowest grade that counts as relevant.

    Returns:
        Metric name (:func:`metric_names`) → value; every value None when a top-k grade is
        missing or nothing was served, and nDCG@k None when every grade is 0.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    names = metric_names(k)
    top = list(grades[:k])
    if not top or any(g is None for g in top):
        return dict.fromkeys(names, None)
    known = [int(g) for g in top if g is not None]
    relevant = sum(1 for g in known if g >= relevant_grade)
    found = dcg(known)
    ideal = dcg(sorted(known, reverse=True))
    values = (relevant / k, found, found / ideal if ideal > 0 else None, relevant / len(known))
    return dict(zip(names, values, strict=True))


__all__ = ["METRICS", "list_metrics", "metric_names"]
