"""An audit day as the audit holds it: its folder's files, its sampled requests, what it found.

The day's parts work on these (``_reading``: the traffic read and drawn; ``_grade``: the served
documents graded through the judgment store; ``_score``: the answers and the served lists
scored; ``_day``: the day end to end; ``_dryrun``: what a day would ask).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from ragaudit._audit_config import AuditSection
from ragaudit.config import RunConfig
from ragaudit.dataset import Question
from ragaudit.errors import ConfigError
from ragaudit.judging import JudgmentStore
from ragaudit.runfolder import RunsRoot

if TYPE_CHECKING:
    from ragaudit.audit._dryrun import DryRun
    from ragaudit.audit._source import ReadReport

REQUESTS = "requests.parquet"
SAMPLE = "sample.parquet"
VERDICTS = "verdicts.parquet"
SCORES = "scores.parquet"
ESTIMATES = "estimates.parquet"
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

    def question(self) -> Question:
        """The request as the judging library reads a question."""
        return Question(question_id=self.request_id, question=self.query, language=self.language)


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


__all__ = [
    "ESTIMATES",
    "KIND",
    "MANIFEST",
    "REPORT",
    "REQUESTS",
    "SAMPLE",
    "SCORES",
    "VERDICTS",
    "AuditDay",
    "Grading",
    "Served",
    "audit_dir",
    "audit_root",
    "audit_section",
    "judgment_store",
    "read_summary",
]
