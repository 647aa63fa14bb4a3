"""One audit day end to end as a library call: read, sample, grade, score, estimate, write.

Explicit arguments (a config, a day, a gateway), no Prefect: the ``audit`` flow, the CLI's dry
run and the bench call these functions. The day's folder is a run of the audit kind
(``ragaudit.runfolder.FolderRun``, ADR 22).

Nothing is paid twice. A served document's grade is looked up in the judgment store first (a
query and text graded by a tune, a run or an earlier day is reused) and each batch of new grades
is written to the store before the next is asked; the answer metrics go through the gateway's
memo. So a crashed day re-run pays only what it had not yet been answered, and a finished day
re-run pays nothing.
"""

from __future__ import annotations

import datetime as dt
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl

from ragaudit.atomic import write_table
from ragaudit.audit._drift import change_rows
from ragaudit.audit._dryrun import dry_run_day
from ragaudit.audit._estimate import estimate, estimate_turns
from ragaudit.audit._grade import grade_served
from ragaudit.audit._labels import ITEMS, people_values, write_label_items
from ragaudit.audit._moves import Move, moves
from ragaudit.audit._reading import (
    draw,
    fetch_missing_texts,
    judge_of,
    read_traffic,
    sampled_rows,
    sampled_served,
)
from ragaudit.audit._score import score_answers, score_lists, values_frame
from ragaudit.audit._served import (
    ESTIMATES,
    MANIFEST,
    REPORT,
    REQUESTS,
    SAMPLE,
    SCORES,
    TURN_ESTIMATES,
    VERDICTS,
    AuditDay,
    audit_dir,
    audit_section,
    conversation_counts,
    read_summary,
)
from ragaudit.audit._watch import (
    CHANGES,
    compare_day,
    day_series,
    instrument_extra,
    series_id,
    watch_day,
)
from ragaudit.cache import Gateway
from ragaudit.config import RunConfig
from ragaudit.conversation import history_cut
from ragaudit.errors import ConfigError, NoTraffic, RagauditError
from ragaudit.runfolder import AUDIT_DAY, FolderRun, RunsRoot, identity_of, stored_config
from ragaudit.schemas import (
    AUDIT_ESTIMATES,
    AUDIT_SAMPLE,
    AUDIT_SCORES,
    AUDIT_TURN_ESTIMATES,
    AUDIT_VERDICTS,
    to_table,
)


