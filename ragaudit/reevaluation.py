"""Scheduled re-evaluation: the previous run like this one, the comparison, what regressed.

A nightly run evaluates the question set again, then compares itself with the newest earlier
run under the same runs root that finished, on the same question set (its hash) and the same
configuration (everything that changes a score; concurrency, retries, folders and this
section are not). The comparison is ``ragaudit.reporting``'s :func:`compare_runs`; this module
only picks the baseline and renders the result for Prefect: a table and a markdown artifact,
and the ``ragaudit.regression`` event that a Prefect automation turns into a notification.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragaudit.config import RunConfig
from ragaudit.judging import config_signature
from ragaudit.reporting import (
    Comparison,
    RunOverview,
    artifact_key,
    judge_cost,
    list_runs,
    regressions,
    run_overview,
)
from ragaudit.runfolder import (
    COMPLETE_STATUSES,
    RunFolder,
    RunsRoot,
    config_key,
    measured_config,
    stored_config,
)

REGRESSION_EVENT = "ragaudit.regression"
"""Name of the event emitted when a metric regressed beyond noise against the baseline."""

REGRESSED_SUFFIX = "-regressed"
"""Suffix of a flow run's name when ``nightly.on_regression`` is ``name``."""


def _stored_config(run_dir: Path) -> RunConfig | None:
    """A stored run's config (None when it does not load in this version)."""
    return stored_config(RunFolder(run_dir.parent, run_dir.name))


