"""The report's charts as drawn: no panel without data, no axis under an empty cell, labels apart.

Charts are rendered to SVG by vl-convert and read back: axes and labels are counted in the SVG,
where a reader sees them.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from support.reporting_runs import write_run

import ragaudit.metrics  # noqa: F401  (the registry: run configs name real metrics)
from ragaudit.reporting import build_report, compare_runs
from ragaudit.reporting._charts import compare_chart, distributions_chart, spearman_chart
from ragaudit.reporting._model import AgreementRow

# A browser's fallback sans-serif (DejaVu Sans) sets digits and the minus sign about 0.64 em
# wide; vl-convert measures with a narrower font.
BROWSER_EM = 0.64
SCORED = [
    "faithfulness",
    "answer_relevancy",
    "context_precision",
    "context_recall",
    "nonllm_context_recall",
    "nonllm_context_precision",
    "context_relevance",
    "context_entity_recall",
    "noise_sensitivity",
    "factual_correctness",
    "rouge_l",
]


def axes(svg: str, kind: str) -> list[list[tuple[float, str, str]]]:
    """Per ``X``/``Y`` axis of the SVG: its visible labels as (position, anchor, text)."""
    out = []
    for part in svg.split(f'aria-label="{kind}-axis')[1:]:
        labels = part.split('class="mark-text role-axis-label"', 1)[1].split("</g>", 1)[0]
        found = []
        for m in re.finditer(
            r'<text text-anchor="(\w+)" transform="translate\(([-\d.]+),([-\d.]+)\)"'
            r'[^>]*opacity="([\d.]+)"[^>]*>([^<]*)</text>',
            labels,
        ):
            anchor, x, y, opacity, text = m.groups()
            if float(opacity) > 0:
                found.append((float(x if kind == "X" else y), anchor, text))
        out.append(found)
    return out


def panel_titles(svg: str) -> list[str]:
    return re.findall(r"aria-label=\"Title text '([^']*)'\"", svg)


def test_distributions_draw_one_panel_with_its_own_axes_per_metric_with_values(
    tmp_path: Path,
) -> None:
    # Eleven metrics with values in a four-column grid: the last row has three panels.
    values: dict[str, list[float | None]] = {
        m: [((i + j) % 10) / 10 for j in range(12)] for i, m in enumerate(SCORED)
    }
    values["answer_correctness"] = [None] * 12  # every row failed
    report = build_report(write_run(tmp_path, "r", values))
    fig = distributions_chart(report)
    assert fig is not None
    titles = panel_titles(fig.svg)
    assert titles == SCORED
    # One x axis under every panel; a wrapped facet drew four, one under an empty cell.
    assert len(axes(fig.svg, "X")) == len(titles)
    assert "No ok value to draw: answer_correctness." in fig.caption


def test_distribution_count_ticks_are_whole_and_distinct(tmp_path: Path) -> None:
    values: dict[str, list[float | None]] = {
        "faithfulness": [i / 10 for i in range(10)],  # every bar of height 1
        "context_recall": [1.0] * 10,
        "rouge_l": [0.5, 0.6] + [None] * 8,
    }
    fig = distributions_chart(build_report(write_run(tmp_path, "r", values)))
    assert fig is not None
    for labels in axes(fig.svg, "Y"):
        texts = [t for _, _, t in labels]
        assert len(texts) == len(set(texts)) >= 2, texts  # Vega's own ticks printed "0 1 1"
        assert all(t.isdigit() for t in texts), texts


def test_spearman_count_ticks_are_whole_and_distinct(tmp_path: Path) -> None:
    # Five questions, one a bin (-0.2 sits on a bin's edge): bars of height 1, where Vega's own
    # ticks printed "0 1 1" on this chart as on the distributions.
    report = build_report(write_run(tmp_path, "r", {"faithfulness": [0.5] * 5}))
    rhos = [-0.2, 0.4, 0.5, 0.6, 1.0]
    rows = [
        AgreementRow(f"q{i}", "judge_vs_engine", "spearman", None, rho, None, "ok", None)
        for i, rho in enumerate(rhos)
    ]
    fig = spearman_chart(dataclasses.replace(report, agreement=rows))
    assert fig is not None
    (labels,) = axes(fig.svg, "Y")
    texts = [t for _, _, t in labels]
    assert texts == ["0", "1"], texts


def test_compare_chart_labels_fit_and_do_not_run_together(tmp_path: Path) -> None:
    long_name = "noise_sensitivity_irrelevant (lower is better)"
    metrics = ("faithfulness", "noise_sensitivity_irrelevant")
    base = {m: [(i * 7 % 10) / 10 for i in range(30)] for m in metrics}
    # Small differences: ticks every 0.001 with six-character labels.
    moved = {
        m: [v + (0.012 if i % 2 else -0.003) for i, v in enumerate(vs)] for m, vs in base.items()
    }
    a = write_run(tmp_path, "a", base)
    b = write_run(tmp_path, "b", moved)
    fig = compare_chart(compare_runs(a, b))
    assert fig is not None
    # The whole metric name, not cut at Vega's default 180 px with an ellipsis.
    assert f">{long_name}</text>" in fig.svg
    [labels] = axes(fig.svg, "X")
    assert 2 <= len(labels) <= 6, labels
    extents = []
    for x, anchor, text in labels:
        width = len(text) * 10 * BROWSER_EM  # the axis labels are 10 px
        left = {"start": x, "middle": x - width / 2, "end": x - width}[anchor]
        extents.append((left, left + width))
    for (_, right), (left, _) in zip(extents, extents[1:], strict=False):
        assert left - right >= 4, labels
