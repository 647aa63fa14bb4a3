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
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ragaudit.cache import canonical_hash
from ragaudit.config import RunConfig
from ragaudit.errors import StageError
from ragaudit.judging import PreviousHead, head_signature
from ragaudit.reporting import (
    Comparison,
    RunOverview,
    artifact_key,
    judge_cost,
    list_runs,
    read_calls,
    regressions,
    run_overview,
)
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
    "tune",
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
    # Which run the sort stage builds its head order on: the order it reuses was judged under
    # this same configuration, so a run that reuses one is still like one that did not.
    "sort.previous",
)


def _measured(config: RunConfig) -> dict[str, Any]:
    """The configuration as JSON, less the operational settings."""
    data = config.model_dump(mode="json")
    for dotted in _OPERATIONAL:
        *parents, last = dotted.split(".")
        node: Any = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return data


def config_key(config: RunConfig) -> str:
    """Hash of what in the configuration changes a score (operational settings left out)."""
    return canonical_hash(_measured(config))


def _stored_config(run_dir: Path) -> RunConfig | None:
    """A stored run's config (None when it does not load in this version)."""
    stored = RunFolder(run_dir.parent, run_dir.name).read_manifest().get("config")
    if not isinstance(stored, dict):
        return None
    with contextlib.suppress(ValidationError):
        return RunConfig.model_validate(stored)
    return None


def _stored_key(run_dir: Path) -> str | None:
    """The config key of a stored run (None when its config does not load in this version)."""
    config = _stored_config(run_dir)
    return None if config is None else config_key(config)


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
    a, b = _leaves(_measured(before)), _leaves(_measured(now))
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
    statuses: tuple[str, ...] = ("completed", "completed_with_failures"),
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


def config_signature(config: RunConfig) -> dict[str, object]:
    """The judge and prompt versions a run's judged heads rest on (see ``head_signature``)."""
    return head_signature(
        config.models.judge_model, config.models.temperature, config.sort.head_method
    )


def _stored_signature(run: RunFolder) -> dict[str, Any] | None:
    """The judge and head prompt versions a stored run ordered with (None: not known).

    From its manifest's ``ordering`` section; a run written before that section has its judge
    from its stored config and its prompt versions from its call log.
    """
    manifest = run.read_manifest()
    recorded = (manifest.get("ordering") or {}).get("signature")
    if isinstance(recorded, dict):
        return recorded
    config = _stored_config(run.path)
    calls = read_calls(run.calls_dir)
    if config is None or calls is None or "prompt_version" not in calls.columns:
        return None
    wanted = {str(v).split("@")[0] for v in config_signature(config)["prompt_versions"]}  # type: ignore[attr-defined]
    logged = sorted(
        v for v in calls["prompt_version"].drop_nulls().unique() if v.split("@")[0] in wanted
    )
    if not logged:
        return None
    return {**config_signature(config), "prompt_versions": logged}


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
    }


@dataclass(frozen=True)
class OrderingBaseline:
    """The earlier run whose judged heads the sort stage builds on, and those heads.

    ``heads`` holds only the questions whose previous ranking may be reused (status ``ok``,
    the same method); ``note`` says why there is no baseline or why it was not used.
    """

    run_id: str | None
    heads: dict[str, PreviousHead]
    note: str | None = None


def ordering_baseline(
    run: RunFolder, config: RunConfig, ids: frozenset[str] | None = None
) -> OrderingBaseline:
    """The previous heads ``sort.previous`` points at, for ``run``'s questions (``ids``).

    ``auto``: the nightly's baseline (:func:`previous_run`); a run id: that run, which must
    exist under the runs root; ``none``: no baseline. A baseline judged with another judge or
    other prompt versions gives no heads; per question only an ``ok`` ranking made by the same
    method is given.
    """
    cfg = config.sort
    if cfg.previous == "none" or cfg.order != "head":
        return OrderingBaseline(None, {})
    if cfg.previous == "auto":
        if _stored_config(run.path) is None:
            # Without its own config stored a run cannot say which runs are like it.
            return OrderingBaseline(None, {}, "this run's configuration is not stored yet")
        found = previous_run(run.path)
        if found is None:
            return OrderingBaseline(None, {}, "no earlier completed run of this configuration")
        prev = RunFolder(run.path.parent, found.run_id)
    else:
        prev = RunFolder(run.path.parent, cfg.previous)
        if prev.run_id == run.run_id or not prev.manifest_path.is_file():
            raise StageError(
                f"sort.previous: run {cfg.previous!r} is not a run under {run.path.parent}"
            )
    if not prev.has("ranking") or not prev.has("candidates") or not prev.has("verdicts"):
        return OrderingBaseline(prev.run_id, {}, f"run {prev.run_id} has no judged ranking")
    then, now = _stored_signature(prev), config_signature(config)
    if then != now:
        what = "not recorded" if then is None else _shown(then, 120)
        return OrderingBaseline(
            prev.run_id,
            {},
            f"run {prev.run_id} ordered with another judge or prompts ({what}; now "
            f"{_shown(now, 120)})",
        )
    method = f"head:{cfg.head_method}"
    texts: dict[str, dict[str, str]] = {}
    for c in prev.rows("candidates", ids):
        texts.setdefault(c["question_id"], {})[c["context_id"]] = c["text"]
    grades: dict[str, dict[str, int]] = {}
    for v in prev.rows("verdicts", ids):
        if v["grade"] is not None:
            grades.setdefault(v["question_id"], {})[v["context_id"]] = v["grade"]
    heads = {}
    for qid, row in prev.ranking(ids).items():
        if row.get("status") != "ok" or row.get("method") != method or row.get("exact_k") is None:
            continue
        ordered = tuple(row["ordered_ids"] or ())
        heads[qid] = PreviousHead(
            head=ordered[: row["exact_k"]],
            ordered=ordered,
            texts=texts.get(qid, {}),
            grades=grades.get(qid, {}),
        )
    return OrderingBaseline(prev.run_id, heads)


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
    "OrderingBaseline",
    "RegressionEvent",
    "UnlikeRun",
    "comparison_markdown",
    "comparison_table",
    "config_differences",
    "config_key",
    "config_signature",
    "no_baseline_markdown",
    "no_baseline_verdict",
    "ordering_baseline",
    "ordering_manifest",
    "previous_run",
    "publish_comparison",
    "question_set_resource",
    "regression_event",
    "unlike_runs",
]
