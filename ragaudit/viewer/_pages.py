"""The viewer's pages: the runs list, a run's report, compare, trend and a question's drill-down.

Reports and comparisons are built from the run folders on demand through ``ragaudit.reporting``
(the same model and templates as ``report.html`` and ``compare.html``) and kept while the
folders are unchanged: a label or a resumed stage written since shows at the next request.
"""

from __future__ import annotations

import json
import shlex
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from cachetools import LRUCache
from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response

from ragaudit import labels
from ragaudit.errors import StageError, clip
from ragaudit.numbers import fixed
from ragaudit.reporting import (
    Report,
    build_base,
    build_calibration,
    compare_runs,
    people_section,
    template_env,
    trend,
    with_people,
)
from ragaudit.runfolder import folder_kind
from ragaudit.secrets import redact
from ragaudit.viewer._incremental import split
from ragaudit.viewer._listing import (
    Listed,
    Listing,
    Signature,
    audit_days,
    signature,
)
from ragaudit.viewer._paths import run_path

if TYPE_CHECKING:
    from ragaudit.reporting import Figure, RunOverview

router = APIRouter()

# The viewer's own pages run no inline script (runs.js is a file it serves); the pages rendered
# by ``reporting`` carry their inline script and style, as report.html does on disk. Nothing
# may be fetched from another origin either way.
_STRICT_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
_REPORT_CSP = _STRICT_CSP.replace("script-src 'self'", "script-src 'self' 'unsafe-inline'")

# Every text on these pages came from a run folder: escaped, whatever the file name.
_env = template_env("ragaudit.viewer")
_env.filters["num"] = lambda v, digits=3: fixed(v, digits, missing="–")


def _pretty(text: str | None) -> str:
    """A judge's stored reasons laid out one field a line when they are JSON, else as stored."""
    if not text:
        return ""
    try:
        return json.dumps(json.loads(text), indent=1, ensure_ascii=False)
    except ValueError:
        return text


_env.filters["pretty"] = _pretty
# A run id in a command shown to copy: ``nightly 01`` must stay one argument in the shell.
_env.filters["shell"] = shlex.quote

T = TypeVar("T")


class _Kept:
    """Values built from run folders, kept while the folders' signatures are unchanged."""

    def __init__(self, size: int) -> None:
        self._cache: LRUCache[Any, tuple[Any, Any]] = LRUCache(size)
        self._lock = threading.Lock()

    def get(self, key: Any, sig: Any, build: Callable[[], T]) -> T:
        with self._lock:
            kept = self._cache.get(key)
        if kept is not None and kept[0] == sig:
            return kept[1]
        value = build()
        with self._lock:
            self._cache[key] = (sig, value)
        return value


class Viewer:
    """What the pages share: the runs root, its listing and the built pages."""

    def __init__(self, runs_root: Path) -> None:
        self.root = runs_root
        self.listing = Listing(runs_root)
        self.pages = _Kept(16)
        # A run's page in two parts (``_incremental``): a label re-renders only people's part.
        self.bases = _Kept(8)
        self.frames = _Kept(8)
        self.people = _Kept(8)

    def run(self, run_id: str) -> tuple[Path, Listed, Signature]:
        """The folder of ``run_id`` (404 outside the root), its entry and signature."""
        folder = run_path(self.root, run_id)
        return folder, self.listing.folder(folder), signature(folder)

    def report(self, folder: Path, sig: Signature) -> Report:
        """The report model of a run folder, built again in the part that changed.

        The rest is built again only when the rest changed, people's figures only when the
        labels did: a label or ``compare.json`` never rebuilds the whole report.
        """
        rest, labelled = _parts(folder, sig)
        base = self.bases.get(folder.name, rest, lambda: build_base(folder))
        section = self.people.get(folder.name, (rest, labelled), lambda: people_section(folder))
        return with_people(base, section)

    def page(self, folder: Path, sig: Signature) -> str:
        """A run's report page: its frame kept while the rest is unchanged, people's parts new."""
        from ragaudit.reporting import fill_people, render_frame

        rest, labelled = _parts(folder, sig)

        def fill() -> str:
            report = self.report(folder, sig)
            frame = self.frames.get(folder.name, rest, lambda: render_frame(report))
            return fill_people(frame, report)

        return self.pages.get(("run", folder.name), (rest, labelled), fill)


def _parts(folder: Path, sig: Signature) -> tuple[Any, Any]:
    """A run's page's two keys: the rest of its folder, and what people's labels of it read.

    People's labels live in the runs root's judgment store, and reach a run from any page
    where one of its pairs was labelled: the store's state is part of the second key.
    """
    rest, labelled = split(sig[1])
    return rest, (labelled, labels.store_state(folder))


def viewer(request: Request) -> Viewer:
    """The app's :class:`Viewer` (made once per app from ``app.state.runs_root``)."""
    state = request.app.state
    if getattr(state, "viewer", None) is None or state.viewer.root != state.runs_root:
        state.viewer = Viewer(Path(state.runs_root))
    return state.viewer


def _render(template: str, **context: Any) -> str:
    """``template`` of the viewer's templates rendered (autoescaped) with ``context``."""
    return _env.get_template(template).render(**context)


