"""Watching an audit day after day: its series, the probe, the content, the judge, the alarm.

:mod:`._drift` holds the statistics; this module reads and writes the audit's folders around a
finished day (:func:`watch_day`):

- the day's **identity** (what the audit kind measures of its config, and the grading prompt's
  version) is its series: days of one identity are compared; ``<audit>/series.parquet`` is
  rebuilt from every completed day's ``estimates.parquet``, each row under its day's series;
- the **probe**: on a series' first day, ``audit.probe`` of the day's drawn units are kept in
  ``<audit>/probe-<series>.parquet``; every day they are searched again through the configured
  engine, their top k graded through the judgment store (so a probe costs a call only for a
  document it has not seen), and their list metrics written to the day's ``probe.parquet``;
- the **content**: a served document whose id was graded on an earlier day of the series under
  another text counts as rewritten (``verdicts.parquet`` keeps each graded text's hash);
- the **judge**: every ``audit.judge_check_days`` days of a series, ``audit.judge_check_size``
  grades of its first day are asked again with the memo bypassed (:func:`judge_recheck`);
- the day against the day before and the trailing week (:func:`._drift.day_changes`, over the
  draws, each change split by cause by the traffic's own pairing, :mod:`._pairing`; the day's
  queries counted again from ``requests.parquet`` tell recurring ones from new, the verdicts'
  text hashes content from engine), each change attributed, written to ``changes.parquet``;
  an alarm (:func:`._drift.alarms`) gives the Prefect event the flow emits.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from ragaudit.atomic import write_table
from ragaudit.audit._drift import (
    OVERALL,
    SERIES_SCHEMA,
    Change,
    Evidence,
    JudgeCheck,
    alarms,
    attribute,
    change_rows,
    day_changes,
    judge_check,
    probe_changes,
    regressed,
    regression_event,
)
from ragaudit.audit._grade import grade_served
from ragaudit.audit._listmetrics import list_metrics, metric_names
from ragaudit.audit._pairing import DayDesign, ListValue
from ragaudit.audit._reading import served_of
from ragaudit.audit._sample import permanent_random, units_of_day
from ragaudit.audit._score import score_lists
from ragaudit.audit._served import REQUESTS, AuditDay, Served, audit_section
from ragaudit.audit._sessions import conversations, session_turns
from ragaudit.cache import Gateway, judge_recheck
from ragaudit.config import RunConfig
from ragaudit.directions import higher_is_better
from ragaudit.errors import RagauditError
from ragaudit.judging import Judge
from ragaudit.lang import detect_language
from ragaudit.prompts import RELEVANCE
from ragaudit.runfolder import AUDIT_DAY, RunsRoot, identity_of
from ragaudit.schemas import AUDIT_CHANGES, to_table
from ragaudit.stats import CONFIDENCE, z_quantile

SERIES = "series.parquet"
CHANGES = "changes.parquet"
PROBE = "probe.parquet"


def instrument_extra() -> dict[str, Any]:
    """What measures a day besides its config: the grading prompt's version.

    The rest of a day's identity is what the audit kind measures of its config
    (``ragaudit.runfolder.AUDIT_DAY.measures``: the judge and everything of it a grade depends
    on, the metrics, the relevant grade, the whole ``audit`` section but its operational
    fields), so two days are one series exactly when those are equal.
    """
    return {"grade_prompt": RELEVANCE.key}


def series_id(identity: str) -> str:
    """The short series id of a day's identity (``s2:`` and 16 hex digits)."""
    return "s2:" + identity.split(":", 1)[-1][:16]


def _days(root: Path) -> list[tuple[str, Path, dict[str, Any]]]:
    """Every completed day folder of an audit with its manifest, in day order.

    The manifest's ``series`` is the day's identity as this version computes it from its
    stored config (:meth:`ragaudit.runfolder.RunEntry.identity`), so a day written by an older
    version stays in its series whenever what it measured is unchanged.
    """
    out = []
    for entry in RunsRoot(root.parent).finished(kind=AUDIT_DAY.name, group=root.name):
        identity = entry.identity
        if identity is None:
            continue
        out.append((entry.name, entry.path, {**entry.manifest, "series": series_id(identity)}))
    return out


