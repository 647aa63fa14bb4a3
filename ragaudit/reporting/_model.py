"""The report model: everything a run's report shows, as plain frozen dataclasses.

Built from a run folder alone (``build_report``); the CLI summary, the HTML page, the xlsx
export, the Prefect artifacts and ``compare`` all render this one model, so no figure is
computed in two places. ``to_dict`` gives its JSON-ready form.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragaudit.dataset import turn_band

if TYPE_CHECKING:
    # Only the annotation: ragaudit.ppi imports the calibration, which imports this package.
    from ragaudit.ppi import JudgeVsPeople, LabelledItem
    from ragaudit.stats import Corrected

Status = str
"""A row's status: ``ok``, ``failed`` (with the error) or ``skipped`` (with the reason)."""


@dataclass(frozen=True)
class MetricSummary:
    """One metric over the run: mean of the ``ok`` rows with its bootstrap interval."""

    metric: str
    mean: float | None
    ci_low: float | None
    """Lower end of the 95% percentile bootstrap interval of the mean (None: fewer than 2 rows)."""
    ci_high: float | None
    n_ok: int
    n_failed: int
    n_skipped: int
    threshold: float | None
    flagged: bool
    """The mean is on the wrong side of the threshold (below it, or above for lower-is-better)."""
    higher_is_better: bool = True
    ppi_mean: float | None = None
    """The mean corrected by people's labels (``ragaudit.ppi``); None without labels."""
    ppi_ci_low: float | None = None
    ppi_ci_high: float | None = None
    n_labels: int | None = None
    labels_to_halve: int | None = None


@dataclass(frozen=True)
class ScoreCell:
    """One question × metric score row."""

    metric: str
    value: float | None
    status: Status
    error: str | None
    """Why the row failed or was skipped."""
    reason: str | None
    """The judge's reasons as stored (JSON text: statements, verdicts, ratings)."""
    k_used: int | None = None
    judge: str | None = None
    samples: tuple[float | None, ...] = ()
    """Every (judge, repeat) score of the row (None: that sample failed); empty with one."""
    sample_judges: tuple[str, ...] = ()
    """Whose sample each of ``samples`` is."""


@dataclass(frozen=True)
class JudgeNoiseRow:
    """How much a metric's judges agree: one judge with its repeats, or the jury's judges."""

    metric: str
    kind: str
    """``self`` (a judge's repeats of each row) or ``jury`` (the judges' means of each row)."""
    judge: str | None
    alpha: float | None
    """Krippendorff's α (interval); None when it cannot be measured (no spread, too few rows)."""
    ci_low: float | None
    ci_high: float | None
    n_items: int
    """Rows with at least two answers (the only ones α can use)."""
    n_raters: int
    """Repeats (``self``) or judges (``jury``) per row, at most."""
    text: str


@dataclass(frozen=True)
class JudgeDisagreement:
    """A row whose judges' scores differ most: each judge's mean of its repeats."""

    metric: str
    question_id: str
    question: str
    scores: dict[str, float | None]
    spread: float
    """Highest judge mean less the lowest."""


@dataclass(frozen=True)
class ContextRow:
    """One of the top-k contexts the score stage read for a question, with the judge's verdict."""

    context_id: str
    text: str
    engine_rank: int
    engine_score: float | None
    relevant: bool | None
    """The judge's relevance verdict (None: no verdict, or the verdict failed)."""
    verdict_reason: str | None
    verdict_status: Status | None
    judge_rank: int | None
    """1-based place in the judge's order of the relevant contexts (None: not ranked relevant)."""
    grade: int | None
    """The judge's relevance grade, 0–3 (None: no verdict, or the verdict failed)."""
    gold_grade: int | None
    """The question set's gold grade, 0 not relevant (None: the question set has no gold)."""
    supporting: bool
    """The reference answer was written from this context."""
    grade_samples: tuple[tuple[str, int | None], ...] = ()
    """Each sample of its relevance grade as (judge, grade), with repeats or a jury; () with one."""

    @property
    def gold(self) -> bool | None:
        """A gold context of the question set: gold grade above 0 (None: no gold labels)."""
        return None if self.gold_grade is None else self.gold_grade > 0

    @property
    def judges_disagree(self) -> bool:
        """Whether the grade's samples (a judge's repeats, a jury's members) differ."""
        return len({g for _, g in self.grade_samples if g is not None}) > 1