def _page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    body = _render(template, **context)
    return HTMLResponse(body, status_code=status, headers={"Content-Security-Policy": _STRICT_CSP})


def _parquet(path: Path) -> Any:
    """A table of an audit's folder as polars, or None when it is not there."""
    import polars as pl

    from ragaudit.runfolder import read_parquet_file

    return pl.from_arrow(read_parquet_file(path)) if path.is_file() else None


def _audit_watch(folder: Path, days: list[str], metric: str | None) -> dict[str, Any]:
    """An audit's series (its newest), the probe's daily mean and every day's moves.

    The moves as the console and the day's report give them (one line per day, segment and
    cause), then every row that moved (a change or a part of one) in full.
    """
    import polars as pl

    from ragaudit.audit import moves
    from ragaudit.reporting import audit_series_chart

    series = _parquet(folder / "series.parquet")
    out: dict[str, Any] = {
        "metrics": [],
        "metric": None,
        "figure": None,
        "changes": [],
        "lines": [],
    }
    if series is None or series.is_empty() or not days:
        return out
    newest = series.filter(pl.col("day") == days[0])["series"]
    if newest.is_empty():
        return out
    mine = series.filter(pl.col("series") == newest[0])
    metrics = sorted(set(mine["metric"].to_list()))
    chosen: str = (
        metric
        if metric is not None and metric in metrics
        else next((m for m in metrics if m.startswith("ndcg")), metrics[0])
    )
    rows = mine.filter(pl.col("metric") == chosen).sort("day", "segment").to_dicts()
    for day in sorted(set(mine["day"].to_list())):
        probe = _parquet(folder / day / "probe.parquet")
        if probe is not None and not probe.is_empty():
            values = probe.filter(pl.col("metric") == chosen)["value"].drop_nulls()
            if values.len():
                rows.append({"day": day, "segment": "probe", "estimate": float(values.mean())})
        changes = _parquet(folder / day / "changes.parquet")
        if changes is not None and "moved" in changes.columns:
            rows = changes.to_dicts()
            out["lines"] += [
                {"day": day, "kind": m.kind, "segment": m.segment, "text": m.text()}
                for m in moves(rows, day)
            ]
            out["changes"] += [{"part": "total", **c, "day": day} for c in rows if c["moved"]]
    out.update(
        metrics=metrics,
        metric=chosen,
        figure=audit_series_chart(chosen, rows),
        series=newest[0],
        changes=sorted(out["changes"], key=lambda c: c["day"], reverse=True),
        lines=sorted(out["lines"], key=lambda m: m["day"], reverse=True),
    )
    return out


def _message(title: str, text: str, status: int, run: Listed | None = None) -> HTMLResponse:
    return _page("message.html.j2", status, title=title, text=text, run=run)


def _framed(page: str, **nav: Any) -> HTMLResponse:
    """A page rendered by ``reporting`` with the viewer's bar put at the top of its body."""
    bar = _env.get_template("_bar.html.j2").render(**nav)
    head, sep, rest = page.partition("<body>")
    body = head + sep + bar + rest if sep else bar + page
    return HTMLResponse(body, headers={"Content-Security-Policy": _REPORT_CSP})


def _failure(exc: Exception) -> str:
    """An error from a run folder as one line (its text came from outside: escaped on the page)."""
    return clip(redact(f"{type(exc).__name__}: {exc}"), 600)


@router.get("/favicon.ico", include_in_schema=False)
def favicon() -> Response:
    """No icon (the report pages name none; a 404 would be a console error in the browser)."""
    return Response(status_code=204)


@router.get("/", response_class=HTMLResponse)
def runs_page(
    request: Request,
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
    q: Annotated[str, Query(max_length=200)] = "",
) -> HTMLResponse:
    """The folders under the runs root, newest first, a page at a time.

    Runs with their means, and what the others are (a tune, battles, an audit); ``q`` keeps
    the folders whose name holds it.
    """
    v = viewer(request)
    shown = v.listing.page(page, q.strip())
    metrics = sorted({m for r in shown.rows if r.overview for m in r.overview.means})
    return _page("runs.html.j2", root=str(v.root), runs=shown.rows, metrics=metrics, page=shown)


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def report_page(request: Request, run_id: str) -> HTMLResponse:
    """A run's report (or a calibration run's page), built from its folder as it is now."""
    v = viewer(request)
    folder, listed, sig = v.run(run_id)
    if not listed.openable:
        return _message(f"{listed.run_id}: {listed.status}", listed.note or "", 409, listed)

    if listed.kind == "audit":
        entries = audit_days(folder)
        days = [d.name for d in entries]
        finished = [d.name for d in entries if d.state.complete]
        watch = _audit_watch(folder, finished, request.query_params.get("metric"))
        from ragaudit.viewer._audit_labels import people_figures

        people = people_figures(folder, finished)
        return _page("audit.html.j2", run=listed, days=days, states=entries, people=people, **watch)

    if listed.kind not in {"run", "calibration"}:
        # The page the kind writes (a tune's, an ablation's), as it wrote it, under the
        # reports' policy like an audit day.
        try:
            own = (folder / str(folder_kind(listed.kind).page)).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:  # rewritten or removed since it was listed
            return _message(f"{listed.run_id}: cannot be shown", _failure(exc), 409, listed)
        return _framed(own, run=listed, sampled=False)

    def calibration() -> str:
        # The charts' packages load with the first report, not with the server (its list).
        from ragaudit.reporting import render_calibration_html

        section = build_calibration(folder)
        if section is None:
            raise StageError(f"{folder.name}: a calibration folder without its table")
        return render_calibration_html(section)

    try:
        if listed.kind == "calibration":
            page = v.pages.get(("report", folder.name), sig, calibration)
        else:
            page = v.page(folder, sig)
    except Exception as exc:  # noqa: BLE001  (a folder from outside never takes the server down)
        return _message(f"{listed.run_id}: cannot be shown", _failure(exc), 422, listed)
    return _framed(page, run=listed, sampled=(folder / labels.SAMPLE_FILE).is_file())


