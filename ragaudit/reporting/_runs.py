"""The runs under a root: when, on which question set, with which judge, and their means."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ragaudit.numbers import fixed
from ragaudit.reporting._build import _read, judge_cost, question_set_hash, run_folder
from ragaudit.reporting._model import JudgeCost
from ragaudit.reporting._summary import stored_rows
from ragaudit.runfolder import RunsRoot, run_state

if TYPE_CHECKING:
    from rich.table import Table


@dataclass(frozen=True)
class CorrectedMean:
    """A metric's or figure's mean corrected by people's labels (PPI), as the summary keeps it."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n_labels: int | None
    note: str | None = None
    """Why there is no interval, or how the labels were weighted."""


@dataclass(frozen=True)
class RunOverview:
    """One run folder at a glance (read from its manifest and summary, no statistics)."""

    run_id: str
    run_dir: Path
    started_at: str | None
    status: str | None
    questions_file: str | None
    question_set_hash: str | None
    n_questions: int
    judge: str | None
    means: dict[str, float | None]
    ci: dict[str, tuple[float | None, float | None]]
    judge_cost: JudgeCost | None = None
    """The sort stage's judge calls and prompt tokens per question (None: none recorded)."""
    corrected: dict[str, CorrectedMean] = field(default_factory=dict)
    """Per metric or figure people labelled, its mean corrected by their labels. The judged
    candidates' figures (the relevant share, NDCG@10) are in ``means`` and ``ci`` too, as the
    judge's, once labels corrected them."""


def run_overview(run_dir: Path) -> RunOverview:
    """The overview of one run folder."""
    run = run_folder(run_dir)
    state = run_state(run_dir)
    if state.status == "damaged":
        # Listed as damaged with nothing read from it: one bad folder never hides the others.
        return RunOverview(run.run_id, run.path, None, state.status, None, None, 0, None, {}, {})
    manifest = run.read_manifest()
    questions = _read(run, "questions")
    metric_rows, figure_rows = stored_rows(
        run.read("summary").to_pylist() if run.has("summary") else []
    )
    summary = metric_rows + figure_rows
    return RunOverview(
        run_id=run.run_id,
        run_dir=run.path,
        started_at=manifest.get("started_at"),
        status=state.status,
        questions_file=manifest.get("config", {}).get("questions"),
        question_set_hash=question_set_hash(questions) if questions is not None else None,
        n_questions=0 if questions is None else questions.height,
        judge=manifest.get("models", {}).get("judge"),
        means={r["metric"]: r["mean"] for r in summary},
        ci={r["metric"]: (r["ci_low"], r["ci_high"]) for r in summary},
        judge_cost=judge_cost(run),
        corrected={
            r["metric"]: CorrectedMean(
                r.get("ppi_mean"),
                r.get("ppi_ci_low"),
                r.get("ppi_ci_high"),
                r.get("n_labels"),
                r.get("ppi_note"),
            )
            for r in summary
            if r.get("n_labels") is not None
        },
    )


def list_runs(root: Path) -> list[RunOverview]:
    """Every run folder under ``root`` (one with a manifest), oldest first."""
    dirs = RunsRoot(root).run_dirs()
    runs = [run_overview(d) for d in dirs]
    return sorted(runs, key=lambda r: (r.started_at or "", r.run_id))


def trend(
    runs: list[RunOverview], metric: str, question_set: str | None = None
) -> tuple[str | None, list[RunOverview]]:
    """The runs of one question set that scored ``metric``, oldest first.

    ``question_set`` is a hash (or its prefix, or a questions file path); None takes the set of
    the newest run that scored the metric.
    """
    scored = [r for r in runs if r.means.get(metric) is not None]
    if not scored:
        return None, []
    if question_set is None:
        chosen = scored[-1].question_set_hash
    else:
        chosen = next(
            (
                r.question_set_hash
                for r in reversed(scored)
                if r.questions_file == question_set
                or (r.question_set_hash or "")
                .removeprefix("k1:")
                .startswith(question_set.removeprefix("k1:"))
            ),
            None,
        )
    return chosen, [r for r in scored if chosen is not None and r.question_set_hash == chosen]


__all__ = ["CorrectedMean", "RunOverview", "list_runs", "run_overview", "trend"]


def _mean(value: float | None) -> str:
    return fixed(value)


def corrected_text(found: CorrectedMean | None) -> str:
    """``PPI 0.397 (0.352-0.441, 100 labelled)``; the note when labels gave no interval."""
    if found is None:
        return ""
    if found.mean is None:
        return f"PPI - ({found.n_labels} labelled: {found.note or 'no interval'})"
    return (
        f"PPI {fixed(found.mean)} ({fixed(found.ci_low)}-{fixed(found.ci_high)}, "
        f"{found.n_labels} labelled)"
    )


def _means_line(r: RunOverview, metric: str, value: float | None) -> str:
    """A metric's mean, and beside it its mean corrected by people's labels when it has one."""
    people = corrected_text(r.corrected.get(metric))
    return f"{metric} {_mean(value)}" + (f" · {people}" if people else "")


WIDE = 170
"""Console columns from which ``runs_table`` lays a run out on one row."""


def runs_table(runs: list[RunOverview], title: str, width: int = WIDE) -> Table:
    """The runs as a Rich table that stays readable at any console ``width``.

    Every metric a run scored is in its ``means`` cell, named in full, one per line: a column
    per metric cut the names to the same "context…" at 80 columns and left out all but four
    (the one that regressed among them). Below ``WIDE`` columns a run's fields stack in one
    cell beside its id, so none is cut: a status such as ``completed_with_failures`` is never
    "complet…".
    """
    from rich.table import Table

    table = Table(title=title, show_lines=True)
    wide = width >= WIDE
    table.add_column("run", overflow="fold")
    if wide:
        # The short fields whole; the long ones share what is left, folding.
        table.add_column("started", no_wrap=True)
        table.add_column("status", no_wrap=True)
        table.add_column("question set", overflow="fold")
        table.add_column("n", justify="right", no_wrap=True)
        table.add_column("judge", overflow="fold")
        table.add_column("judge calls / prompt tokens per question", overflow="fold")
        names = [m for r in runs for m in r.means]
        table.add_column("means", overflow="fold", min_width=max(map(len, names), default=1) + 6)
    else:
        table.add_column("started · status · set · judge · cost · means", overflow="fold")
    for r in runs:
        started = (r.started_at or "")[:16].replace("T", " ")
        short = (r.question_set_hash or "").removeprefix("k1:")[:10]
        question_set = f"{Path(r.questions_file or '').name} {short}".strip()
        means = "\n".join(_means_line(r, m, v) for m, v in r.means.items()) or "-"
        c = r.judge_cost
        cost = (
            "-"
            if c is None
            else f"relevance {c.relevance_calls:,.0f} / {c.relevance_tokens:,.0f}\n"
            f"ordering {c.ordering_calls:,.0f} / {c.ordering_tokens:,.0f}"
        )
        if wide:
            table.add_row(
                r.run_id,
                started,
                r.status or "",
                question_set,
                str(r.n_questions),
                r.judge or "",
                cost,
                means,
            )
        else:
            table.add_row(
                r.run_id,
                f"{started} · {r.status or ''}\n{question_set} · {r.n_questions} questions\n"
                f"judge {r.judge or '-'}\n{cost}\n{means}",
            )
    return table
