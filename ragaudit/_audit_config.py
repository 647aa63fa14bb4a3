"""The ``audit:`` section of a config: the production traffic one audit reads, samples and grades.

In the base layer beside ``audit/`` (ADR 19): ``config.py`` composes it as it does the other
sections, and loading a config with an ``audit:`` section imports no library module, no litellm and
no polars. Its option models are declared here once and read by the code beside them: the sampler's
(``SampleOptions``, whose fields sit at the section's top level: ``sample``, ``max_judge_tokens``,
``bands``, ``k``, ``turn_strata``; ``audit/_sample.py``), the redactor's (``RedactOptions``;
``audit/_redact.py``) and where the traffic is read from (``SourceOptions``; ``audit/_source.py``).
Registered kinds the section names — the reader of ``source.format``, the metrics — are checked
through the registry, which loads their modules by name only when one is given. A field that changes
how a day runs, not what it measures (where the logs lie, when a day fails, the probe and the judge
check, what an alarm does) is ``operational``: left out of a day's identity, its series.
"""

from __future__ import annotations

import hashlib
import zoneinfo
from collections.abc import Mapping
from typing import Any, Literal

import phonenumbers
import regex
from pydantic import BaseModel, Field, field_validator, model_validator

from ragaudit._section import Section, folder_name, operational
from ragaudit.errors import clip
from ragaudit.registry import METRICS, READERS

DEFAULT_PHONE_REGIONS = ("CN", "US", "GB", "DE", "IN", "JP")
"""Countries whose national phone formats the redactor recognises unless told others."""

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

DEFAULT_MIN_CHANGE: dict[str, float] = {
    "ndcg@k": 0.02,
    "precision@k": 0.02,
    "relevant share": 0.02,
    "dcg@k": 0.1,
    "*": 0.02,
}
"""The smallest change of a metric worth an alarm, by default: two points of a share (nDCG,
precision, the relevant share, an answer metric's 0–1 score: ``*``), a tenth of a DCG point
(about two points of nDCG at a typical list's ideal DCG)."""

_EARLIER_KEYS = ("fields", "ubi")
"""Where configs written before readers were registered held the built-in formats' options."""


def reference_free(name: str) -> bool:
    """Whether the registered metric ``name`` scores an answer without a reference.

    Raises:
        KeyError: no such metric (the message lists the known).
    """
    return not (set(METRICS.get(name).inputs) & REFERENCE_INPUTS)


class Bands(Section):
    """Frequency-band thresholds in requests a day."""

    head: int = Field(default=10, ge=2)
    """A query asked at least this many times a day is in the head band."""
    torso: int = Field(default=2, ge=2)
    """A query asked at least this many times (and fewer than ``head``) is torso; fewer, tail."""

    @model_validator(mode="after")
    def _ordered(self) -> Bands:
        if self.torso > self.head:
            raise ValueError(f"bands: torso ({self.torso}) must not exceed head ({self.head})")
        return self


class SampleOptions(Section):
    """How much of the day's traffic is graded, and how it is stratified."""

    sample: int | None = Field(default=400, ge=1)
    """Requests to grade a day (the expected size of the draw: one of each drawn query, more
    of a query taken with certainty). None: no cap by count (then ``max_judge_tokens`` caps,
    or every request is graded)."""
    max_judge_tokens: int | None = Field(default=None, ge=1)
    """Judge tokens a day at most, counted as if no grade were reused from the judgment store;
    with ``sample`` too, the smaller of the two caps holds."""
    bands: Bands = Field(default_factory=Bands)
    """Frequency bands of a query by its requests that day (head / torso / tail)."""
    k: int = Field(default=10, ge=1, le=100)
    """Served documents graded per drawn request (the top k)."""
    turn_strata: bool = False
    """Stratify by turn position too: strata segment × frequency band × turn band (``1``,
    ``2``, ``3-5``, ``6+``: the request's place in its session; requests without a session a
    band of their own), and a unit is a query asked at one turn band, so follow-ups get their
    own share of the sample. False: segment × frequency band. The day's estimates are broken
    down by turn band either way."""


class RedactPattern(Section):
    """One pattern of the team's own, replaced by ``[<name>]``."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")
    """What it finds (``account``): the placeholder and the count's name."""
    pattern: str = Field(max_length=2000)
    """A ``regex`` pattern; its match is replaced."""


