"""One audit day end to end as a library call: read, sample, grade, score, estimate, write.

Explicit arguments (a config, a day, a gateway), no Prefect: the ``audit`` flow, the CLI's dry
run and the bench call these functions.

Nothing is paid twice. A served document's grade is looked up in the judgment store first (a
query and text graded by a tune, a run or an earlier day is reused) and each batch of new grades
is written to the store before the next is asked; the answer metrics go through the gateway's
memo. So a crashed day re-run pays only what it had not yet been answered, and a finished day
re-run pays nothing.
"""

from __future__ import annotations

import datetime as dt
import inspect
import json
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from ragaudit.atomic import write_table
from ragaudit.audit._config import AuditSection, audit_section
from ragaudit.audit._content import resolve_texts
from ragaudit.audit._estimate import estimate
from ragaudit.audit._listmetrics import list_metrics
from ragaudit.audit._sample import draw_sample, strata_table
from ragaudit.audit._source import ReadReport, read_day
from ragaudit.audit._watch import (
    CHANGES,
    compare_day,
    day_series,
    instrument_extra,
    series_id,
    watch_day,
)
from ragaudit.cache import Gateway, items_in_flight
from ragaudit.config import RunConfig
from ragaudit.dataset import Question
from ragaudit.errors import ConfigError, InputError, NoTraffic, RagauditError
from ragaudit.judging import (
    Judge,
    JudgmentStore,
    grade_plan,
    grade_through_store,
    lookup_pairs,
    pair_key,
    plan_grades,
    prompt_tokens,
    sample_judges,
    text_hash,
)
from ragaudit.lang import detect_language
from ragaudit.metrics import Sample, resolve
from ragaudit.runfolder import AUDIT_DAY, FolderRun, RunsRoot, identity_of, stored_config
from ragaudit.schemas import (
    AUDIT_ESTIMATES,
    AUDIT_SAMPLE,
    AUDIT_SCORES,
    AUDIT_VERDICTS,
    to_table,
)
from ragaudit.scoring import make_deps, make_panel, score_rows
from ragaudit.secrets import redact

# The judgment store: its one import here (it is moving to ``ragaudit.judging``).

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


@dataclass
class DryRun:
    """What a day would ask, counted from the algorithms' own plans, no call made."""

    pairs: int = 0
    """Served (request, document) pairs to grade in the top k."""
    in_store: int = 0
    grade_calls: int = 0
    grade_tokens: int = 0
    metric_calls: dict[str, float] = field(default_factory=dict)
    metric_tokens: dict[str, float] = field(default_factory=dict)

    @property
    def judge_tokens(self) -> int:
        """Prompt tokens of every judge call the day would make."""
        return self.grade_tokens + round(sum(self.metric_tokens.values()))


# -- reading and sampling ------------------------------------------------------------------


def _read(config: RunConfig, day: dt.date, out: Path) -> ReadReport:
    section = audit_section(config)
    return read_day(
        section.source,
        section.redact,
        day,
        # No segment expression: a literal null, so every request is in "(none)".
        segment=section.segment or "`null`",
        out=out,
        max_bad_share=section.max_bad_share,
    )


def _doc_rows(docs: Sequence[Mapping[str, Any]] | None, k: int) -> list[dict[str, Any]]:
    ordered = sorted(docs or [], key=lambda d: d.get("rank") or 0)
    return [
        {
            "rank": int(d.get("rank") or i),
            "id": str(d.get("id") or ""),
            "text": d.get("text"),
            "changed": bool(d.get("changed") or False),
        }
        for i, d in enumerate(ordered[:k], start=1)
    ]


