"""Prefect artifacts of a report: the summary table, the findings and links to the files."""

from __future__ import annotations

from typing import Any

from ragaudit.numbers import fixed
from ragaudit.reporting._model import Report

_KEY_CHARS = 100


def artifact_key(prefix: str, run_id: str) -> str:
    """A valid Prefect artifact key (lower-case letters, digits, dashes)."""
    return (prefix + "".join(c if c.isalnum() else "-" for c in run_id.lower()))[:_KEY_CHARS]


def summary_table(report: Report) -> list[dict[str, Any]]:
    """The summary rows, rounded for display."""
    return [
        {
            "metric": s.metric,
            "mean": None if s.mean is None else round(s.mean, 4),
            "ci_low": None if s.ci_low is None else round(s.ci_low, 4),
            "ci_high": None if s.ci_high is None else round(s.ci_high, 4),
            "n_ok": s.n_ok,
            "n_failed": s.n_failed,
            "n_skipped": s.n_skipped,
            "threshold": s.threshold,
            "flagged": s.flagged,
        }
        for s in report.summary
    ]


def _fmt(value: float | None) -> str:
    return fixed(value, missing="–")


def findings_markdown(report: Report) -> str:
    """The findings as markdown: judge, warnings, flags, worst questions, failures, calls."""
    lines = [f"# ragaudit run `{report.run_id}`", ""]
    lines.append(f"Judge: **{report.judge}** · embedder: **{report.embedder}**")
    lines.append("")
    for w in report.warnings:
        lines.append(f"> **Warning:** {w}")
        lines.append("")
    flagged = report.flagged
    if flagged:
        lines.append("## Flags")
        for s in flagged:
            side = "below" if s.higher_is_better else "above"
            lines.append(
                f"- **{s.metric}** mean {_fmt(s.mean)} "
                f"(95% CI {_fmt(s.ci_low)}–{_fmt(s.ci_high)}) is {side} its threshold "
                f"{s.threshold}"
            )
    else:
        lines.append("No metric crosses its threshold.")
    lines.append("")
    unscored = [s for s in report.summary if s.n_failed or s.n_skipped]
    if unscored:
        lines.append("## Rows not scored")
        lines += [f"- {s.metric}: {s.n_failed} failed, {s.n_skipped} skipped" for s in unscored]
        lines.append("")
    if report.worst:
        lines.append("## Worst questions")
        for metric in report.metrics:
            rows = [w for w in report.worst if w.metric == metric]
            if rows:
                listed = ", ".join(f"`{w.question_id}` ({fixed(w.value, 2)})" for w in rows)
                lines.append(f"- {metric}: {listed}")
        lines.append("")
    refs = report.reference_counts()
    if refs:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(refs.items()))
        lines += ["## Reference answers", counts, ""]
    total = report.calls_total
    if total is not None:
        cost = "unknown" if total.cost_usd is None else f"${total.cost_usd:.4f}"
        lines.append(
            f"LLM calls: {total.calls} (memo hits {total.memo_hits}, provider calls "
            f"{total.provider_calls}); tokens {total.tokens_in} in / {total.tokens_out} out; "
            f"cost {cost}"
        )
        if total.failures:
            lines.append(
                "Failed calls: " + ", ".join(f"{reason} × {n}" for reason, n in total.failures)
            )
    if report.judge_cost is not None:
        lines.append("Sort stage, " + report.judge_cost.line())
    return "\n".join(lines) + "\n"


async def publish_artifacts(report: Report) -> bool:
    """Create the table, markdown and link artifacts; False outside a Prefect run."""
    from prefect.artifacts import (
        acreate_link_artifact,
        acreate_markdown_artifact,
        acreate_table_artifact,
    )
    from prefect.context import get_run_context

    try:
        get_run_context()
    except Exception:  # a plain CLI call outside a flow: no run to attach artifacts to
        return False
    where = f"run {report.run_id}: judge {report.judge}; folder {report.run_dir}"
    await acreate_table_artifact(
        key=artifact_key("ragaudit-summary-", report.run_id),
        table=summary_table(report),
        description=where,
    )
    await acreate_markdown_artifact(
        key=artifact_key("ragaudit-findings-", report.run_id),
        markdown=findings_markdown(report),
        description=where,
    )
    for name in ("report.html", "report.xlsx"):
        path = report.run_dir / name
        if path.is_file():
            await acreate_link_artifact(
                key=artifact_key(f"ragaudit-{name.replace('.', '-')}-", report.run_id),
                link=path.resolve().as_uri(),
                link_text=f"{name} of run {report.run_id}",
                description=where,
            )
    return True


__all__ = ["artifact_key", "findings_markdown", "publish_artifacts", "summary_table"]
