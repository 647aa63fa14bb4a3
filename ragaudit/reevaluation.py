"""Scheduled re-evaluation: the previous run like this one, the comparison, what regressed.

A nightly run evaluates the question set again, then compares itself with the newest earlier
run under the same runs root that finished, on the same question set (its hash) and the same
configuration (everything that changes a score; concurrency, retries, folders and this
section are not). The comparison is ``ragaudit.reporting``'s :func:`compare_runs`; this module
only picks the baseline and renders the result for Prefect: a table and a markdown artifact,
and the ``ragaudit.regression`` event that a Prefect automation turns into a notification.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ragaudit.cache import canonical_hash
from ragaudit.config import RunConfig
from ragaudit.reporting import Comparison, RunOverview, artifact_key, list_runs, run_overview
from ragaudit.runfolder import RunFolder

REGRESSION_EVENT = "ragaudit.regression"
"""Name of the event emitted when a metric regressed beyond noise against the baseline."""

REGRESSED_SUFFIX = "-regressed"
"""Suffix of a flow run's name when ``nightly.on_regression`` is ``name``."""

# Settings that change how a run is carried out, not what it measures: two runs differing
# only here are still the same configuration.
_OPERATIONAL = (
    "run_id",
    "runs_root",
    "cache_dir",
    "cache",
    "nightly",
    "scale",
    "ablate",
    "models.concurrency",
    "models.global_limit",
    "models.max_retries",
    "models.max_repairs",
    "models.backoff_s",
    "models.timeout_s",
    "collect.answers.concurrency",
    "collect.answers.retries",
    "collect.answers.backoff_s",
    "collect.answers.timeout_s",
)


def config_key(config: RunConfig) -> str:
    """Hash of what in the configuration changes a score (operational settings left out)."""
    data = config.model_dump(mode="json")
    for dotted in _OPERATIONAL:
        *parents, last = dotted.split(".")
        node: Any = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return canonical_hash(data)


def _stored_key(run_dir: Path) -> str | None:
    """The config key of a stored run (None when its config does not load in this version)."""
    stored = RunFolder(run_dir.parent, run_dir.name).read_manifest().get("config")
    if not isinstance(stored, dict):
        return None
    with contextlib.suppress(ValidationError):
        return config_key(RunConfig.model_validate(stored))
    return None


def previous_run(
    run_dir: Path,
    statuses: tuple[str, ...] = ("completed", "completed_with_failures"),
) -> RunOverview | None:
    """The newest run before ``run_dir`` under its root with its question set and config.

    "Before" is by start time; the run must have finished with one of ``statuses``.
    """
    run_dir = Path(run_dir)
    current = run_overview(run_dir)
    if current.question_set_hash is None:
        return None
    key = _stored_key(run_dir)
    candidates = [
        r
        for r in list_runs(run_dir.parent)
        if r.run_id != current.run_id
        and r.status in statuses
        and r.question_set_hash == current.question_set_hash
        and (r.started_at or "") < (current.started_at or "\uffff")
    ]
    for r in reversed(candidates):  # newest first; reading a manifest's config is the cost
        if _stored_key(r.run_dir) == key:
            return r
    return None


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


def no_baseline_markdown(run_id: str, run_dir: Path) -> str:
    """What the artifact says when no earlier run like this one exists yet."""
    return (
        f"# ragaudit re-evaluation `{run_id}`\n\nNo earlier completed run of this question set "
        f"and configuration under `{run_dir.parent}`: this run is the baseline of the next.\n"
    )


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
    cmp: Comparison, question_set_hash: str, questions_file: str | None
) -> RegressionEvent | None:
    """The event for metrics that regressed beyond noise; None when none did.

    Runs that are not like for like never regress: their numbers do not compare.
    """
    if not cmp.comparable or not cmp.regressed:
        return None
    regressed = [m for m in cmp.metrics if m.metric in cmp.regressed]
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
            "run_dir": str(cmp.dir_b),
            "question_set_hash": question_set_hash,
            "regressed": list(cmp.regressed),
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
                for m in regressed
            ],
        },
    )


async def publish_comparison(cmp: Comparison | None, run_id: str, run_dir: Path) -> list[str]:
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
            markdown=no_baseline_markdown(run_id, run_dir),
            description=f"run {run_id}: no baseline",
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
    "comparison_markdown",
    "comparison_table",
    "config_key",
    "no_baseline_markdown",
    "previous_run",
    "publish_comparison",
    "question_set_resource",
    "regression_event",
]