def _leaves(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict) and node:
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(_leaves(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: node}


def _shown(value: Any, width: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= width else text[: width - 1] + "…"


def config_differences(before: RunConfig, now: RunConfig) -> list[str]:
    """What differs between two configurations, operational settings aside: ``field: a → b``."""
    a, b = _leaves(measured_config(before)), _leaves(measured_config(now))
    return [
        f"{field}: {_shown(a.get(field))} → {_shown(b.get(field))}"
        for field in sorted(a.keys() | b.keys())
        if a.get(field) != b.get(field)
    ]


@dataclass(frozen=True)
class UnlikeRun:
    """An earlier finished run of the same question set under another configuration."""

    run_id: str
    differences: tuple[str, ...]
    """``field: then → now`` for each setting that differs (empty: its config no longer loads)."""


def unlike_runs(
    run_dir: Path,
    statuses: tuple[str, ...] = COMPLETE_STATUSES,
    limit: int = 3,
) -> list[UnlikeRun]:
    """The newest earlier finished runs of ``run_dir``'s question set whose config differs.

    What a night without a baseline names: why the runs it might have been compared with
    were not (a changed judge, metric or any other setting that changes a score).
    """
    run_dir = Path(run_dir)
    current = run_overview(run_dir)
    now = _stored_config(run_dir)
    if current.question_set_hash is None or now is None:
        return []
    key = config_key(now)
    out: list[UnlikeRun] = []
    for r in reversed(list_runs(run_dir.parent)):
        if len(out) >= limit:
            break
        if (
            r.run_id == current.run_id
            or r.status not in statuses
            or r.question_set_hash != current.question_set_hash
            or (r.started_at or "") >= (current.started_at or "\uffff")
        ):
            continue
        then = _stored_config(r.run_dir)
        if then is None:
            out.append(UnlikeRun(r.run_id, ()))
        elif config_key(then) != key:
            out.append(UnlikeRun(r.run_id, tuple(config_differences(then, now))))
    return out


def no_baseline_verdict(unlike: Sequence[UnlikeRun]) -> str:
    """The verdict of a night without a baseline: the first night, or what changed since."""
    if not unlike:
        return "no baseline"
    newest = unlike[0]
    what = "; ".join(newest.differences[:3]) or "its config no longer loads"
    more = f" (+{len(newest.differences) - 3} more)" if len(newest.differences) > 3 else ""
    return (
        f"no baseline: the configuration changed since run {newest.run_id} of this question set "
        f"({what}{more}); {len(unlike)} earlier run(s) not compared"
    )


def previous_run(
    run_dir: Path,
    statuses: tuple[str, ...] = COMPLETE_STATUSES,
) -> RunOverview | None:
    """The newest run before ``run_dir`` under its root with its question set and config.

    "Before" is by start time; the run must have finished with one of ``statuses``
    (:meth:`ragaudit.runfolder.RunsRoot.previous_like`).
    """
    run_dir = Path(run_dir)
    found = RunsRoot(run_dir.parent).previous_like(
        RunFolder(run_dir.parent, run_dir.name), statuses
    )
    return None if found is None else run_overview(found.path)


def ordering_manifest(config: RunConfig, run: RunFolder) -> dict[str, Any]:
    """The manifest's ``ordering`` section: what the heads rest on, and how many were reused.

    The signature is what the next run compares with before building on this run's heads
    (a run that reused every head asks no ordering prompt, so its call log cannot say).
    """
    cost = judge_cost(run) if run.has("ranking") else None
    counts = dict(cost.head_sources) if cost is not None else {}
    return {
        "signature": config_signature(config),
        "previous": config.sort.previous,
        "head_source": counts,
        "reused_share": None if cost is None else cost.reused_share,
        # Why heads were ordered afresh (no earlier run like this one, another judge, a
        # question whose text changed): what a night's ordering cost rests on.
        "fresh_because": {} if cost is None else dict(cost.fresh_notes),
    }


def _num(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def comparison_table(cmp: Comparison) -> list[dict[str, Any]]:
    """One row per compared metric: both means, B − A, its interval, p-values and verdict."""
    return [
        {
            "metric": m.metric,
            "n_paired": m.n_paired,
            "mean_previous": _num(m.mean_a),
            "mean_now": _num(m.mean_b),
            "diff": _num(m.diff),
            "ci_low": _num(m.ci_low),
            "ci_high": _num(m.ci_high),
            "p_adjusted": _num(m.p_adjusted),
            "verdict": m.verdict,
        }
        for m in cmp.metrics
    ]


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:+.3f}"


def comparison_markdown(cmp: Comparison) -> str:
    """The comparison as markdown: verdict, what differs, each metric, the questions that moved."""
    lines = [
        f"# ragaudit re-evaluation `{cmp.run_b}` against `{cmp.run_a}`",
        "",
        f"**{cmp.verdict}**",
        "",
        f"Paired by question; permutation test, {cmp.adjustment.upper()}-adjusted across "
        f"metrics, α {cmp.alpha}. Judge: {cmp.judge_b}.",
        "",
    ]
    if cmp.regressed and cmp.comparable:
        lines += [f"> **Regression beyond noise:** {', '.join(cmp.regressed)}", ""]
    for d in cmp.differences:
        lines.append(f"- differs: **{d.what}**: previous `{d.a}`, now `{d.b}`")
    lines += [f"- note: {n}" for n in cmp.notes]
    lines += [
        "",
        "| metric | n | previous | now | now − previous | 95% CI | p adj | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in cmp.metrics:
        mean_a = "–" if m.mean_a is None else f"{m.mean_a:.3f}"
        mean_b = "–" if m.mean_b is None else f"{m.mean_b:.3f}"
        ci = "–" if m.ci_low is None else f"{_fmt(m.ci_low)} … {_fmt(m.ci_high)}"
        p = "–" if m.p_adjusted is None else f"{m.p_adjusted:.4f}"
        lines.append(
            f"| {m.metric} | {m.n_paired} | {mean_a} | {mean_b} | {_fmt(m.diff)} | {ci} | {p} "
            f"| {m.verdict} |"
        )
    if cmp.moved_questions:
        lines += ["", "## Questions that moved most", ""]
        for q in cmp.moved_questions:
            lines.append(
                f"- {q.metric} `{q.question_id}`: {q.value_a:.3f} → {q.value_b:.3f} ({q.diff:+.3f})"
            )
    return "\n".join(lines) + "\n"


def no_baseline_markdown(run_id: str, run_dir: Path, unlike: Sequence[UnlikeRun] = ()) -> str:
    """What the artifact says when no earlier run like this one exists yet, and why."""
    text = (
        f"# ragaudit re-evaluation `{run_id}`\n\nNo earlier completed run of this question set "
        f"and configuration under `{run_dir.parent}`: this run is the baseline of the next.\n"
    )
    if unlike:
        text += "\n## Earlier runs of this question set under another configuration\n\n"
        for u in unlike:
            what = "; ".join(f"`{d}`" for d in u.differences) or "its config no longer loads"
            text += f"- `{u.run_id}`: {what}\n"
    return text


def question_set_resource(question_set_hash: str) -> str:
    """Prefect resource id of a question set (what automations match on)."""
    return f"ragaudit.question-set.{question_set_hash.removeprefix('k1:')}"


@dataclass(frozen=True)
class RegressionEvent:
    """The arguments of :func:`prefect.events.emit_event` for a regression."""

    event: str
    resource: dict[str, str]
    payload: dict[str, Any]

    def emit(self) -> Any:
        """Send it to Prefect (a no-op outside a Prefect API, as ``emit_event`` is)."""
        from prefect.events import emit_event

        return emit_event(event=self.event, resource=self.resource, payload=self.payload)


def regression_event(
    cmp: Comparison,
    question_set_hash: str,
    questions_file: str | None,
    battles: Any = None,
) -> RegressionEvent | None:
    """The event for what regressed beyond noise (metrics, battles); None when nothing did.

    Args:
        cmp: The comparison of the baseline (A) with the new run (B).
        question_set_hash: The question set's hash (the event's resource).
        questions_file: The question set's file, for the resource's name.
        battles: The ``BattleStats`` of B against A when ``report.battles`` played them.
    """
    what = regressions(cmp, battles)
    if not what:
        return None
    regressed_metrics = [m for m in cmp.metrics if m.metric in cmp.regressed]
    return RegressionEvent(
        event=REGRESSION_EVENT,
        resource={
            "prefect.resource.id": question_set_resource(question_set_hash),
            "prefect.resource.name": questions_file or question_set_hash,
            "ragaudit.run-id": cmp.run_b,
            "ragaudit.baseline-run-id": cmp.run_a,
        },
        payload={
            "run_id": cmp.run_b,
            "baseline_run_id": cmp.run_a,
            # Absolute: the worker that emits it and the reader of the notification do not
            # share a working directory.
            "run_dir": str(Path(cmp.dir_b).resolve()),
            "baseline_run_dir": str(Path(cmp.dir_a).resolve()),
            "question_set_hash": question_set_hash,
            "regressed": what,
            "improved": list(cmp.improved),
            "verdict": cmp.verdict,
            "metrics": [
                {
                    "metric": m.metric,
                    "previous": _num(m.mean_a),
                    "now": _num(m.mean_b),
                    "delta": _num(m.diff),
                    "ci": [_num(m.ci_low), _num(m.ci_high)],
                    "p_adjusted": _num(m.p_adjusted),
                }
                for m in regressed_metrics
            ],
            "battles": None
            if battles is None
            else {
                "verdict": battles.verdict,
                "questions": battles.n,
                "win_rate": _num(battles.win_rate),
                "ci": [_num(battles.ci_low), _num(battles.ci_high)],
                "p_value": _num(battles.p_value),
                "position_consistency": _num(battles.consistency),
            },
        },
    )


async def publish_comparison(
    cmp: Comparison | None,
    run_id: str,
    run_dir: Path,
    unlike: Sequence[UnlikeRun] = (),
) -> list[str]:
    """Create the comparison's table and markdown artifacts; returns their keys.

    Outside a Prefect run nothing is created (an empty list).
    """
    from prefect.artifacts import acreate_markdown_artifact, acreate_table_artifact
    from prefect.context import get_run_context

    try:
        get_run_context()
    except Exception:  # not inside a flow or task run: nothing to attach artifacts to
        return []
    md_key = artifact_key("ragaudit-compare-", run_id)
    if cmp is None:
        await acreate_markdown_artifact(
            key=md_key,
            markdown=no_baseline_markdown(run_id, run_dir, unlike),
            description=f"run {run_id}: {no_baseline_verdict(unlike)}",
        )
        return [md_key]
    where = f"run {cmp.run_b} against {cmp.run_a}: {cmp.verdict}"
    table_key = artifact_key("ragaudit-compare-table-", run_id)
    await acreate_markdown_artifact(
        key=md_key, markdown=comparison_markdown(cmp), description=where
    )
    await acreate_table_artifact(key=table_key, table=comparison_table(cmp), description=where)
    return [md_key, table_key]


__all__ = [
    "REGRESSED_SUFFIX",
    "REGRESSION_EVENT",
    "RegressionEvent",
    "UnlikeRun",
    "comparison_markdown",
    "comparison_table",
    "config_differences",
    "config_key",
    "no_baseline_markdown",
    "no_baseline_verdict",
    "ordering_manifest",
    "previous_run",
    "publish_comparison",
    "question_set_resource",
    "regression_event",
    "unlike_runs",
]