@dataclass(frozen=True)
class NdcgPoint:
    """Mean NDCG@k of one ordering over the questions where it is defined."""

    comparison: str
    """``engine_vs_gold``, ``judge_vs_gold`` or ``judge_vs_engine``, as in ``agreement``."""
    k: int
    mean: float | None
    n_questions: int


@dataclass(frozen=True)
class NuggetRow:
    """One nugget of a question, with the nugget metrics' verdict on the answer (if scored)."""

    index: int
    text: str
    importance: str
    context_ids: tuple[str, ...]
    """The contexts that state it: where a missed fact can be found."""
    verdict: str | None = None
    """``support``, ``partial_support`` or ``not_support`` (None: no nugget metric scored)."""
    verdict_reason: str | None = None


@dataclass(frozen=True)
class TurnRow:
    """One earlier turn of a question's conversation, as its pages show it."""

    role: str
    """``user`` or ``assistant``."""
    text: str
    left_out: bool
    """The judge's prompts of the question did not carry this turn (the oldest exchanges go
    first: ``conversation.max_history_turns``, the judge's window)."""


@dataclass(frozen=True)
class ConversationRow:
    """Where a question stands in its conversation, and the turns before it."""

    conversation_id: str | None
    turn: int
    """Its place among the conversation's user turns (a question alone in a set with
    conversations counts as a first turn)."""
    history: tuple[TurnRow, ...]
    history_cut: int | None
    """Earlier exchanges the judge's prompts left out, as the questions table recorded it (None:
    not recorded)."""
    turn_kind: str
    """``standalone``, ``follow-up`` or ``clarification``."""
    turn_kind_given: bool
    """The set gave ``turn_kind``; otherwise it is read from the position (turn 1 standalone, a
    later turn follow-up)."""
    answerability: str | None
    """The set's label (None: not labelled)."""
    rewrite: str | None = None

    @property
    def band(self) -> str:
        """The turn's band (``1``, ``2``, ``3-5``, ``6+``)."""
        return turn_band(self.turn) or "1"


@dataclass(frozen=True)
class Breakdown:
    """The metrics split one way by where questions stand in their conversations.

    Each cell's summary is over the cell's questions alone: mean, n and the bootstrap interval.
    """

    name: str
    """``turn_band``, ``turn_kind`` or ``answerability``."""
    title: str
    cells: tuple[str, ...]
    """The cells that hold a question, in their natural order."""
    members: dict[str, str]
    """Question id → its cell."""
    summaries: tuple[tuple[str, MetricSummary], ...] = ()
    """(cell, a metric's summary over it), the cells in order, the metrics in the run's."""
    note: str | None = None
    """How cells were read where the set does not say (shown beside the table)."""

    def summary(self, cell: str, metric: str) -> MetricSummary | None:
        """``metric``'s summary over ``cell`` (None: no row of it there)."""
        return next((s for c, s in self.summaries if c == cell and s.metric == metric), None)

    def size(self, cell: str) -> int:
        """Questions in ``cell``."""
        return sum(1 for c in self.members.values() if c == cell)


@dataclass(frozen=True)
class QuestionRow:
    """One question with the system's answer, the reference used and every metric's cell."""

    question_id: str
    question: str
    answer: str | None
    answer_status: Status | None
    reference: str | None
    """The reference the metrics read: the ground_truth stage's when usable, else the set's."""
    language: str | None
    scores: dict[str, ScoreCell] = field(default_factory=dict)
    reference_status: Status | None = None
    """The ground_truth stage's status for this question (None: the stage did not run)."""
    supporting_ids: tuple[str, ...] = ()
    """Ids of the contexts the reference answer was written from."""
    contexts: tuple[ContextRow, ...] = ()
    """The top-k contexts by engine rank (the score stage's k), with the judge's verdicts."""
    nuggets: tuple[NuggetRow, ...] = ()
    """The question's nuggets (vital first) with the answer's verdicts."""
    nuggets_status: Status | None = None
    """The ground_truth stage's nugget status (None: no nuggets table)."""
    nuggets_note: str | None = None
    conversation: ConversationRow | None = None
    """Its conversation when it is a turn of one (None: a set of lone questions)."""


@dataclass(frozen=True)
class WorstQuestion:
    """A question among the worst of one metric (direction-aware)."""

    metric: str
    question_id: str
    value: float
    question: str = ""


