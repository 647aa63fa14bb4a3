"""One calibration: score the labelled and scenario items with the configured judge, then measure.

Scoring goes through the score stage's own row function (:func:`ragaudit.scoring.score_rows`),
so what is calibrated is exactly what ``run`` reports. The figures:

- ``monotonicity``: per family and metric, the share of level pairs of one base question scored
  in the expected order (a tie counts ½);
- ``agreement``: per WikiEval metric, the share of pairs in which the metric prefers the variant
  the humans preferred (RAGAS's protocol, a tie counts ½);
- ``detection``: HaluEval, faithfulness as a detector of the right answer (balanced accuracy at
  the threshold, AUC);
- ``alignment``: a team's labels file, TruLens's alignment figures per metric;
- ``consistency``: position bias (the share of context pairs whose two orders disagree in the
  pairwise ranking prompt) and self-agreement (the share of relevance verdicts a second sample
  repeats).

Every figure carries the judge and the embedder that produced it.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from ragaudit import progress
from ragaudit.calibration._data import Labelled, load_halueval, load_wikieval, make_sample
from ragaudit.calibration._grades import GradeCalibrationResult, GradeLabel
from ragaudit.calibration._scenarios import FAMILY_METRICS
from ragaudit.dataset import Question
from ragaudit.metrics import Deps, JudgeError, Sample, ask, resolve
from ragaudit.prompts import PAIRWISE, RELEVANCE, PairwiseInput, RelevanceInput
from ragaudit.scoring import score_rows
from ragaudit.stats import (
    Figure,
    alignment_figures,
    detector_figures,
    preference_credit,
    share_figure,
)

BUNDLED = Path(__file__).resolve().parents[2] / "data" / "calibration"


@dataclass(frozen=True)
class CalibrationInputs:
    """What one calibration measures on: labelled items, scenario rows and human grades."""

    labelled: list[Labelled] = field(default_factory=list)
    scenarios: list[Question] = field(default_factory=list)
    grade_labels: list[GradeLabel] = field(default_factory=list)


@dataclass
class Calibration:
    """The figures (rows of ``calibration.parquet``) and every scored item (score rows)."""

    figures: list[dict[str, Any]]
    scores: list[dict[str, Any]]
    grades: GradeCalibrationResult | None = None
    """The per-grade calibration, when the inputs hold human grades."""


def bundled_inputs(
    folder: Path = BUNDLED, limit: int | None = None, scenarios: list[Question] | None = None
) -> CalibrationInputs:
    """The bundled WikiEval and HaluEval subsets (``limit`` pairs of each file)."""
    labelled = load_wikieval(folder / "wikieval", limit) + load_halueval(
        folder / "halueval" / "qa_samples.jsonl", limit
    )
    return CalibrationInputs(labelled, scenarios or [])


def scenario_sample(row: Question) -> Sample:
    """The metric sample of a scenario row: its fixed contexts, its reference and gold."""
    return make_sample(
        row.question_id,
        row.question,
        response=row.response,
        contexts=list(row.retrieved_contexts or []),
        reference=row.reference,
        reference_contexts=row.reference_contexts,
    )


def _figure_row(
    fig: Figure, deps: Deps, kind: str, dataset: str, metric: str, family: str | None = None
) -> dict[str, Any]:
    return {
        "kind": kind,
        "dataset": dataset,
        "metric": metric,
        "family": family,
        "judge": deps.judge,
        "embedder": deps.embedder,
        **asdict(fig),
    }


async def _score_all(
    jobs: dict[str, list[Sample]], deps: Deps, window: int, limit: int
) -> dict[tuple[str, str], dict[str, Any]]:
    """Score each metric's samples; (metric, item id) → score row."""
    names = list(jobs)

    async def one(name: str) -> list[dict[str, Any]]:
        # A progress line per metric, as the run's score stage prints: a calibration of
        # thousands of rows must show it is working.
        with progress.bar(f"calibrate: {name}", len(jobs[name])) as bar:
            return await score_rows(
                resolve(name, deps.options),
                jobs[name],
                deps,
                window=window,
                limit=limit,
                on_row=bar.advance,
            )

    results = await asyncio.gather(*(one(n) for n in names))
    return {
        (n, row["question_id"]): row for n, rows in zip(names, results, strict=True) for row in rows
    }


def _value(row: dict[str, Any] | None) -> float | None:
    return row.get("value") if row and row.get("status") == "ok" else None


