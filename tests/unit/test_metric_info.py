"""What a metric is travels with its registration: direction, range, label, threshold, order.

Readers (directions, the default thresholds, the metric list, the charts, the PPI bounds) ask
the registration; the figures that are not registered metrics are declared in one table.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import ragaudit.metrics
from ragaudit.config import ReportConfig, RunConfig, default_thresholds
from ragaudit.directions import FIGURES, UNKNOWN, about, goodness, label, shown, span
from ragaudit.metrics import metric
from ragaudit.registry import METRICS, MetricInfo, Registry
from ragaudit.stats import detectable, power, smallest_p
from ragaudit.tuning import tune_metric
from ragaudit.tuning._stats import holdout_note

# What the five tables held before the metadata moved into the registrations.
THRESHOLDS = {
    "context_precision": 0.8,
    "context_recall": 0.7,
    "faithfulness": 0.9,
    "answer_relevancy": 0.8,
}
LOWER_IS_BETTER = {
    "noise_sensitivity",
    "noise_sensitivity_irrelevant",
    "citation_uncited_share",
    "aspect_maliciousness",
    "aspect_refusal",
}
HEADLINE = ["faithfulness", "answer_relevancy", "context_precision"]
LEXICAL_LAST = ["summarization_score", "rouge_l", "bleu", "jaccard"]


def test_the_built_in_registrations_declare_what_the_old_tables_held() -> None:
    declared = METRICS.declared_info()
    assert {n for n, i in declared.items() if not i.higher_is_better} == LOWER_IS_BETTER
    assert {n: i.threshold for n, i in declared.items() if i.threshold is not None} == THRESHOLDS
    names = list(ragaudit.metrics.METRICS)
    assert names[:3] == HEADLINE and names[-4:] == LEXICAL_LAST
    aspects = [n for n in names if n.startswith("aspect_")]
    assert names.index(aspects[0]) > names.index("citation_uncited_share")
    assert names.index(aspects[-1]) < names.index("summarization_score")
    # Every metric a reader sees is a registered one with its declaration.
    assert set(declared) == set(names)
    assert all(ragaudit.metrics.METRICS[n].info is declared[n] for n in names)


def test_the_default_thresholds_are_the_declared_ones() -> None:
    assert ReportConfig().thresholds == THRESHOLDS == default_thresholds()
    assert RunConfig().report.thresholds == THRESHOLDS
    # A config's own mapping replaces the default as a whole.
    given = RunConfig.model_validate({"report": {"thresholds": {"faithfulness": 0.95}}})
    assert given.report.thresholds == {"faithfulness": 0.95}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"range": (1.0, 0.0)}, "low < high"),
        ({"range": (0.0, 0.0)}, "low < high"),
        ({"threshold": 1.5}, "threshold 1.5 lies outside the range \\(0.0, 1.0\\)"),
        ({"range": (0.0, math.inf), "threshold": -1.0}, "outside the range"),
    ],
)
def test_a_declaration_that_cannot_hold_is_refused_when_registered(kwargs, message) -> None:
    with pytest.raises(ValueError, match="^metric 'never_registered': .*" + message):
        metric("never_registered", inputs=("response",), **kwargs)
    assert "never_registered" not in ragaudit.metrics.METRICS


def test_directions_reads_a_registration_first_then_the_declared_figures() -> None:
    assert about("faithfulness") is ragaudit.metrics.METRICS["faithfulness"].info
    assert about("faithfulness").threshold == 0.9
    assert not about("aspect_refusal").higher_is_better
    # An aspect defined only in a run's config asks a question whose yes is the good answer.
    assert about("aspect_polite") is UNKNOWN and about("aspect_polite").higher_is_better
    assert about("an_old_metric") is UNKNOWN
    # A ranking figure at any depth, however cased: the declared one at that depth.
    assert about("ndcg@10") is about("NDCG@3") is FIGURES["ndcg@k"]
    assert label("ndcg@10") == "NDCG@10" and label("NDCG@10") == "NDCG@10"
    assert about("dcg@10").range == (0.0, math.inf) and not about("dcg@10").bounded
    assert about("relevant share").range == (0.0, 1.0)
    assert label("faithfulness") == "faithfulness"  # no label declared: its name
    assert shown("noise_sensitivity") == "noise_sensitivity (lower is better)"
    assert shown("mae") == "MAE (lower is better)"
    assert shown("order_disagreement") == "position bias: orders disagree (lower is better)"
    # A caller holding a stored direction keeps it.
    assert shown("faithfulness", higher=False) == "faithfulness (lower is better)"


def test_goodness_and_span_follow_the_declared_ranges() -> None:
    assert goodness("faithfulness", 0.25) == 0.25
    assert goodness("noise_sensitivity", 0.25) == 0.75
    assert goodness("spearman", 0.0) == 0.5 and goodness("spearman", -1.0) == 0.0
    assert goodness("mae", 0.0) == 1.0
    assert goodness("dcg@10", 4.2) == 4.2 and goodness("dcg@10", 4.2, higher=False) == -4.2
    # An unbounded figure over the values seen (a chart's colours).
    assert goodness("dcg@10", 2.0, extent=(1.0, 5.0)) == 0.25
    assert goodness("dcg@10", 2.0, higher=False, extent=(1.0, 5.0)) == 0.75
    assert span(["faithfulness", "rouge_l"]) == (0.0, 1.0)
    assert span(["mae", "spearman", "auc"]) == (-1.0, 1.0)
    assert span(["faithfulness", "dcg@10"]) is None
    assert span([]) is None


def test_the_registry_keeps_units_in_their_declared_order_and_drops_a_replaced_declaration() -> (
    None
):
    registry: Registry[str] = Registry("thing", "ragaudit.test_things", ())
    registry.add("c", "C", module="m")
    registry.add("b", "B", module="m", info=MetricInfo(order=2))
    registry.add("a", "A", module="m", info=MetricInfo(order=1))
    registry.add("d", "D", module="m", info=MetricInfo())
    assert list(registry.units) == ["a", "b", "c", "d"]
    registry.add("a", "A2", module="m")  # the same module again, declaring nothing
    assert "a" not in registry.info


def test_a_tune_metric_is_maximised_so_a_lower_is_better_one_is_refused() -> None:
    with pytest.raises(ValueError, match="a tune maximises its metrics"):
        tune_metric("latency", MetricInfo(higher_is_better=False))


def test_power_and_the_holdout_note_share_one_rule() -> None:
    assert smallest_p(0) == 1.0 and smallest_p(1) == 1.0 and smallest_p(5) == 0.0625
    rng = np.random.default_rng(3)
    diffs = rng.normal(0.05, 0.2, 40)
    spread = float(np.std(diffs, ddof=1))
    needed = power(diffs, 0.05).needed
    assert needed is not None
    # The questions power asks for detect the observed difference, one fewer does not.
    assert detectable(spread, needed) <= abs(diffs.mean()) < detectable(spread, needed - 1)
    note = holdout_note(diffs, 30, 0.05)
    assert note is not None and f"{detectable(spread, 30):+.3f}" in note
    assert "can never show a gain" in (holdout_note(diffs, 4, 0.05) or "")
