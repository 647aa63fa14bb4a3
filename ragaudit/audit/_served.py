"""An audit day as the audit holds it: its folder's files, its sampled requests, what it found.

The day's parts work on these (``_reading``: the traffic read and drawn; ``_grade``: the served
documents graded through the judgment store; ``_score``: the answers and the served lists
scored; ``_day``: the day end to end; ``_dryrun``: what a day would ask).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from ragaudit._audit_config import AuditSection
from ragaudit._conversation_config import ConversationConfig
from ragaudit.config import RunConfig
from ragaudit.conversation import in_context
from ragaudit.dataset import Question, Turn
from ragaudit.errors import ConfigError
from ragaudit.judging import Judge, JudgmentStore
from ragaudit.runfolder import RunsRoot

if TYPE_CHECKING:
    from ragaudit.audit._dryrun import DryRun
    from ragaudit.audit._source import ReadReport

REQUESTS = "requests.parquet"
SAMPLE = "sample.parquet"
VERDICTS = "verdicts.parquet"
SCORES = "scores.parquet"
ESTIMATES = "estimates.parquet"
TURN_ESTIMATES = "turn_estimates.parquet"
REPORT = "report.html"
MANIFEST = "manifest.json"
KIND = "audit"
"""``manifest.json``'s ``kind``: what tells an audit day's folder from a run's."""


def audit_root(config: RunConfig) -> Path:
    """``<runs_root>/audit-<name>/``: every day of one audit."""
    return Path(config.runs_root) / f"audit-{audit_section(config).name}"


def audit_dir(config: RunConfig, day: dt.date) -> Path:
    """``<runs_root>/audit-<name>/<day>/``."""
    return audit_root(config) / day.isoformat()


def judgment_store(config: RunConfig) -> JudgmentStore:
    """The runs root's judgment store: the one place an audit reaches the store's folder."""
    return JudgmentStore(RunsRoot(config.runs_root).judgments_dir)


def audit_section(config: RunConfig) -> AuditSection:
    """The config's ``audit`` section; a ConfigError when the config has none."""
    section = config.audit
    if section is None:
        raise ConfigError(
            "audit: the config has no audit section (name, source, segment, sample …); "
            "see the README's 'Audit your production traffic'"
        )
    return section


@dataclass
class Served:
    """One sampled request with its served top-k."""

    request_id: str
    unit: str
    segment: str
    query: str
    language: str
    answer: str | None
    citations: str | None
    docs: list[dict[str, Any]]
    """The top k served documents (``rank``, ``id``, ``text``, ``changed``), served order."""
    session: str | None = None
    turn: int | None = None
    """Its place in its session, from 1 (None: no session; ``_sessions.py``)."""
    history: tuple[Turn, ...] = ()
    """Its session's earlier turns, oldest first: what its judge prompts are shown with it."""
    history_incomplete: bool = False
    """The session may have begun before the earliest day read: earlier turns may be missing."""

    def question(self) -> Question:
        """The request as the judging library reads a question (a turn, with its history)."""
        q = Question(question_id=self.request_id, question=self.query, language=self.language)
        if self.turn is None:
            return q
        return q.model_copy(
            update={
                "conversation_id": self.session,
                "turn": self.turn,
                "history": list(self.history) or None,
            }
        )

    def judged(self, conversation: ConversationConfig, judge: Judge) -> Question:
        """The question every judge prompt of the request is built from, as a run's turn's.

        Its session's earlier turns before it, bounded by ``conversation``
        (:func:`ragaudit.conversation.in_context`); a request without a history is its query
        alone, the prompts and keys it always had.
        """
        return in_context(self.question(), conversation, judge.model, judge.budget)

    @property
    def turn_fields(self) -> dict[str, Any]:
        """``turn`` and ``history_incomplete`` as the sample, verdicts and scores rows hold them."""
        return {"turn": self.turn, "history_incomplete": self.history_incomplete}


@dataclass
class Grading:
    """What grading the served documents did."""

    pairs: int = 0
    from_store: int = 0
    from_memo: int = 0
    paid: int = 0
    failed: int = 0
    skipped: int = 0


@dataclass
class AuditDay:
    """Everything one audit day found, for its outputs, its console lines and the report."""

    config: RunConfig
    day: dt.date
    folder: Path
    read: Any
    """The reader's report (records, bad, bad_samples, redactions)."""
    sample: pl.DataFrame
    served: list[Served] = field(default_factory=list)
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    scores: list[dict[str, Any]] = field(default_factory=list)
    estimates: pl.DataFrame | None = None
    turn_estimates: pl.DataFrame | None = None
    """The estimates by turn band and turn kind (``estimate_turns``)."""
    strata: pl.DataFrame | None = None
    """Every stratum of the day, drawn from or not (``strata_table``)."""
    grading: Grading = field(default_factory=Grading)
    calls: dict[str, int] = field(default_factory=dict)
    """``calls``, ``cache_hits``, ``provider_calls`` of the day's judge and embedder calls."""
    plan: DryRun | None = None
    """The dry run's plan (``dry_run=True`` only; nothing else is then filled in)."""
    watch: Any = None
    """The day against its series (:class:`ragaudit.audit._watch.Watch`): changes, probe,
    judge check, the regression event."""
    no_data: str | None = None
    """Why the day had nothing to audit (no log file, no request); None when it had."""

    @property
    def section(self) -> AuditSection:
        """The config's audit section."""
        return audit_section(self.config)


def read_summary(read: ReadReport | None) -> dict[str, Any]:
    return {} if read is None else read.summary()


def conversation_counts(served: Sequence[Served]) -> dict[str, int]:
    """The sampled requests by their place in a session (the manifest's and report's counts).

    ``sessions``: distinct sessions sampled; ``in_session``: requests with a session;
    ``follow_ups``: those judged with earlier turns; ``history_incomplete``: those whose
    session may have begun before the earliest day read.
    """
    return {
        "sessions": len({s.session for s in served if s.session is not None}),
        "in_session": sum(s.turn is not None for s in served),
        "follow_ups": sum(bool(s.history) for s in served),
        "history_incomplete": sum(s.history_incomplete for s in served),
    }


__all__ = [
    "ESTIMATES",
    "KIND",
    "MANIFEST",
    "REPORT",
    "REQUESTS",
    "SAMPLE",
    "SCORES",
    "TURN_ESTIMATES",
    "VERDICTS",
    "AuditDay",
    "Grading",
    "Served",
    "audit_dir",
    "audit_root",
    "audit_section",
    "conversation_counts",
    "judgment_store",
    "read_summary",
]