def sampled_rows(requests: Path, sample: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``requests.parquet`` the sample drew (read lazily: only those)."""
    ids = sample["request_id"].to_list()
    return pl.scan_parquet(requests).filter(pl.col("request_id").is_in(ids)).collect()


async def fetch_missing_texts(config: RunConfig, rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` with the texts of documents logged by id only fetched from the backend.

    Only the sampled requests are read, so the fetch is bounded by the sample. A backend that
    cannot fetch by id leaves those documents without text: they are skipped, saying why.
    Where the log carries a content hash, a text that changed since it was served is flagged
    and kept out of grading (``resolve_texts``).
    """
    docs = rows["docs"].to_list() if rows.height else []
    if not any(d["text"] is None for ds in docs for d in ds or ()):
        return rows
    from ragaudit.search import FetchingBackend, make_search_backend

    section = audit_section(config)
    backend = make_search_backend(config)
    try:
        if not isinstance(backend, FetchingBackend):
            return rows
        return await resolve_texts(
            rows,
            backend.fetch_texts,
            redact=section.redact,
            hash_algorithm=section.source.hash_algorithm,
        )
    finally:
        # An engine's async client belongs to this loop: ``aclose`` closes it (and the sync one).
        close = getattr(backend, "aclose", None) or getattr(backend, "close", None)
        if close is not None:
            done = close()
            if inspect.isawaitable(done):
                await done


def served_requests(rows: pl.DataFrame, sample: pl.DataFrame, k: int) -> list[Served]:
    """The sampled requests with their top ``k`` served documents, in the sample's order."""
    by_id = {r["request_id"]: r for r in rows.iter_rows(named=True)}
    out = []
    for unit_row in sample.iter_rows(named=True):
        r = by_id.get(unit_row["request_id"])
        if r is None:
            continue
        out.append(
            Served(
                request_id=r["request_id"],
                unit=unit_row["unit"],
                segment=unit_row["segment"],
                query=r["query"],
                language=detect_language(r["query"]),
                answer=r.get("answer"),
                citations=r.get("citations"),
                docs=_doc_rows(r.get("docs"), k),
            )
        )
    return out


def _tokens_per_request(config: RunConfig, requests: Path, judge: Judge, k: int) -> float:
    """Mean judge prompt tokens of grading one request's top k (what a budget draws against).

    Measured on the day's first 200 requests with the grading prompt as it is sent.
    """
    head = pl.scan_parquet(requests).head(200).collect()
    totals = []
    for r in head.iter_rows(named=True):
        q = Question(question_id=r["request_id"], question=r["query"])
        totals.append(
            sum(prompt_tokens(judge, q, d["text"]) for d in _doc_rows(r["docs"], k) if d["text"])
        )
    return sum(totals) / len(totals) if totals else 0.0


def _draw(config: RunConfig, requests: Path, judge: Judge) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The day's sample and every stratum of the day, drawn from or not."""
    section = audit_section(config)
    per = (
        _tokens_per_request(config, requests, judge, section.k)
        if section.max_judge_tokens is not None
        else None
    )
    day = pl.scan_parquet(requests)
    opts = section.sampling()
    return (
        draw_sample(day, opts, salt=section.name, tokens_per_request=per),
        strata_table(day, opts, salt=section.name, tokens_per_request=per),
    )


# -- grading ------------------------------------------------------------------------------


def _skip_reason(doc: Mapping[str, Any]) -> str | None:
    if doc["changed"]:
        return "the document's text changed since it was served: not graded against the new one"
    if not doc["text"] or not str(doc["text"]).strip():
        return "no text: the log carries only the id and the backend had none for it"
    return None


def _verdict(day: AuditDay, s: Served, doc: Mapping[str, Any], **values: Any) -> dict[str, Any]:
    return {
        "audit": day.section.name,
        "day": day.day.isoformat(),
        "request_id": s.request_id,
        "unit": s.unit,
        "rank": doc["rank"],
        "doc_id": doc["id"],
        "changed": doc["changed"],
        "text_hash": text_hash(doc["text"]) if doc["text"] else None,
        **values,
    }


def _pairs(
    served: Sequence[Served],
) -> tuple[dict[str, Question], dict[str, list[dict[str, str]]]]:
    """The sampled requests as questions and their gradable served documents as candidates.

    A document's id in the grading is its rank (``r<rank>``): two documents of one request never
    share one, whatever the log's ids; the store's grading fans one grade out to every served
    pair of the same query and text.
    """
    questions: dict[str, Question] = {}
    candidates: dict[str, list[dict[str, str]]] = {}
    for s in served:
        docs = [d for d in s.docs if _skip_reason(d) is None]
        if docs:
            questions[s.request_id] = s.question()
            candidates[s.request_id] = [
                {"context_id": f"r{d['rank']}", "text": d["text"]} for d in docs
            ]
    return questions, candidates


async def grade_served(
    day: AuditDay, judge: Judge, gateway: Gateway, source: str, *, store: bool = True
) -> None:
    """Grade the served top-k of every sampled request: the store first, then the judge.

    Through :func:`ragaudit.judging.grade_through_store`, the one way a grade goes through the
    store: one grade per (query, text), a text served to several requests of one query asked
    once, the store's lock held per batch from the look-up to the append (a second process pays
    none of the same grades). Each grade says where it came from: ``store`` (held before),
    ``memo`` (asked now, the memo answered) or ``paid``. With ``store`` False the store is
    neither read nor written (a judge check re-asks stored grades).
    """
    questions, candidates = _pairs(day.served)
    kept = judgment_store(day.config) if store else None
    with gateway.scope("audit-grade", run_id=source, calls_dir=day.folder / "llm_calls") as c:
        got = await grade_through_store(judge, questions, candidates, kept, source=source)
    _add(day.calls, c)
    for s in day.served:
        graded = got.graded.get(s.request_id)
        rows = {r["context_id"]: r for r in graded.rows} if graded is not None else {}
        for doc in s.docs:
            day.grading.pairs += 1
            why = _skip_reason(doc)
            if why is not None:
                day.verdicts.append(
                    _verdict(day, s, doc, grade=None, status="skipped", reason=why, source=None)
                )
                day.grading.skipped += 1
                continue
            cid = f"r{doc['rank']}"
            row = rows[cid]
            ok = row["grade"] is not None
            how = got.how[(s.request_id, cid)] if ok else None
            day.verdicts.append(
                _verdict(
                    day,
                    s,
                    doc,
                    grade=int(row["grade"]) if ok else None,
                    status="ok" if ok else "failed",
                    reason=(row.get("reason") or "") if ok else redact(str(row.get("error"))),
                    source=how,
                )
            )
            if not ok:
                day.grading.failed += 1
            elif how == "store":
                day.grading.from_store += 1
            elif how == "memo":
                day.grading.from_memo += 1
            else:
                day.grading.paid += 1


def _add(total: dict[str, int], counts: Any) -> None:
    for name, value in counts.as_dict().items():
        total[name] = total.get(name, 0) + value


# -- scoring ------------------------------------------------------------------------------


def _citations(text: str | None) -> tuple[list[str] | None, list[list[str]] | None]:
    """The log's citations: a list of ids (marker n → the n-th) or one list per sentence."""
    if not text:
        return None, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None, None
    if isinstance(value, list) and value and all(isinstance(v, list) for v in value):
        return None, [[str(x) for x in v] for v in value]
    if isinstance(value, list) and value:
        return [str(v) for v in value], None
    return None, None


def samples_of(served: Sequence[Served]) -> tuple[list[Sample], dict[str, str]]:
    """The sampled requests as metric samples, the graded documents as contexts.

    A document whose text changed since it was served, or that has no text, is left out of the
    contexts: the answer was written from what was served, which is then unknown.
    """
    out, no_answer = [], {}
    for s in served:
        docs = [d for d in s.docs if _skip_reason(d) is None]
        ids, per_sentence = _citations(s.citations)
        if not (s.answer or "").strip():
            no_answer[s.request_id] = "no answer in the log for this request"
        out.append(
            Sample(
                question_id=s.request_id,
                question=s.query,
                language=s.language,
                response=s.answer,
                reference=None,
                contexts=[d["text"] for d in docs],
                context_ids=[d["id"] for d in docs],
                reference_contexts=None,
                reference_context_ids=None,
                citation_ids=ids,
                citations=per_sentence,
            )
        )
    return out, no_answer


async def score_answers(day: AuditDay, judge: Judge, gateway: Gateway, run_id: str) -> None:
    """Score every sampled request's answer with the audit's metrics (scoring.py, the memo)."""
    config = day.config
    samples, no_answer = samples_of(day.served)
    place = {s.request_id: s for s in day.served}
    deps = make_deps(config, judge)
    for name in day.section.metrics:
        try:
            m = resolve(name, config.score.model_dump())
        except (KeyError, ValueError) as exc:
            raise ConfigError(f"audit.metrics: {exc.args[0]}") from None
        with gateway.scope(
            f"audit-score:{name}", run_id=run_id, calls_dir=day.folder / "llm_calls"
        ) as c:
            rows = await score_rows(
                m,
                samples,
                deps,
                window=judge.window or 0,
                no_answer=no_answer,
                limit=items_in_flight(config),
                panel=make_panel(config, judge, name),
            )
        _add(day.calls, c)
        for row in rows:
            s = place[row.pop("question_id")]
            day.scores.append(_score_row(day, s, row))


def _score_row(day: AuditDay, s: Served, row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "audit": day.section.name,
        "day": day.day.isoformat(),
        "request_id": s.request_id,
        "unit": s.unit,
        "segment": s.segment,
        **row,
    }


def score_lists(day: AuditDay) -> None:
    """The served list's metrics of every sampled request, from its grades (no call)."""
    k = day.section.k
    relevant = day.config.sort.relevant_grade
    grades: dict[str, dict[int, dict[str, Any]]] = {}
    for v in day.verdicts:
        grades.setdefault(v["request_id"], {})[v["rank"]] = v
    for s in day.served:
        got = grades.get(s.request_id, {})
        ranked = [got[d["rank"]] for d in s.docs]
        missing = [v for v in ranked if v["status"] != "ok"]
        values = list_metrics([v["grade"] for v in ranked], k, relevant)
        for metric, value in values.items():
            if value is not None:
                status, error = "ok", None
            elif not ranked:
                status, error = "skipped", "nothing was served"
            elif missing:
                first = missing[0]
                status = "failed" if first["status"] == "failed" else "skipped"
                error = f"rank {first['rank']} has no grade: {first['reason']}"
            else:
                status, error = "skipped", "undefined for this list (every grade 0)"
            day.scores.append(
                _score_row(
                    day,
                    s,
                    {
                        "metric": metric,
                        "value": value,
                        "status": status,
                        "error": error,
                        "k_used": len(ranked),
                        "metric_args": json.dumps({"k": k, "relevant_grade": relevant}),
                    },
                )
            )


def values_frame(scores: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """Graded request × metric × value with status: what the estimator reads."""
    return pl.DataFrame(
        [
            {
                "request_id": r["request_id"],
                "unit": r["unit"],
                "metric": r["metric"],
                "value": r.get("value"),
                "status": r["status"],
            }
            for r in scores
        ],
        schema={
            "request_id": pl.String,
            "unit": pl.String,
            "metric": pl.String,
            "value": pl.Float64,
            "status": pl.String,
        },
    )


# -- the day ------------------------------------------------------------------------------


def _judge(config: RunConfig, gateway: Gateway | None) -> Judge:
    return Judge.from_config(config.models, gateway, items_in_flight(config))  # type: ignore[arg-type]


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
            return await _dry_run(config, day, Path(tmp))
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
            read = _read(config, day, folder / REQUESTS)
        except NoTraffic as exc:
            out = AuditDay(config, day, folder, None, pl.DataFrame(), no_data=str(exc))
            run.finish("no_data", error=str(exc), seconds=_since(started))
            return out
        if not read.records:
            why = f"no request in the day's logs ({read.bad} records did not map)"
            out = AuditDay(config, day, folder, read, pl.DataFrame(), no_data=why)
            run.finish("no_data", error=why, read=_read_summary(read), seconds=_since(started))
            return out
        judge = _judge(config, gateway)
        sample, strata = _draw(config, folder / REQUESTS, judge)
        write_table(to_table(sample.to_dicts(), AUDIT_SAMPLE), folder / SAMPLE)
        out = AuditDay(config, day, folder, read, sample, strata=strata)
        rows = await fetch_missing_texts(config, sampled_rows(folder / REQUESTS, sample))
        out.served = served_requests(rows, sample, section.k)
        source = f"audit:{section.name}:{day.isoformat()}"
        await grade_served(out, judge, gateway, source)
        write_table(to_table(out.verdicts, AUDIT_VERDICTS), folder / VERDICTS)
        score_lists(out)
        await score_answers(out, judge, gateway, source)
        write_table(to_table(out.scores, AUDIT_SCORES), folder / SCORES)
        from ragaudit.audit._labels import ITEMS, people_values, write_label_items

        # People's labels given since the day was first audited fill the PPI columns: a re-run
        # of the day pays nothing and reads them again.
        write_label_items(folder, out.served, section.metrics, section.name)
        people = people_values(folder, section.k, config.sort.relevant_grade)
        out.estimates = estimate(values_frame(out.scores), sample, labels=people)
        write_table(to_table(out.estimates.to_dicts(), AUDIT_ESTIMATES), folder / ESTIMATES)
        from ragaudit.audit._report import write_report

        # The day against its series: the probe and the judge check are graded through the
        # store and the memo like the day's own grades, so a resumed day pays for neither twice.
        out.watch = compare_day(out, await watch_day(out, judge, gateway))
        write_report(out)
        run.finish(
            day_status(out),
            seconds=_since(started),
            read=_read_summary(read),
            sampled=len(out.served),
            grading=vars(out.grading),
            llm=out.calls,
            failed_rows=failed_rows(out),
            tables=[REQUESTS, SAMPLE, VERDICTS, SCORES, ITEMS, ESTIMATES, CHANGES, REPORT],
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


def summary(day: AuditDay) -> dict[str, Any]:
    """What the flow returns and the CLI prints: counts, calls, the overall estimates."""
    overall = []
    if day.estimates is not None and not day.estimates.is_empty():
        overall = day.estimates.filter(pl.col("segment") == "(all)").to_dicts()
    return {
        "audit": day.section.name,
        "day": day.day.isoformat(),
        "folder": str(day.folder),
        "read": _read_summary(day.read),
        "sampled": len(day.served),
        "grading": vars(day.grading),
        "llm": dict(day.calls),
        "status": "no_data" if day.no_data else day_status(day),
        "no_data": day.no_data,
        "failed_rows": failed_rows(day),
        "overall": overall,
        "regressed": [] if day.watch is None else day.watch.regressed,
        "changes": [] if day.watch is None else [c.to_row() for c in day.watch.changes if c.moved],
        "notes": [] if day.watch is None else list(day.watch.notes),
        "event": None if day.watch is None else day.watch.event,
    }


def promote_day(
    runs_root: Path,
    name: str,
    day: dt.date,
    *,
    output: Path,
    worst: int = 50,
    metric: str | None = None,
    against: Path | None = None,
    replace: bool = False,
) -> int:
    """Write an audit day's worst sampled requests as a question set; returns how many.

    Args:
        runs_root: The runs root holding ``audit-<name>/<day>/``.
        name: The audit's name.
        day: The audit day.
        output: The JSONL question set written (``ragaudit run --questions``).
        worst: Requests promoted, before those already in ``against`` are left out.
        metric: The metric ranked by (default: nDCG@k within the served list).
        against: An existing question set whose questions are not promoted again.
        replace: Write over ``output`` when it exists (else refused: it may be a curated set).

    Raises:
        InputError: No finished audit day there, no value of ``metric`` to rank by, or
            ``output`` exists and ``replace`` is not given (before anything is read).
    """
    if Path(output).exists() and not replace:
        raise InputError(
            f"--output {output}: the file exists (a question set of yours?); give another "
            "file, or --force to replace it"
        )
    from ragaudit.audit._promote import promote, write_question_set
    from ragaudit.dataset import load_questions
    from ragaudit.directions import higher_is_better
    from ragaudit.runlock import check_run_id

    folder = Path(runs_root) / check_run_id(f"audit-{name}") / day.isoformat()
    if not (folder / SCORES).is_file():
        raise InputError(
            f"{folder}: no finished audit day (no {SCORES}); run ragaudit audit --day "
            f"{day.isoformat()} first"
        )
    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    k = manifest["config"]["audit"]["k"]
    by = metric or f"ndcg@{k}"
    try:
        questions = promote(
            pl.read_parquet(folder / SAMPLE),
            pl.read_parquet(folder / SCORES),
            pl.scan_parquet(folder / REQUESTS),
            metric=by,
            worst=worst,
            higher_is_better=higher_is_better(by),
            existing=load_questions(against) if against is not None else (),
            audit=name,
            day=day.isoformat(),
        )
    except ValueError as exc:
        raise InputError(f"--metric {by}: {exc}") from None
    write_question_set(questions, output)
    return len(questions)


def _read_summary(read: ReadReport | None) -> dict[str, Any]:
    return {} if read is None else read.summary()


async def _dry_run(config: RunConfig, day: dt.date, tmp: Path) -> AuditDay:
    """Read and sample the day into ``tmp``; count the grading and scoring plans; no call."""
    from ragaudit.dryrun import Assumptions, Plan, estimate_score

    section = audit_section(config)
    read = _read(config, day, tmp / REQUESTS)
    judge = _judge(config, None)
    sample, strata = _draw(config, tmp / REQUESTS, judge)
    out = AuditDay(config, day, tmp, read, sample, strata=strata, plan=DryRun())
    rows = await fetch_missing_texts(config, sampled_rows(tmp / REQUESTS, sample))
    out.served = served_requests(rows, sample, section.k)
    plan = out.plan
    assert plan is not None
    questions, candidates = _pairs(out.served)
    plan.pairs = sum(len(s.docs) for s in out.served)
    found = lookup_pairs(judge, questions, candidates, judgment_store(config))
    plan.in_store = len(found)
    # One request per key, as the grading asks it.
    todo: dict[str, tuple[Served, dict[str, Any]]] = {}
    by_id = {s.request_id: s for s in out.served}
    for qid, docs in candidates.items():
        for c in docs:
            if (qid, c["context_id"]) not in found:
                s = by_id[qid]
                key = pair_key(judge, questions[qid], c["text"])
                todo.setdefault(key, (s, {"id": c["context_id"], "text": c["text"]}))
    models = config.models
    samples = grade_plan(
        models.graders, models.judge_repeats, models.temperature, config.score.sampling_temperature
    )
    graders = sample_judges(judge, samples, models)
    for s, doc in todo.values():
        for r in await plan_grades(
            graders,
            {s.request_id: s.question()},
            {s.request_id: [{"context_id": doc["id"], "text": doc["text"]}]},
        ):
            plan.grade_calls += 1
            plan.grade_tokens += _prompt_tokens(r.model, r.messages)
    # The score stage's own estimator over the sampled requests, as a run of their metrics.
    scored = config.model_copy(
        update={"score": config.score.model_copy(update={"metrics": section.metrics})}
    )
    est = Plan(scored, Assumptions(), [s.question() for s in out.served])
    est.candidates = {
        s.request_id: [(d["id"], d["text"]) for d in s.docs if _skip_reason(d) is None]
        for s in out.served
    }
    est.responses = {s.request_id: s.answer for s in out.served}
    await estimate_score(est)
    for line in est.lines:
        name = line.stage.split(":", 1)[-1]
        if line.kind == "completion":
            plan.metric_calls[name] = plan.metric_calls.get(name, 0.0) + line.calls
            plan.metric_tokens[name] = plan.metric_tokens.get(name, 0.0) + line.tokens_in
    return out


def _prompt_tokens(model: str, messages: list[dict[str, Any]]) -> int:
    from ragaudit.cache import usage_counter

    return usage_counter(model).prompt(messages)


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
    "DryRun",
    "Grading",
    "Served",
    "audit_dir",
    "audit_root",
    "grade_served",
    "judgment_store",
    "previous_day",
    "promote_day",
    "run_audit_day",
    "samples_of",
    "score_answers",
    "score_lists",
    "fetch_missing_texts",
    "sampled_rows",
    "served_requests",
    "summary",
    "values_frame",
]