@router.get("/runs/{run_id}/days/{day}", response_class=HTMLResponse)
def audit_day_page(request: Request, run_id: str, day: str) -> HTMLResponse:
    """One day of an audit: the report.html the audit wrote, under the reports' policy."""
    v = viewer(request)
    folder, listed, _ = v.run(run_id)
    if listed.kind != "audit" or day not in {d.name for d in audit_days(folder)}:
        raise HTTPException(404, "no such audit day")
    page = folder / day / "report.html"
    if not page.is_file():
        return _message(f"{listed.run_id} {day}: no report yet", "the day has not finished", 409)
    return _framed(page.read_text(encoding="utf-8"), run=listed, sampled=False)


@router.get("/runs/{run_id}/questions/{question_id}", response_class=HTMLResponse)
def question_page(request: Request, run_id: str, question_id: str) -> HTMLResponse:
    """One question of a run: its answer, reference, every metric with the judge's reasons."""
    v = viewer(request)
    folder, listed, sig = v.run(run_id)
    if not listed.openable or listed.kind != "run":
        return _message(f"{listed.run_id}: {listed.status}", listed.note or "", 409, listed)
    try:
        report = v.report(folder, sig)
    except Exception as exc:  # noqa: BLE001
        return _message(f"{listed.run_id}: cannot be shown", _failure(exc), 422, listed)
    found = next((q for q in report.questions if q.question_id == question_id), None)
    if found is None:
        raise HTTPException(404, "no such question")
    sources = labels.grade_sources(folder, question_id)
    return _page("question.html.j2", run=listed, report=report, q=found, sources=sources)


@router.get("/compare", response_class=HTMLResponse)
def compare_page(request: Request, a: str, b: str) -> HTMLResponse:
    """The comparison of run A with run B (paired by question), computed on demand."""
    v = viewer(request)
    dir_a, run_a, sig_a = v.run(a)
    dir_b, run_b, sig_b = v.run(b)
    if dir_a == dir_b:
        return _message("Pick two different runs", f"A and B are both {a}.", 400)
    for listed in (run_a, run_b):
        if not listed.openable or listed.kind != "run":
            return _message(f"{listed.run_id}: {listed.status}", listed.note or "", 409, listed)
    from ragaudit.reporting import render_compare_html

    try:
        page = v.pages.get(
            ("compare", dir_a.name, dir_b.name),
            (sig_a, sig_b),
            lambda: render_compare_html(compare_runs(dir_a, dir_b)),
        )
    except Exception as exc:  # noqa: BLE001
        return _message(f"{a} → {b}: cannot be compared", _failure(exc), 422)
    return _framed(page, run=None, sampled=False, compared=(run_a, run_b))


@router.get("/trend", response_class=HTMLResponse)
def trend_page(
    request: Request, metric: str | None = None, question_set: str | None = None
) -> HTMLResponse:
    """A metric's mean over the runs of one question set (the newest run's set by default)."""
    v = viewer(request)
    runs = [r.overview for r in v.listing.all() if r.overview is not None]
    runs.sort(key=lambda r: (r.started_at or "", r.run_id))
    metrics = sorted({m for r in runs for m in r.means})
    sets: dict[str, str] = {}
    for r in runs:
        if r.question_set_hash:
            sets[r.question_set_hash] = Path(r.questions_file or "").name or "(unnamed)"
    from ragaudit.reporting import trend_chart

    metric = metric or (metrics[0] if metrics else None)
    chosen: str | None = None
    series: list[RunOverview] = []
    figure: Figure | None = None
    if metric is not None:
        chosen, series = trend(runs, metric, question_set or None)
        if series:
            shown = tuple(
                (r.run_id, r.means[metric], r.ci.get(metric), r.judge, r.corrected.get(metric))
                for r in series
            )
            key = ("trend", metric, chosen, shown)
            figure = v.pages.get(key, None, lambda: trend_chart(metric, series))
    return _page(
        "trend.html.j2",
        metric=metric,
        metrics=metrics,
        sets=sets,
        chosen=chosen,
        series=series,
        figure=figure,
    )


__all__ = ["Viewer", "router", "viewer"]