@dataclass(frozen=True)
class AgreementRow:
    """One ranking-agreement figure (from ``agreement.parquet``).

    ``question_id == "__all__"`` rows are the means over the questions where it is defined.
    """

    question_id: str
    comparison: str
    """``judge_vs_engine``, ``engine_vs_gold`` or ``judge_vs_gold``."""
    metric: str
    k: int | None
    value: float | None
    n_questions: int | None
    status: Status
    reason: str | None


@dataclass(frozen=True)
class GradeNoiseRow:
    """The agreement of the relevance grades' samples (from ``grade_noise.parquet``)."""

    kind: str
    """``self`` (one judge's repeats) or ``jury`` (the members' grades)."""
    judge: str | None
    scale: str
    """``grade`` (0–3) or ``relevant`` (the relevant cut)."""
    level: str
    alpha: float | None
    ci_low: float | None
    ci_high: float | None
    n_items: int
    n_raters: int
    disagreed: int


@dataclass(frozen=True)
class ReferenceRow:
    """One question's reference answer as the ground_truth stage left it."""

    question_id: str
    status: Status
    origin: str | None
    mode: str | None
    error: str | None
    n_supporting: int
    calls: int | None
    tokens_in: int | None
    tokens_out: int | None


@dataclass(frozen=True)
class StageCalls:
    """The call log of one stage rolled up (memo hits included in ``calls``)."""

    stage: str
    calls: int
    memo_hits: int
    provider_calls: int
    tokens_in: int
    tokens_out: int
    cost_usd: float | None
    """Sum over the calls litellm could price; None when it could price none."""
    priced_calls: int
    """Calls with a known cost (a partial sum when fewer than ``provider_calls``)."""
    latency_p50_s: float | None
    """Median latency of the provider calls (memo hits excluded: they cost ~0)."""
    latency_p95_s: float | None
    failures: tuple[tuple[str, int], ...] = ()
    """(reason, count) of failed calls, most frequent first."""
    models: tuple[str, ...] = ()
    prompt_versions: tuple[str, ...] = ()


@dataclass(frozen=True)
class JudgeCost:
    """What the sort stage asked of the judge, per question, for grading and for ordering."""

    questions: int
    method: str | None
    """How the relevant candidates were ordered (``head:window``, ``pairwise:sample``, ...)."""
    relevance_calls: float
    relevance_tokens: float
    ordering_calls: float
    ordering_tokens: float
    head_sources: tuple[tuple[str, int], ...] = ()
    """Questions per head source (``reused``, ``inserted``, ``fresh``); empty before the
    ``ranking`` table recorded it."""
    fresh_notes: tuple[tuple[str, int], ...] = ()
    """Why heads were ordered afresh rather than built on a previous run's, with how many
    questions each, most frequent first (empty: none, or a table before it recorded why)."""

    @property
    def reused_share(self) -> float | None:
        """Share of the judged heads reused from the previous run with no call (None: none)."""
        counts = dict(self.head_sources)
        total = sum(counts.values())
        return counts.get("reused", 0) / total if total else None

    def line(self) -> str:
        """One line for a report: calls and prompt tokens per question, each phase."""
        text = (
            f"judge per question: relevance {self.relevance_calls:,.0f} calls, "
            f"{self.relevance_tokens:,.0f} prompt tokens; ordering ({self.method or '-'}) "
            f"{self.ordering_calls:,.0f} calls, {self.ordering_tokens:,.0f} prompt tokens "
            f"(mean over {self.questions} questions)"
        )
        share = self.reused_share
        if share is not None:
            counts = dict(self.head_sources)
            total = sum(counts.values())
            text += (
                f"; heads reused from the previous run {counts.get('reused', 0)} of {total} "
                f"({share:.0%}), inserted into {counts.get('inserted', 0)}, "
                f"ordered afresh {counts.get('fresh', 0)}"
            )
        if self.fresh_notes:
            text += "; ordered afresh because " + "; ".join(
                f"{why} ({n})" for why, n in self.fresh_notes[:3]
            )
        return text