class RedactOptions(Section):
    """``audit.redact``: what is replaced in queries, answers, documents and every other text."""

    defaults: bool = True
    """Replace e-mail addresses, phone numbers, payment-card numbers and IBANs."""
    phone_regions: tuple[str, ...] = DEFAULT_PHONE_REGIONS
    """Countries (ISO 3166 codes) whose national phone formats are recognised; a number
    written with its +country code is found whatever its country."""
    patterns: tuple[RedactPattern, ...] = ()
    """The team's own patterns, applied first, on the text as logged, each replaced by
    ``[<name>]``."""
    timeout_s: float = Field(default=0.5, gt=0, le=60)
    """Time budget of all patterns on one text; a text that runs out is replaced whole."""

    @field_validator("phone_regions")
    @classmethod
    def _known_regions(cls, regions: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [r for r in regions if r not in phonenumbers.SUPPORTED_REGIONS]
        if unknown:
            raise ValueError(f"not a country code of phonenumbers: {clip(', '.join(unknown))}")
        return regions

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: tuple[RedactPattern, ...]) -> tuple[RedactPattern, ...]:
        for p in patterns:
            try:
                regex.compile(p.pattern)
            except regex.error as exc:
                raise ValueError(f"pattern '{p.name}' ({clip(p.pattern)}): {exc}") from None
        return patterns