def _se(frame: pl.DataFrame) -> pl.Expr:
    """A row's standard error as the estimator gave it (``estimates.parquet``'s ``se``).

    Only a day written before ``se`` was stored falls back to its interval's half width over
    the normal quantile: that interval used t on the design's degrees of freedom, so the
    fallback overstates a small stratum's se a little.
    """
    if "se" in frame.columns:
        return pl.col("se")
    return (pl.col("ci_high") - pl.col("ci_low")) / (2 * z_quantile(1 - CONFIDENCE))


def build_series(root: Path, also: Sequence[tuple[str, Path, dict[str, Any]]] = ()) -> pl.DataFrame:
    """``series.parquet``'s rows from every completed day's estimates, each under its series.

    The days in ``also`` are added (a day being finished: its manifest is not written yet).
    """
    frames = []
    named = {d for d, _, _ in also}
    for day, folder, manifest in [*(x for x in _days(root) if x[0] not in named), *also]:
        try:
            est = pl.read_parquet(folder / "estimates.parquet")
        except OSError:
            continue
        frames.append(series_rows(manifest["series"], day, est))
    return pl.concat(frames) if frames else pl.DataFrame(schema=SERIES_SCHEMA)


def series_rows(series: str, day: str, est: pl.DataFrame) -> pl.DataFrame:
    """A day's rows of ``series.parquet`` from its estimates (``estimates.parquet``)."""
    return est.select(
        pl.lit(series).alias("series"),
        pl.lit(day).alias("day"),
        "segment",
        "metric",
        "estimate",
        _se(est).alias("se"),
        "ci_low",
        "ci_high",
        "n",
        "requests",
    ).cast(SERIES_SCHEMA)


def _design(config: RunConfig, day: str, folder: Path) -> DayDesign | None:
    """A finished day's draw, values, queries and graded documents (what a change is split by).

    The day's queries are counted again from its ``requests.parquet`` (only the query and
    segment columns are read; with ``audit.turn_strata`` each request's turn too, as the day's
    draw placed it, so a unit is the draw's); a day without it, or without its verdicts, is
    compared whole or without telling content from engine.
    """
    section = audit_section(config)
    try:
        sample = pl.read_parquet(folder / "sample.parquet")
        scores = pl.read_parquet(folder / "scores.parquet")
    except OSError:
        return None
    values = scores.select(
        pl.col("request_id").cast(pl.String),
        pl.col("unit").cast(pl.String),
        "metric",
        pl.col("value").cast(pl.Float64),
        "status",
    )
    units = verdicts = None
    try:
        traffic = pl.scan_parquet(folder / REQUESTS)
        if section.turn_strata:
            turns = session_turns(
                folder.parent, section, dt.date.fromisoformat(day), folder / REQUESTS
            )
            traffic = traffic.join(turns.lazy(), on="request_id", how="left")
        units = units_of_day(traffic, section.bands, section.turn_strata).select(
            "unit", "segment", "count"
        )
    except (OSError, pl.exceptions.PolarsError):
        units = None
    try:
        verdicts = pl.read_parquet(
            folder / "verdicts.parquet",
            columns=["request_id", "unit", "rank", "doc_id", "grade", "status", "text_hash"],
        )
    except (OSError, pl.exceptions.PolarsError):
        verdicts = None
    return DayDesign(sample, values, units, verdicts)


def list_values(k: int, relevant_grade: int) -> dict[str, ListValue]:
    """Each list metric's value of a served list from its grades (the content split's)."""

    def value_of(name: str) -> ListValue:
        return lambda grades: list_metrics(grades, k, relevant_grade)[name]

    return {name: value_of(name) for name in metric_names(k)}


