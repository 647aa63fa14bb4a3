"""The ``audit:`` section of a config: the production traffic one audit reads, samples and grades.

Composed from the readers' options (``SourceOptions``, ``RedactOptions``) and the sampler's
(``SampleOptions``, whose fields sit at the section's top level: ``sample``,
``max_judge_tokens``, ``bands``, ``k``), so each option is declared once, beside the code that
reads it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from ragaudit._section import folder_name
from ragaudit.audit._redact import RedactOptions
from ragaudit.audit._sample import SampleOptions
from ragaudit.audit._source import SourceOptions
from ragaudit.config import RunConfig
from ragaudit.errors import ConfigError

REFERENCE_INPUTS = frozenset(
    {"reference", "reference_contexts", "reference_context_ids", "nuggets"}
)
"""Sample fields only a curated question set has: production traffic carries none of them."""

DEFAULT_METRICS = (
    "faithfulness",
    "answer_relevancy",
    "citation_support_recall",
    "aspect_refusal",
)


def reference_free(name: str, score: dict[str, Any] | None = None) -> bool:
    """Whether metric ``name`` scores an answer without a reference (KeyError: no such metric)."""
    from ragaudit.metrics import resolve

    return not (set(resolve(name, score).inputs) & REFERENCE_INPUTS)


class AuditSection(SampleOptions):
    """``ragaudit audit``: one day of a service's traffic, sampled, graded and estimated."""

    name: str
    """The audit's name: its folder ``<runs_root>/audit-<name>/<day>/`` and the salt of the hash
    sample (a query drawn once is drawn every day it recurs at the same rate)."""
    source: SourceOptions
    """Where the day's requests are read from, and how their fields map."""
    segment: str | None = None
    """A JMESPath expression over the normalised request (its filters), e.g.
    ``filters.collection``: each value is a segment with its own estimates; a request where it
    finds nothing is in ``(none)``. None: one segment."""
    redact: RedactOptions = RedactOptions()
    """Personal data replaced in queries, answers and documents before anything is written or
    sent to the judge."""
    max_bad_share: float = Field(default=0.05, ge=0.0, le=1.0)
    """The day fails when more than this share of its records does not map."""
    metrics: tuple[str, ...] = DEFAULT_METRICS
    """Answer metrics scored on every sampled request, with its served documents as contexts.
    Reference-free ones only (``ragaudit metrics``): traffic has no reference answer."""
    probe: int = Field(default=100, ge=0)
    """Queries of a series' first day searched again through the configured engine every day
    and graded through the store: when they move, the engine or the index moved, whatever the
    traffic did. 0: no probe."""
    judge_check_days: int = Field(default=7, ge=0)
    """Every this many days of a series, stored grades of its first day are asked again with
    the memo bypassed, to see whether the judge behind the model name changed. 0: never."""
    judge_check_size: int = Field(default=50, ge=2)
    """Stored grades a judge check asks again."""
    judge_check_kappa: float = Field(default=0.7, gt=0.0, le=1.0)
    """A judge check whose weighted κ against the stored grades is below this flags the judge."""
    content_share: float = Field(default=0.05, gt=0.0, le=1.0)
    """A segment whose share of graded documents rewritten since an earlier day reaches this
    has had its content changed."""
    on_regression: Literal["fail", "name", "ignore"] = "name"
    """A regression beyond noise in a segment (after the ``ragaudit.audit.regression`` event):
    ``fail`` fails the flow run, ``name`` appends "-regressed" to its name, ``ignore`` does
    neither."""

    @field_validator("name")
    @classmethod
    def _name_is_a_folder(cls, value: str) -> str:
        return folder_name(value)

    @field_validator("metrics")
    @classmethod
    def _reference_free(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        refused, unknown = [], []
        for name in value:
            try:
                if not reference_free(name):
                    refused.append(name)
            except KeyError:
                unknown.append(name)
        if unknown:
            raise ValueError(f"unknown metric {', '.join(unknown)} (ragaudit metrics lists them)")
        if refused:
            raise ValueError(
                f"{', '.join(refused)} need a reference answer or gold contexts, which production "
                "traffic does not have: an audit scores reference-free metrics only "
                "(faithfulness, answer_relevancy, the citation metrics, aspects)"
            )
        return value

    def sampling(self) -> SampleOptions:
        """The sampler's options of this section (its own fields, nothing else)."""
        return SampleOptions.model_validate(
            {name: getattr(self, name) for name in SampleOptions.model_fields}
        )


def audit_section(config: RunConfig) -> AuditSection:
    """The config's ``audit`` section, typed; a ConfigError when the config has none."""
    section = config.audit
    if not isinstance(section, AuditSection):
        raise ConfigError(
            "audit: the config has no audit section (name, source, segment, sample …); "
            "see the README's 'Audit your production traffic'"
        )
    return section


__all__ = ["DEFAULT_METRICS", "REFERENCE_INPUTS", "AuditSection", "audit_section", "reference_free"]