async def run_audit_day(
    config: RunConfig,
    day: dt.date,
    *,
    dry_run: bool = False,
    gateway: Gateway | None = None,
) -> AuditDay:
    """Audit one day: read, sample, grade (store first), score, estimate, write its folder.

    The day's folder is a run of the audit kind (``ragaudit.runfolder.FolderRun``): claimed,
    locked for the whole day (a second process is refused before it pays anything), its
    manifest ``running`` until the end, ``interrupted`` or ``failed`` when it stops early. A
    day with nothing to read ends ``no_data`` (not done: its logs may still arrive).

    With ``dry_run`` nothing is called and nothing is written under the runs root: the day is
    read into a temporary folder, sampled, and the grading and scoring counted from their own
    plans (``AuditDay.plan``).

    Raises:
        ConfigError: No audit section, a metric that cannot be built, or a day already audited
            under another series.
        RunLocked: Another process is auditing the day.
        InputError: The day's bad records pass ``audit.max_bad_share`` (from the reader).
    """
    section = audit_section(config)
    if dry_run:
        with tempfile.TemporaryDirectory(prefix="ragaudit-audit-") as tmp:
            return await dry_run_day(config, day, Path(tmp))
    if gateway is None:
        raise RagauditError("run_audit_day: a gateway is needed unless dry_run")
    folder = check_day(config, day)
    series = day_series(config)
    started = time.perf_counter()
    manifest: dict[str, Any] = {
        "audit": section.name,
        "day": day.isoformat(),
        "judge": config.models.judge_model,
        "series": series,
    }
    with FolderRun(
        folder, AUDIT_DAY.name, config, manifest=manifest, identity_extra=instrument_extra()
    ) as run:
        try:
            read = read_traffic(section, day, folder / REQUESTS)
        except NoTraffic as exc:
            out = AuditDay(config, day, folder, None, pl.DataFrame(), no_data=str(exc))
            run.finish("no_data", error=str(exc), seconds=_since(started))
            return out
        if not read.records:
            why = f"no request in the day's logs ({read.bad} records did not map)"
            out = AuditDay(config, day, folder, read, pl.DataFrame(), no_data=why)
            run.finish("no_data", error=why, read=read_summary(read), seconds=_since(started))
            return out
        judge = judge_of(config, gateway)
        sample, strata = draw(
            section, folder.parent, config.conversation, day, folder / REQUESTS, judge
        )
        write_table(to_table(sample.to_dicts(), AUDIT_SAMPLE), folder / SAMPLE)
        out = AuditDay(config, day, folder, read, sample, strata=strata)
        rows = await fetch_missing_texts(config, sampled_rows(folder / REQUESTS, sample))
        # A follow-up with its session's earlier turns (the day's, and the days before's).
        out.served = sampled_served(section, folder.parent, day, folder / REQUESTS, rows, sample)
        source = f"audit:{section.name}:{day.isoformat()}"
        await grade_served(out, judge, gateway, source)
        write_table(to_table(out.verdicts, AUDIT_VERDICTS), folder / VERDICTS)
        score_lists(out)
        await score_answers(out, judge, gateway, source)
        write_table(to_table(out.scores, AUDIT_SCORES), folder / SCORES)
        # People's labels given since the day was first audited fill the PPI columns: a re-run
        # of the day pays nothing and reads them again. A turn's items are keyed, and shown,
        # as its judge saw it: with its session's earlier turns.
        turns = {
            s.request_id: (
                s.question(),
                history_cut(s.question(), config.conversation, judge.model, judge.budget),
            )
            for s in out.served
            if s.history
        }
        write_label_items(folder, out.served, section.metrics, section.name, turns)
        people = people_values(folder, section.k, config.sort.relevant_grade)
        out.estimates = estimate(values_frame(out.scores), sample, labels=people)
        write_table(to_table(out.estimates.to_dicts(), AUDIT_ESTIMATES), folder / ESTIMATES)
        out.turn_estimates = estimate_turns(values_frame(out.scores), sample, labels=people)
        write_table(
            to_table(out.turn_estimates.to_dicts(), AUDIT_TURN_ESTIMATES), folder / TURN_ESTIMATES
        )
        from ragaudit.audit._report import write_report

        # The day against its series: the probe and the judge check are graded through the
        # store and the memo like the day's own grades, so a resumed day pays for neither twice.
        out.watch = compare_day(out, await watch_day(out, judge, gateway))
        write_report(out)
        run.finish(
            day_status(out),
            seconds=_since(started),
            read=read_summary(read),
            sampled=len(out.served),
            conversations=conversation_counts(out.served),
            grading=vars(out.grading),
            llm=out.calls,
            failed_rows=failed_rows(out),
            tables=[
                REQUESTS,
                SAMPLE,
                VERDICTS,
                SCORES,
                ITEMS,
                ESTIMATES,
                TURN_ESTIMATES,
                CHANGES,
                REPORT,
            ],
            regressed=out.watch.regressed,
            watch_notes=out.watch.notes,
            judge_check=None if out.watch.judge is None else vars(out.watch.judge),
        )
    return out


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 3)


def check_day(config: RunConfig, day: dt.date) -> Path:
    """The day's folder, when this config may audit it; refused when another series holds it.

    A day holds one series: auditing it again under a config that measures differently (a
    new sample size, another judge) would overwrite the day of the first series, whose next
    day would then silently compare with the day before. Refused before anything is read or
    paid, saying how to keep both.

    Raises:
        ConfigError: The day was audited under another series.
    """
    folder = audit_dir(config, day)
    then = stored_config(folder) if (folder / MANIFEST).is_file() else None
    if then is not None and then.audit is not None:
        before = RunsRoot(config.runs_root).entry(folder, AUDIT_DAY.name).identity
        now = identity_of_day(config)
        if before is not None and before != now:
            raise ConfigError(
                f"audit {audit_section(config).name} {day.isoformat()}: the day was audited "
                f"under another series ({series_id(before)}; this config measures "
                f"{day_series(config)}: the judge, metrics, sampling or mapping differ); a day "
                "holds one series: audit the new series under another audit.name, or delete "
                f"{folder} to replace the day"
            )
    return folder