def content_changes(days: Sequence[Path], today: Path) -> dict[str, float]:
    """Segment → the share of today's graded documents rewritten since an earlier day.

    A document is rewritten when an earlier day of the series graded its id under another text.
    """
    seen: dict[str, str] = {}
    for folder in days:
        try:
            frame = pl.read_parquet(folder / "verdicts.parquet", columns=["doc_id", "text_hash"])
        except (OSError, pl.exceptions.ColumnNotFoundError):
            continue
        for doc, digest in frame.drop_nulls().iter_rows():
            seen[doc] = digest
    try:
        now = pl.read_parquet(today / "verdicts.parquet")
        sample = pl.read_parquet(today / "sample.parquet", columns=["unit", "segment"]).unique()
    except OSError:
        return {}
    if "text_hash" not in now.columns:
        return {}
    rows = now.drop_nulls("text_hash").join(sample, on="unit", how="left")
    out: dict[str, list[int]] = {}
    for seg, doc, digest in rows.select("segment", "doc_id", "text_hash").iter_rows():
        before = seen.get(doc)
        tally = out.setdefault(seg or OVERALL, [0, 0])
        tally[0] += before is not None and before != digest
        tally[1] += 1
    return {s: c / n for s, (c, n) in out.items() if n}


@dataclass
class Watch:
    """What watching one day found."""

    series: str
    first_day: str
    changes: list[Change] = field(default_factory=list)
    judge: JudgeCheck | None = None
    probe: pl.DataFrame | None = None
    changed_docs: dict[str, float] = field(default_factory=dict)
    event: tuple[str, dict[str, str], dict[str, Any]] | None = None
    notes: list[str] = field(default_factory=list)

    day: str = ""

    @property
    def regressed(self) -> list[str]:
        """``segment/metric`` of every metric an alarm line names (``on_regression`` acts on)."""
        return regressed(alarms(self.changes, self.day))