def monotonicity(
    scenarios: Iterable[Question], scores: dict[tuple[str, str], dict[str, Any]], deps: Deps
) -> list[dict[str, Any]]:
    """Per family and metric: the share of level pairs in the expected order."""
    groups: dict[tuple[str, str], list[Question]] = defaultdict(list)
    for row in scenarios:
        meta = row.metadata["scenario"]
        groups[(meta["family"], meta["base_question_id"])].append(row)
    credits: dict[tuple[str, str], list[float | None]] = defaultdict(list)
    for (family, _), rows in sorted(groups.items()):
        for metric in FAMILY_METRICS.get(family, ()):
            for a, b in combinations(rows, 2):
                ra, rb = a.metadata["scenario"]["rank"], b.metadata["scenario"]["rank"]
                if ra == rb:
                    continue
                better, worse = (a, b) if ra < rb else (b, a)
                credits[(family, metric)].append(
                    preference_credit(
                        _value(scores.get((metric, better.question_id))),
                        _value(scores.get((metric, worse.question_id))),
                    )
                )
    return [
        _figure_row(share_figure("in_expected_order", c), deps, "monotonicity", "scenarios", m, f)
        for (f, m), c in sorted(credits.items())
    ]


def pairwise_agreement(
    items: Iterable[Labelled], scores: dict[tuple[str, str], dict[str, Any]], deps: Deps
) -> list[dict[str, Any]]:
    """Per dataset and metric: the share of pairs where the metric prefers the human's choice."""
    pairs: dict[tuple[str, str], dict[str, dict[float, Labelled]]] = defaultdict(dict)
    for item in items:
        if item.pair is not None:
            pairs[(item.dataset, item.metric)].setdefault(item.pair, {})[item.label] = item
    out = []
    for (dataset, metric), by_pair in sorted(pairs.items()):
        credits = []
        for pair in by_pair.values():
            if 1.0 in pair and 0.0 in pair:
                credits.append(
                    preference_credit(
                        _value(scores.get((metric, pair[1.0].sample.question_id))),
                        _value(scores.get((metric, pair[0.0].sample.question_id))),
                    )
                )
        out.append(
            _figure_row(
                share_figure("pairwise_agreement", credits), deps, "agreement", dataset, metric
            )
        )
    return out


def _scored(
    items: list[Labelled], scores: dict[tuple[str, str], dict[str, Any]]
) -> tuple[list[float], list[float], int]:
    labels, values, missing = [], [], 0
    for item in items:
        value = _value(scores.get((item.metric, item.sample.question_id)))
        if value is None:
            missing += 1
            continue
        labels.append(item.label)
        values.append(value)
    return labels, values, missing


def _with_missing(fig: Figure, missing: int) -> Figure:
    if not missing:
        return fig
    note = "; ".join(filter(None, [fig.note, f"{missing} item(s) without a score left out"]))
    return Figure(fig.statistic, fig.value, fig.ci_low, fig.ci_high, fig.n, note)


def _per_metric(
    items: list[Labelled],
    scores: dict[tuple[str, str], dict[str, Any]],
    deps: Deps,
    kind: str,
    dataset: str,
    figures: Callable[[list[float], list[float]], list[Figure]],
) -> list[dict[str, Any]]:
    """``figures`` of each metric's scored items against their labels, as figure rows."""
    out = []
    by_metric: dict[str, list[Labelled]] = defaultdict(list)
    for item in items:
        by_metric[item.metric].append(item)
    for metric, group in sorted(by_metric.items()):
        labels, values, missing = _scored(group, scores)
        for fig in figures(labels, values):
            out.append(_figure_row(_with_missing(fig, missing), deps, kind, dataset, metric))
    return out


def detection(
    items: list[Labelled],
    scores: dict[tuple[str, str], dict[str, Any]],
    deps: Deps,
    threshold: float,
) -> list[dict[str, Any]]:
    """HaluEval: the metric as a detector of the right (non-hallucinated) answer."""
    return _per_metric(
        items,
        scores,
        deps,
        "detection",
        "halueval",
        lambda labels, values: detector_figures([int(x) for x in labels], values, threshold),
    )


def alignment(
    items: list[Labelled],
    scores: dict[tuple[str, str], dict[str, Any]],
    deps: Deps,
    threshold: float,
) -> list[dict[str, Any]]:
    """A labels file: MAE, Spearman, Kendall, Cohen's κ, AUC per metric."""
    return _per_metric(
        items,
        scores,
        deps,
        "alignment",
        "labels",
        lambda labels, values: alignment_figures(labels, values, threshold),
    )