def check_days(
    config: RunConfig, days: list[dt.date]
) -> tuple[list[tuple[dt.date, Path]], list[tuple[dt.date, str]]]:
    """A backfill's days: those to audit with their folders, those refused with why.

    One refused day does not stop the others: a backfill names it at the end.
    """
    todo: list[tuple[dt.date, Path]] = []
    refused: list[tuple[dt.date, str]] = []
    for day in days:
        try:
            todo.append((day, check_day(config, day)))
        except RagauditError as exc:
            refused.append((day, str(exc)))
    return todo, refused


async def planned_cost(config: RunConfig, days: list[dt.date]) -> tuple[int, int]:
    """Paid judge calls and prompt tokens the days would cost, counted by their dry runs.

    A day whose dry run fails is left out: auditing it fails the same way, and says why there.
    """
    calls = tokens = 0
    for day in days:
        try:
            plan = (await run_audit_day(config, day, dry_run=True)).plan
        except RagauditError:
            continue
        assert plan is not None
        calls += plan.grade_calls + round(sum(plan.metric_calls.values()))
        tokens += plan.judge_tokens
    return calls, tokens


def identity_of_day(config: RunConfig) -> str:
    """The identity a day audited under ``config`` gets (its series' full hash)."""
    return identity_of(config, AUDIT_DAY.name, instrument_extra())


def failed_rows(day: AuditDay) -> int:
    """Grades and answer scores that failed (list metrics follow their grades: not counted)."""
    answers = set(day.section.metrics)
    return day.grading.failed + sum(
        r["status"] == "failed" for r in day.scores if r["metric"] in answers
    )


def day_status(day: AuditDay) -> str:
    """``completed``, or ``completed_with_failures`` when most judged rows failed (a run's rule)."""
    answers = set(day.section.metrics)
    judged = (
        day.grading.paid
        + day.grading.from_memo
        + day.grading.failed
        + sum(r["status"] != "skipped" for r in day.scores if r["metric"] in answers)
    )
    return "completed_with_failures" if judged and 2 * failed_rows(day) > judged else "completed"


def day_done(config: RunConfig, day: dt.date) -> bool:
    """Whether ``day`` was audited to the end under this config's series (a backfill skips it).

    Only ``completed``: a day whose judge calls mostly failed (an outage), that had no traffic
    yet, or that was interrupted is redone, paying only for what it had not yet answered.
    """
    folder = audit_dir(config, day)
    if not (folder / MANIFEST).is_file():
        return False
    entry = RunsRoot(config.runs_root).entry(folder, AUDIT_DAY.name)
    return entry.state.status == "completed" and entry.identity == identity_of_day(config)


def previous_day(now: dt.datetime | None = None) -> dt.date:
    """Yesterday in UTC: the partition a daily audit reads (a day's logs are complete then)."""
    return ((now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC) - dt.timedelta(days=1)).date()


def day_moves(day: AuditDay) -> list[Move]:
    """The day's moves as lines, one per (segment, cause), alarms first (:mod:`._moves`)."""
    if day.watch is None:
        return []
    return moves(change_rows(day.watch.changes), day.day.isoformat())


def summary(day: AuditDay) -> dict[str, Any]:
    """What the flow returns and the CLI prints: counts, calls, the overall estimates."""
    overall = []
    if day.estimates is not None and not day.estimates.is_empty():
        overall = day.estimates.filter(pl.col("segment") == "(all)").to_dicts()
    return {
        "audit": day.section.name,
        "day": day.day.isoformat(),
        "folder": str(day.folder),
        "read": read_summary(day.read),
        "sampled": len(day.served),
        "conversations": conversation_counts(day.served),
        "grading": vars(day.grading),
        "llm": dict(day.calls),
        "status": "no_data" if day.no_data else day_status(day),
        "no_data": day.no_data,
        "failed_rows": failed_rows(day),
        "overall": overall,
        "regressed": [] if day.watch is None else day.watch.regressed,
        "moves": [] if day.watch is None else [m.to_dict() for m in day_moves(day)],
        "notes": [] if day.watch is None else list(day.watch.notes),
        "event": None if day.watch is None else day.watch.event,
    }


__all__ = [
    "check_day",
    "check_days",
    "day_done",
    "day_moves",
    "day_status",
    "failed_rows",
    "identity_of_day",
    "planned_cost",
    "previous_day",
    "run_audit_day",
    "summary",
]