def probe_set(root: Path, series: str, first_day: Path, size: int) -> pl.DataFrame | None:
    """The series' probe: ``size`` units of its first day's draw, kept for the series.

    The units with the smallest permanent random numbers under the salt "probe", written to
    ``<audit>/probe-<series>.parquet``.
    """
    path = root / f"probe-{series.replace(':', '-')}.parquet"
    if path.exists():
        return pl.read_parquet(path)
    try:
        sample = pl.read_parquet(first_day / "sample.parquet")
        requests = pl.read_parquet(
            first_day / "requests.parquet", columns=["request_id", "query", "filters"]
        )
    except OSError:
        return None
    # As many queries from each segment (the smallest permanent random numbers under the salt
    # "probe"): a segment's probe is as able to move as another's, whatever its traffic share.
    segments = sorted(set(sample["segment"].to_list()))
    per_segment = -(-size // max(len(segments), 1))
    chosen = (
        # A unit's first row is its representative request (several are graded of a unit
        # taken with certainty).
        sample.unique("unit", keep="first", maintain_order=True)
        .with_columns(
            pl.col("unit")
            .map_elements(lambda u: permanent_random("probe", u), return_dtype=pl.Float64)
            .alias("_u")
        )
        .sort("_u")
        .group_by("segment", maintain_order=True)
        .head(per_segment)
        .sort("_u")
        .head(size)
        .join(requests, on="request_id", how="left")
        .select("unit", "segment", "query", "filters")
    )
    write_table(chosen.to_arrow(), path)
    return chosen


async def run_probe(
    day: AuditDay, probe: pl.DataFrame, judge: Judge, gateway: Gateway
) -> pl.DataFrame:
    """The probe's queries searched through today's engine, graded, and their list metrics.

    The top k of each is graded through the store; returns ``probe``, ``segment``, ``metric``,
    ``value`` rows (also written to the day's ``probe.parquet``).
    """
    from ragaudit.search import ready_backend

    k = day.section.k

    async def embed(texts: list[str]) -> list[list[float]]:
        return await gateway.aembed(texts, model=day.config.models.embedder_model)

    backend = ready_backend(day.config, embed=embed)
    served = []
    for unit, segment, query, filters in probe.iter_rows():
        hits = await backend.search(query, filters=json.loads(filters or "{}"), top_n=k)
        served.append(
            Served(
                request_id=f"probe:{unit}",
                unit=unit,
                segment=segment,
                query=query,
                language=detect_language(query),
                answer=None,
                citations=None,
                docs=[
                    {"rank": i, "id": h.id, "text": h.text, "changed": False}
                    for i, h in enumerate(hits[:k], start=1)
                ],
            )
        )
    probe_day = AuditDay(day.config, day.day, day.folder, None, probe, served=served)
    await grade_served(probe_day, judge, gateway, f"audit-probe:{day.section.name}")
    score_lists(probe_day)
    day.grading.from_store += probe_day.grading.from_store
    day.grading.paid += probe_day.grading.paid
    day.grading.from_memo += probe_day.grading.from_memo
    frame = pl.DataFrame(
        [
            {
                "probe": r["unit"],
                "segment": r["segment"],
                "metric": r["metric"],
                "value": r["value"],
            }
            for r in probe_day.scores
            if r["status"] == "ok"
        ],
        schema={"probe": pl.String, "segment": pl.String, "metric": pl.String, "value": pl.Float64},
    )
    write_table(frame.to_arrow(), day.folder / PROBE)
    return frame


async def recheck_judge(
    day: AuditDay, first_day: Path, judge: Judge, gateway: Gateway
) -> JudgeCheck | None:
    """``audit.judge_check_size`` of the series' first day's grades asked again, memo bypassed."""
    section = day.section
    try:
        verdicts = pl.read_parquet(first_day / "verdicts.parquet")
        requests = pl.read_parquet(first_day / "requests.parquet")
    except OSError:
        return None
    ok = verdicts.filter(pl.col("status") == "ok").with_columns(
        pl.struct("request_id", "rank")
        .map_elements(
            lambda r: permanent_random("judge-check", f"{r['request_id']}#{r['rank']}"),
            return_dtype=pl.Float64,
        )
        .alias("_u")
    )
    chosen = ok.sort("_u").head(section.judge_check_size)
    by_id = {r["request_id"]: r for r in requests.iter_rows(named=True)}
    # A follow-up asked again as its first grade was asked: with its session's earlier turns
    # (a bare follow-up would be graded otherwise, and the judge called drifted for it).
    talks = conversations(
        first_day.parent,
        section,
        dt.date.fromisoformat(first_day.name),
        first_day / "requests.parquet",
        chosen["request_id"].unique().to_list(),
    )
    served, stored = [], []
    for row in chosen.iter_rows(named=True):
        req = by_id.get(row["request_id"])
        doc = next((d for d in (req or {}).get("docs") or [] if d.get("rank") == row["rank"]), None)
        if req is None or doc is None or not doc.get("text"):
            continue
        # The first grade's request, asked of its one document alone under the check's id.
        one = served_of(req, talks.get(row["request_id"]), 0)
        served.append(
            dataclasses.replace(
                one,
                request_id=f"check:{row['request_id']}#{row['rank']}",
                unit=row["unit"],
                answer=None,
                citations=None,
                docs=[{"rank": 1, "id": doc["id"], "text": doc["text"], "changed": False}],
                history_incomplete=False,
            )
        )
        stored.append(int(row["grade"]))
    check_day = AuditDay(day.config, day.day, day.folder, None, pl.DataFrame(), served=served)
    # Asked again under the check's tag: neither the store nor the memo answers.
    with judge_recheck(f"audit-check:{day.day.isoformat()}"):
        await grade_served(check_day, judge, gateway, f"audit-check:{section.name}", store=False)
    asked = {v["request_id"]: v["grade"] for v in check_day.verdicts}
    pairs = [
        (g, asked[s.request_id])
        for s, g in zip(served, stored, strict=True)
        if asked.get(s.request_id) is not None
    ]
    return judge_check(
        [a for a, _ in pairs], [b for _, b in pairs], bound=section.judge_check_kappa
    )


def _index(days: Sequence[tuple[str, Path, dict[str, Any]]], series: str) -> list[tuple[str, Path]]:
    return [(d, f) for d, f, m in days if m.get("series") == series]


async def watch_day(day: AuditDay, judge: Judge, gateway: Gateway) -> Watch:
    """The finished ``day``'s evidence: the probe run, the judge check, rewritten content."""
    section = day.section
    root = day.folder.parent
    series = day_series(day.config)
    name = day.day.isoformat()
    days = [(d, f, m) for d, f, m in _days(root) if d != name]
    mine = [(d, f) for d, f in _index(days, series) if d < name]
    first_day = mine[0][1] if mine else day.folder
    watch = Watch(series=series, first_day=first_day.name, day=name)
    if any(m.get("series") != series for d, _, m in days if d < name) and not mine:
        watch.notes.append(
            "a new series starts today: the judge, prompts, metrics or sampling differ from "
            "the days before, which are not compared with it"
        )
    if section.probe:
        probe = probe_set(root, series, first_day, section.probe)
        if probe is not None and not probe.is_empty():
            try:
                watch.probe = await run_probe(day, probe, judge, gateway)
            except RagauditError as exc:
                # The day's own estimates stand without the probe; what it could not tell (an
                # engine's move) is said on the console and in the manifest, every day.
                watch.notes.append(
                    f"probe not run ({exc}): a move cannot be told from the engine's; set "
                    "collect: to the service's engine, or audit.probe: 0"
                )
    if section.judge_check_days and mine and len(mine) % section.judge_check_days == 0:
        watch.judge = await recheck_judge(day, first_day, judge, gateway)
    watch.changed_docs = content_changes([f for _, f in mine], day.folder)
    return watch


def day_series(config: RunConfig) -> str:
    """The series id of a config's audit days (the audit kind's identity, shortened)."""
    return series_id(identity_of(config, AUDIT_DAY.name, instrument_extra()))


def compare_day(day: AuditDay, watch: Watch) -> Watch:
    """The day's changes against its series, split by cause, attributed; the alarm's event.

    Writes ``series.parquet`` (every series of the audit) and the day's ``changes.parquet``
    (schema ``AUDIT_CHANGES``: every change and its parts).
    """
    root = day.folder.parent
    name = day.day.isoformat()
    today = (name, day.folder, {"series": watch.series})
    series_all = build_series(root, also=[today]).sort("day", "segment", "metric")
    write_table(series_all.to_arrow(), root / SERIES)
    mine = series_all.filter(pl.col("series") == watch.series)
    folders = {**dict(_index(_days(root), watch.series)), name: day.folder}
    section = day.section
    designs = {d: des for d, f in folders.items() if (des := _design(day.config, d, f)) is not None}
    better = {m: higher_is_better(m) for m in set(mine["metric"].to_list())}
    # Every test of the day runs at the config's α: the changes, their parts, the probe's.
    alpha = day.config.report.alpha
    changes = day_changes(
        mine,
        name,
        alpha=alpha,
        higher_is_better=better,
        designs=designs,
        min_change=section.min_change_of,
        list_values=list_values(section.k, day.config.sort.relevant_grade),
    )
    evidence: dict[str, Evidence] = {}
    out = []
    for c in changes:
        ref = c.reference_days[0]
        if ref not in evidence:
            probes = {}
            ref_probe = folders.get(ref, Path()) / PROBE
            if watch.probe is not None and ref_probe.exists():
                probes = {
                    (p.segment, p.metric): p
                    for p in probe_changes(watch.probe, pl.read_parquet(ref_probe), alpha=alpha)
                }
            evidence[ref] = Evidence(
                probe=probes,
                changed_docs=watch.changed_docs,
                judge=watch.judge,
                content_share=section.content_share,
            )
        out.append(attribute(c, evidence[ref]))
    watch.changes = out
    write_table(to_table(change_rows(out), AUDIT_CHANGES), day.folder / CHANGES)
    watch.event = regression_event(section.name, name, str(day.folder.resolve()), out)
    return watch


__all__ = [
    "CHANGES",
    "PROBE",
    "SERIES",
    "Watch",
    "build_series",
    "compare_day",
    "content_changes",
    "day_series",
    "instrument_extra",
    "list_values",
    "series_id",
    "probe_set",
    "recheck_judge",
    "run_probe",
    "watch_day",
]