async def consistency(items: list[Labelled], deps: Deps) -> list[dict[str, Any]]:
    """Position bias and self-agreement of the judge on labelled context pairs."""
    pairs: dict[str, dict[float, Labelled]] = defaultdict(dict)
    for item in items:
        if item.metric == "context_relevance" and item.pair and item.sample.contexts:
            pairs[item.pair][item.label] = item
    complete = [p for p in pairs.values() if 1.0 in p and 0.0 in p]
    temperature = float(deps.option("sampling_temperature", 0.3))

    async def prefer(q: str, c1: str, c2: str, lang: str) -> int | None:
        try:
            out = await ask(
                deps, PAIRWISE, PairwiseInput(question=q, context_1=c1, context_2=c2), lang
            )
        except JudgeError:
            return None
        return out.better

    async def verdict(item: Labelled, sample_index: int) -> bool | None:
        s = item.sample
        try:
            out = await ask(
                deps,
                RELEVANCE,
                RelevanceInput(question=s.question, context=s.contexts[0]),
                s.language,
                sample_index=sample_index,
                temperature=temperature,
            )
        except JudgeError:
            return None
        return out.grade >= 2  # relevant at TREC's cut, as the sort stage's default

    async def bias(pair: dict[float, Labelled]) -> float | None:
        good, bad = pair[1.0].sample, pair[0.0].sample
        q, lang = good.question, good.language
        first, second = await asyncio.gather(
            prefer(q, good.contexts[0], bad.contexts[0], lang),
            prefer(q, bad.contexts[0], good.contexts[0], lang),
        )
        if first is None or second is None:
            return None
        # The same context preferred both times: first == 1 and second == 2, or the reverse.
        return 0.0 if first != second else 1.0

    async def repeat(item: Labelled) -> float | None:
        a, b = await asyncio.gather(verdict(item, 0), verdict(item, 1))
        return None if a is None or b is None else float(a == b)

    singles = [item for p in complete for item in p.values()]
    biases, repeats = await asyncio.gather(
        asyncio.gather(*(bias(p) for p in complete)),
        asyncio.gather(*(repeat(i) for i in singles)),
    )
    if not complete:
        return []
    return [
        _figure_row(
            share_figure("order_disagreement", biases), deps, "consistency", "wikieval", "pairwise"
        ),
        _figure_row(
            share_figure("self_agreement", repeats), deps, "consistency", "wikieval", "relevance"
        ),
    ]


def score_jobs(inputs: CalibrationInputs) -> dict[str, list[Sample]]:
    """Per metric, the samples a calibration scores (what its dry run counts, too)."""
    jobs: dict[str, list[Sample]] = defaultdict(list)
    for item in inputs.labelled:
        jobs[item.metric].append(item.sample)
    for row in inputs.scenarios:
        family = row.metadata["scenario"]["family"]
        for metric in FAMILY_METRICS.get(family, ()):
            jobs[metric].append(scenario_sample(row))
    # One sample per id: a labels file may repeat a row.
    return {
        name: list({s.question_id: s for s in samples}.values()) for name, samples in jobs.items()
    }


async def run_calibration(
    inputs: CalibrationInputs,
    deps: Deps,
    *,
    window: int,
    threshold: float = 0.5,
    limit: int = 32,
    with_consistency: bool = True,
) -> Calibration:
    """Score every item with its metric and measure the metrics (see the module docstring)."""
    jobs = score_jobs(inputs)
    scored, consistent = await asyncio.gather(
        _score_all(dict(jobs), deps, window, limit),
        consistency(inputs.labelled, deps) if with_consistency else asyncio.sleep(0, []),
    )
    labelled = inputs.labelled
    figures = (
        monotonicity(inputs.scenarios, scored, deps)
        + pairwise_agreement([i for i in labelled if i.dataset == "wikieval"], scored, deps)
        + detection([i for i in labelled if i.dataset == "halueval"], scored, deps, threshold)
        + alignment([i for i in labelled if i.dataset == "labels"], scored, deps, threshold)
        + list(consistent)
    )
    return Calibration(figures, list(scored.values()))


__all__ = [
    "BUNDLED",
    "Calibration",
    "CalibrationInputs",
    "alignment",
    "bundled_inputs",
    "consistency",
    "detection",
    "monotonicity",
    "pairwise_agreement",
    "run_calibration",
    "scenario_sample",
    "score_jobs",
]