class SourceOptions(Section):
    """``audit.source``: where a day's requests are read from, by which registered reader."""

    format: str = "jsonl"
    """A registered reader (``ragaudit plugins`` lists them): ``jsonl`` / ``parquet``, the
    service's own request logs, one request per record; ``otlp``, OpenTelemetry trace files
    (the OTLP JSON file exporter's lines); ``ubi``, OpenSearch User Behavior Insights (the
    indexes, or an export file in ``path``); or a plugin's (named in the top-level
    ``plugins``). An unknown name fails when the config loads, listing the known."""
    path: str | None = operational(None)
    """Files of one day: ``{day}`` becomes the day (``YYYY-MM-DD``; ``{day:%Y/%m/%d}`` for
    another layout), then a glob (``logs/{day}/*.jsonl``); ``.gz`` files are read as gzip."""
    options: Any = Field(default_factory=dict)
    """The reader's options: given as a mapping, held as its options model (so that a field
    it marks operational stays out of a day's identity), checked when the config loads and
    filled in with its defaults: ``jsonl`` and ``parquet`` take ``fields`` (a JMESPath
    expression per normalised field, over one record); ``ubi`` the engine and its indexes
    (``hosts``, ``queries_index``, ``events_index``, ``events_path``, ``timeout_s``); ``otlp``
    none; a plugin's reader its own. ``source.fields`` and ``source.ubi``, where earlier
    configs put them, are read as these options."""
    hash_algorithm: str = "sha256"
    """How the service hashed a served text when it logs ``content_hash`` (a hashlib name;
    the hex digest, optionally prefixed ``<algorithm>:``)."""
    max_record_bytes: int = Field(default=1 << 20, ge=1)
    """A request whose texts (query, answer, documents, filters…) pass this many UTF-8 bytes
    is a bad record, never graded (a 50 MB query would plan millions of judge tokens); a log
    line longer than this is refused without being read whole."""
    timezone: str = "UTC"
    """The zone whose calendar day a day is (an IANA name): a request timestamped outside
    [day 00:00, next day 00:00) there is not that day's, and is counted and named, not read."""

    @model_validator(mode="before")
    @classmethod
    def _earlier_keys(cls, data: Any) -> Any:
        # Every stored day's config holds source.fields and source.ubi (defaults included):
        # each is read as the options of a format that takes it (its own name, or an option of
        # its model); a format that does not take it ignored it then, and still does.
        if not isinstance(data, Mapping) or not set(_EARLIER_KEYS) & set(data):
            return data
        data = dict(data)
        earlier = {k: data.pop(k) for k in _EARLIER_KEYS if k in data}
        fmt = data.get("format", "jsonl")
        if not isinstance(fmt, str) or fmt not in READERS.load().units:
            return data  # the format's own check names it
        taken = READERS.options[fmt].model_fields
        options: dict[str, Any] = {}
        for key, value in earlier.items():
            if isinstance(value, BaseModel):
                value = value.model_dump()
            if key == fmt and isinstance(value, Mapping):
                options.update(value)
            elif key in taken:
                options[key] = value
        if options:
            if data.get("options"):
                raise ValueError(
                    f"give the options of format '{fmt}' in source.options only, not also in "
                    f"source.{' and source.'.join(earlier)}"
                )
            data["options"] = options
        return data

    @field_validator("format")
    @classmethod
    def _registered(cls, name: str) -> str:
        return READERS.check(name)

    @field_validator("hash_algorithm")
    @classmethod
    def _known_hash(cls, name: str) -> str:
        if name not in hashlib.algorithms_available:
            raise ValueError(f"'{clip(name)}' is not a hashlib algorithm")
        return name

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, name: str) -> str:
        try:
            zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
            # No such zone, a folder of zones, an absolute path, a name too long for a file.
            raise ValueError(
                f"'{clip(name)}' is not a time zone (an IANA name: UTC, Europe/Berlin)"
            ) from None
        return name

    @model_validator(mode="after")
    def _reader_options(self) -> SourceOptions:
        if self.path is None and self.reader().needs_path:
            raise ValueError(f"format '{self.format}' reads files: set source.path")
        given = self.options
        if isinstance(given, BaseModel):
            given = given.model_dump()
        if not isinstance(given, Mapping):
            raise ValueError(f"options: a mapping of the reader's options, not {given!r:.40}")
        try:
            built = READERS.build_options(self.format, given)
        except ValueError as exc:
            raise ValueError(f"options: {exc}") from None
        object.__setattr__(self, "options", built)
        return self

    def reader(self) -> Any:
        """The registered reader of ``format`` (``ragaudit.audit.reader`` registers one)."""
        return READERS.get(self.format)


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
    max_bad_share: float = operational(0.05, ge=0.0, le=1.0)
    """The day fails when more than this share of its records does not map."""
    metrics: tuple[str, ...] = DEFAULT_METRICS
    """Answer metrics scored on every sampled request, with its served documents as contexts.
    Reference-free ones only (``ragaudit metrics``): traffic has no reference answer."""
    probe: int = operational(100, ge=0)
    """Queries of a series' first day searched again through the configured engine every day
    and graded through the store: when they move, the engine or the index moved, whatever the
    traffic did. 0: no probe."""
    judge_check_days: int = operational(7, ge=0)
    """Every this many days of a series, stored grades of its first day are asked again with
    the memo bypassed, to see whether the judge behind the model name changed. 0: never."""
    judge_check_size: int = operational(50, ge=2)
    """Stored grades a judge check asks again."""
    judge_check_kappa: float = operational(0.7, gt=0.0, le=1.0)
    """A judge check whose weighted κ against the stored grades is below this flags the judge."""
    content_share: float = operational(0.05, gt=0.0, le=1.0)
    """A segment whose share of graded documents rewritten since an earlier day reaches this
    has had its content changed."""
    min_change: dict[str, float] = operational(default_factory=lambda: dict(DEFAULT_MIN_CHANGE))
    """The smallest change of each metric worth an alarm (absolute, in the metric's units): a
    change beyond noise but smaller is listed as small and raises nothing. Keyed by metric
    name (``ndcg@10``), by its family at any depth (``ndcg@k``) or ``*`` for every other;
    given keys replace the defaults' (``ndcg@k`` 0.02, ``precision@k`` 0.02, ``relevant
    share`` 0.02, ``dcg@k`` 0.1, ``*`` 0.02), the rest stay; 0: every change beyond noise
    counts."""
    on_regression: Literal["fail", "name", "ignore"] = operational("name")
    """An alarm — a segment's move for the worse, beyond noise, at least ``min_change``, not the
    traffic's doing — after the ``ragaudit.audit.regression`` event: ``fail`` fails the flow
    run, ``name`` appends "-regressed" to its name, ``ignore`` does neither."""

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

    @field_validator("min_change", mode="before")
    @classmethod
    def _over_defaults(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        return {**DEFAULT_MIN_CHANGE, **{str(k).lower(): v for k, v in value.items()}}

    @field_validator("min_change")
    @classmethod
    def _non_negative(cls, value: dict[str, float]) -> dict[str, float]:
        bad = [f"{k}: {v}" for k, v in value.items() if not (v >= 0 and v != float("inf"))]
        if bad:
            raise ValueError(f"a minimum change is a finite number >= 0 ({clip(', '.join(bad))})")
        return value

    def min_change_of(self, metric: str) -> float:
        """The ``min_change`` of ``metric``: its own, its family's at any depth, else ``*``."""
        return min_change_of(self.min_change, metric)

    def sampling(self) -> SampleOptions:
        """The sampler's options of this section (its own fields, nothing else)."""
        return SampleOptions.model_validate(
            {name: getattr(self, name) for name in SampleOptions.model_fields}
        )


def min_change_of(table: Mapping[str, float], metric: str) -> float:
    """``metric``'s entry of a ``min_change`` table: its name, ``<family>@k``, else ``*``."""
    name = metric.lower()
    family = regex.sub(r"@\d+$", "@k", name)
    for key in (name, family, "*"):
        if key in table:
            return float(table[key])
    return 0.0


__all__ = [
    "DEFAULT_METRICS",
    "DEFAULT_MIN_CHANGE",
    "DEFAULT_PHONE_REGIONS",
    "REFERENCE_INPUTS",
    "AuditSection",
    "Bands",
    "RedactOptions",
    "RedactPattern",
    "SampleOptions",
    "SourceOptions",
    "min_change_of",
    "reference_free",
]