@dataclass(frozen=True)
class Report:
    """Everything one run's report shows."""

    run_id: str
    run_dir: Path
    status: str | None
    started_at: str | None
    finished_at: str | None
    judge: str | None
    embedder: str | None
    generator: str | None
    warnings: tuple[str, ...]
    """The manifest's warnings (a smoke-quality judge, an English-only embedder on Chinese)."""
    questions_file: str | None
    question_set_hash: str | None
    """Hash of the questions table's ids, texts, filters and references (comparability)."""
    metrics: tuple[str, ...]
    """Metric names in the order the run scored them."""
    summary: tuple[MetricSummary, ...]
    questions: tuple[QuestionRow, ...]
    worst: tuple[WorstQuestion, ...]
    agreement: tuple[AgreementRow, ...]
    references: tuple[ReferenceRow, ...]
    calls: tuple[StageCalls, ...]
    """Per stage as logged (``score:<metric>`` per metric), in the order the stages ran."""
    calls_total: StageCalls | None
    prompt_versions: tuple[str, ...]
    """Every prompt ``name@version`` in the call log."""
    score_config: dict[str, Any]
    """The run's ``score`` config section (metric parameters; comparability)."""
    report_config: dict[str, Any]
    timings: dict[str, Any] = field(default_factory=dict)
    ndcg_curve: tuple[NdcgPoint, ...] = ()
    """Mean NDCG@k for k = 1..K of the engine's and the judge's orders (gold or judge gains)."""
    manifest: dict[str, Any] = field(default_factory=dict)
    """The run's manifest.json as written (config, git, packages, models, warnings)."""
    grade_noise: tuple[GradeNoiseRow, ...] = ()
    """Self- and jury agreement of the relevance grades (empty: one sample per grade)."""
    judge_cost: JudgeCost | None = None
    """The sort stage's judge calls and prompt tokens per question (None: no sort stage)."""
    judge_noise: tuple[JudgeNoiseRow, ...] = ()
    """Per metric, each judge's self-agreement and the jury's agreement (with repeats or a
    jury; empty otherwise)."""
    judge_disagreements: tuple[JudgeDisagreement, ...] = ()
    """Per metric, the rows whose judges disagree most (with a jury)."""
    people: JudgeVsPeople | None = None
    """The judge against people's labels of the run (``ragaudit.ppi``); None without labels."""
    labelled: tuple[LabelledItem, ...] = ()
    """Every item people labelled, with each person's latest label and the judge's value."""
    breakdowns: tuple[Breakdown, ...] = ()
    """Every metric by turn position, turn kind and answerability (empty: a question set
    without conversations)."""
    incomplete: str | None = None
    """Why the run is not complete (``ragaudit.runfolder.run_state``'s warning, a live run
    included); None when it completed. Read once, when the report is built."""

    def summary_for(self, metric: str) -> MetricSummary | None:
        """The summary row of ``metric``, or None."""
        return next((s for s in self.summary if s.metric == metric), None)

    @property
    def label_disagreements(self) -> tuple[LabelledItem, ...]:
        """The labelled items where some person's latest label differs from the judge's."""
        return tuple(i for i in self.labelled if i.disagrees)

    @property
    def flagged(self) -> tuple[MetricSummary, ...]:
        """Metrics whose mean is on the wrong side of its threshold."""
        return tuple(s for s in self.summary if s.flagged)

    @property
    def overall_agreement(self) -> tuple[AgreementRow, ...]:
        """The ``__all__`` agreement rows (means over questions)."""
        return tuple(a for a in self.agreement if a.question_id == "__all__")

    def reference_counts(self) -> dict[str, int]:
        """Reference answers per status."""
        out: dict[str, int] = {}
        for r in self.references:
            out[r.status] = out.get(r.status, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (NaN as None, paths as text)."""
        return _jsonable(dataclasses.asdict(self))


def labelled(found: Corrected, word: str = " labels") -> str:
    """A corrected figure's labels, with the questions they came from when drawn by question.

    ``200 labels in 10 questions`` (``word`` follows the count; "" where a column says it).
    """
    questions = f" in {found.questions} questions" if found.questions else ""
    return f"{found.n_labelled}{word}{questions}"


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    return obj


__all__ = [
    "AgreementRow",
    "Breakdown",
    "ContextRow",
    "ConversationRow",
    "GradeNoiseRow",
    "JudgeCost",
    "JudgeDisagreement",
    "JudgeNoiseRow",
    "MetricSummary",
    "NdcgPoint",
    "NuggetRow",
    "QuestionRow",
    "ReferenceRow",
    "Report",
    "ScoreCell",
    "StageCalls",
    "TurnRow",
    "WorstQuestion",
    "labelled",
]
