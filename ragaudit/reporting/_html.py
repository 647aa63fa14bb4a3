"""``report.html``: one self-contained page rendered from the report model.

The page is a Jinja2 template with autoescaping; the charts are inline SVG (``_charts``); the
per-question drill-down is an inline JSON blob, gzip-compressed and base64-encoded, that a
small inline script inflates with the browser's own ``DecompressionStream`` and turns into
HTML when a question is opened: the drill-down is ~95% of the bytes (every question's top-k
contexts and every judge's reasons), and compressed a 1,000 × 20 run stays under 10 MB and
opens fast. No file, font, script or style is fetched from anywhere.
"""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import html
import json
import math
import re
import time
from pathlib import Path
from typing import Any

import jinja2

from ragaudit.numbers import fixed
from ragaudit.reporting._calibration import CalibrationSection
from ragaudit.reporting._charts import (
    FONT,
    agreement_chart,
    alignment_chart,
    compare_chart,
    consistency_chart,
    figures,
    monotonicity_chart,
    statistic_label,
)
from ragaudit.reporting._model import QuestionRow, Report, labelled
from ragaudit.reporting._templates import template_env
from ragaudit.runfolder import write_bytes
from ragaudit.secrets import redact

REPORT_FILE = "report.html"


def _env() -> jinja2.Environment:
    env = template_env("ragaudit.reporting")
    # Chinese as itself (3 bytes a character) rather than \\uXXXX escapes (6); ``tojson`` still
    # escapes <, >, & and ' so the blob cannot close its <script> element.
    env.policies["json.dumps_kwargs"] = {"ensure_ascii": False, "separators": (",", ":")}
    env.filters["num"] = _num
    env.filters["signed"] = _signed
    env.filters["when"] = when
    env.filters["labelled"] = labelled
    return env


def when(iso: str | None) -> str:
    """An ISO timestamp to the second, in UTC (``2026-11-25 03:00:07 UTC``), as a reader wants."""
    if not iso:
        return "–"
    try:
        stamp = dt.datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if stamp.tzinfo is not None:
        stamp = stamp.astimezone(dt.UTC)
    return stamp.strftime("%Y-%m-%d %H:%M:%S") + (" UTC" if stamp.tzinfo is not None else "")


_STATUS_SPAN = re.compile(r'<span id="run-status">[^<]*</span>')
_FINISHED_SPAN = re.compile(r'<span id="run-finished">[^<]*</span>')


def stamp_completion(run_dir: Path, status: str, finished_at: str | None) -> bool:
    """Put the run's final status and end into its report's header; False without a report.

    The report stage renders the report while the run is still running; the flow calls this
    once it has ended, so the header does not say "running · finished –" for a finished run.
    Only the two marked spans change: nothing is rendered again.
    """
    path = Path(run_dir) / REPORT_FILE
    if not path.is_file():
        return False
    text = path.read_text(encoding="utf-8")
    text = _STATUS_SPAN.sub(
        lambda _: f'<span id="run-status">{html.escape(status)}</span>', text, count=1
    )
    text = _FINISHED_SPAN.sub(
        lambda _: f'<span id="run-finished">{html.escape(when(finished_at))}</span>',
        text,
        count=1,
    )
    write_bytes(text.encode("utf-8"), path)
    return True


def _num(value: float | None, digits: int = 3) -> str:
    return fixed(value, digits, missing="–")


def _signed(value: float | None, digits: int = 3) -> str:
    return fixed(value, digits, sign=True, missing="–")


def _reason(text: str | None) -> Any:
    """A stored reason as JSON when it is JSON (the page lays it out), else the text."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _drill(q: QuestionRow, metrics: tuple[str, ...], agreement: dict[str, list]) -> dict:
    """One question's drill-down record (short keys: the blob is most of the page's bytes)."""
    cells = []
    for m in (*metrics, *(m for m in q.scores if m not in metrics)):
        c = q.scores.get(m)
        if c is None:
            continue
        cells.append(
            {
                "m": m,
                "v": c.value if c.value is None or math.isfinite(c.value) else None,
                "s": c.status,
                "e": c.error,
                # As stored: the page parses it when the question is opened (parsing 20,000
                # reasons here only to serialise them again cost a second per 1,000 questions).
                "r": c.reason,
                "k": c.k_used,
            }
        )
    out: dict[str, Any] = {
        "id": q.question_id,
        "q": q.question,
        "lang": q.language,
        "a": q.answer,
        "as": q.answer_status,
        "ref": q.reference,
        "rs": q.reference_status,
        "sup": list(q.supporting_ids),
        "ctx": [
            {
                "id": c.context_id,
                "t": c.text,
                "er": c.engine_rank,
                "rel": c.relevant,
                "why": c.verdict_reason,
                "vs": c.verdict_status,
                "jr": c.judge_rank,
                "gr": c.grade,
                "gg": c.gold_grade,
                "sup": c.supporting,
                # Each sample's grade, only where the judges (or one judge's repeats) differ.
                "gs": [list(x) for x in c.grade_samples] if c.judges_disagree else None,
            }
            for c in q.contexts
        ],
        "sc": cells,
        "ag": agreement.get(q.question_id, []),
        "ng": [[n.text, n.importance, list(n.context_ids), n.verdict] for n in q.nuggets],
        "ns": q.nuggets_status,
        "nn": q.nuggets_note,
    }
    cv = q.conversation
    if cv is not None:
        # Only for a turn: a set of lone questions packs the records it packed before.
        out["cv"] = {
            "c": cv.conversation_id,
            "t": cv.turn,
            "k": cv.turn_kind,
            "kg": cv.turn_kind_given,
            "an": cv.answerability,
            "cut": cv.history_cut,
            "rw": cv.rewrite,
            "h": [[t.role, t.text, t.left_out] for t in cv.history],
        }
    return out


def _index_row(q: QuestionRow, up: dict[str, bool]) -> dict[str, Any]:
    """What the question list shows before a question is opened."""
    bad = sorted(
        c.metric
        for c in q.scores.values()
        if c.status == "ok"
        and c.value is not None
        and math.isfinite(c.value)
        and c.metric in up
        and (c.value < 0.5 if up[c.metric] else c.value > 0.5)
    )
    row: dict[str, Any] = {
        "id": q.question_id,
        "question": q.question,
        "failed": sum(1 for c in q.scores.values() if c.status == "failed"),
        "skipped": sum(1 for c in q.scores.values() if c.status == "skipped"),
        "low": bad,
        "lang": q.language or "",
        "turn": q.conversation.turn if q.conversation is not None else None,
    }
    return row


def pack(records: list[dict[str, Any]]) -> str:
    """The drill-down records as base64 of gzipped compact UTF-8 JSON (what the page inflates)."""
    raw = json.dumps(records, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    # mtime=0: the same run renders the same bytes.
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def unpack(blob: str) -> list[dict[str, Any]]:
    """Inverse of :func:`pack` (tests and tools read the drill-down back with it)."""
    return json.loads(gzip.decompress(base64.b64decode(blob)))


# Where the parts that people's labels change go in the page (comments: a run's texts are
# escaped, so no text of theirs can hold one; the drill-down blob is base64).
_SLOTS = ("top", "people", "labels")


def _slot(name: str) -> str:
    return f"<!--ragaudit:slot:{name}-->"


def render_html(report: Report) -> str:
    """The report page of ``report`` as one self-contained HTML document."""
    return fill_people(render_frame(report), report)


def _people_labels(report: Report) -> dict[str, list[Any]]:
    """Each question's labelled items for the drill-down (short lists: the page's own JSON)."""
    out: dict[str, list[Any]] = {}
    for item in report.labelled:
        out.setdefault(item.question_id, []).append(
            [
                item.kind,
                item.candidate_id,
                item.judge,
                [[p.annotator, p.label, p.time, p.given_in] for p in item.people],
            ]
        )
    return out


def fill_people(frame: str, report: Report) -> str:
    """``frame`` (:func:`render_frame`) with the parts people's labels change, from ``report``.

    The summary table (its PPI column and the corrected figures on top), the judge against
    people section with its disagreements, and the drill-down's labels: milliseconds, where
    the frame (charts, the drill-down blob) takes seconds, so a new label re-renders only these.
    """
    module = _env().get_template("_people.html.j2").module
    parts = {
        "top": str(module.top(report)),  # type: ignore[attr-defined]
        "people": str(module.section(report)),  # type: ignore[attr-defined]
        "labels": _labels_script(_people_labels(report)),
    }
    for name in _SLOTS:
        frame = frame.replace(_slot(name), parts[name], 1)
    return frame


def _labels_script(labelled: dict[str, list[Any]]) -> str:
    if not labelled:
        return ""
    # ``htmlsafe_json_dumps`` escapes <, >, & and ': a label's text cannot close the element.
    body = jinja2.utils.htmlsafe_json_dumps(
        labelled, dumps=json.dumps, ensure_ascii=False, separators=(",", ":")
    )
    return f'<script type="application/json" id="people-labels">{body}</script>'


def render_frame(report: Report) -> str:
    """The report page without what people's labels change (slots :func:`fill_people` fills).

    Everything costly (the charts, the drill-down blob) is here and reads nothing of the labels:
    ``report`` may be :func:`~ragaudit.reporting.build_base`'s.
    """
    started = time.perf_counter()
    figs = figures(report)
    charts_s = time.perf_counter() - started
    agreement: dict[str, list] = {}
    for a in report.agreement:
        if a.question_id != "__all__" and a.status == "ok":
            agreement.setdefault(a.question_id, []).append([a.comparison, a.metric, a.k, a.value])
    up = {s.metric: s.higher_is_better for s in report.summary}
    manifest = dict(report.manifest)
    config = manifest.pop("config", {})
    page = (
        _env()
        .get_template("report.html.j2")
        .render(
            r=report,
            figures=figs,
            font=FONT,
            questions=[_index_row(q, up) for q in report.questions],
            drill=pack([_drill(q, report.metrics, agreement) for q in report.questions]),
            config_json=redact(json.dumps(config, indent=2, ensure_ascii=False, default=str)),
            manifest_json=redact(json.dumps(manifest, indent=2, ensure_ascii=False, default=str)),
            overall=[a for a in report.overall_agreement if a.status == "ok"],
            reference_counts=sorted(report.reference_counts().items()),
            charts_s=charts_s,
            conversational=any(q.conversation is not None for q in report.questions),
        )
    )
    return page


def write_html(report: Report, path: Path | str | None = None) -> Path:
    """Write ``report.html`` (atomically) into the run folder, or to ``path``."""
    target = Path(path) if path is not None else report.run_dir / REPORT_FILE
    write_bytes(render_html(report).encode("utf-8"), target)
    return target


def render_compare_html(comparison: Any, battles: Any = None, duels: Any = ()) -> str:
    """The page of a ``Comparison`` (``compare_runs``): verdict, comparability, what moved.

    ``battles``: the ``BattleStats`` of ``compare --battles``, shown as a row beside the metrics;
    ``duels``: its questions (``battles.duels``), both answers side by side with every verdict.
    """
    fig = compare_chart(comparison)
    return (
        _env()
        .get_template("compare.html.j2")
        .render(
            c=comparison,
            battles=battles,
            duels=duels,
            figures=[fig] if fig is not None else [],
            font=FONT,
            moves=[
                {
                    "m": q,
                    "reason_a": json.dumps(_reason(q.reason_a), indent=1, ensure_ascii=False),
                    "reason_b": json.dumps(_reason(q.reason_b), indent=1, ensure_ascii=False),
                }
                for q in comparison.moved_questions
            ],
        )
    )


def write_compare_html(
    comparison: Any, path: Path | str, battles: Any = None, duels: Any = ()
) -> Path:
    """Write the comparison page to ``path`` atomically (with the battles when given)."""
    target = Path(path)
    write_bytes(render_compare_html(comparison, battles, duels).encode("utf-8"), target)
    return target


# (kind(s), anchor, heading, what the section measures, chart, whether rows have a family)
_CALIBRATION_SECTIONS = (
    (
        ("monotonicity",),
        "monotonicity",
        "Monotonicity",
        "Scenario question sets of known order: does each metric score the better level higher?",
        monotonicity_chart,
        True,
    ),
    (
        ("agreement", "detection"),
        "agreement",
        "Agreement with human labels",
        "WikiEval and HaluEval: does the metric side with the human label?",
        agreement_chart,
        False,
    ),
    (
        ("alignment",),
        "alignment",
        "Alignment with your labels",
        "The labels file: how close the metric comes to your own human labels.",
        alignment_chart,
        False,
    ),
    (
        ("consistency",),
        "consistency",
        "Judge consistency",
        "Does the judge's answer depend on the order it reads things in, or on the sample drawn?",
        consistency_chart,
        False,
    ),
    (
        ("grade_calibration",),
        "grade-calibration",
        "Per-grade calibration of relevance",
        "Your human grades (0–3): per judge grade, the share of its contexts the human calls "
        "relevant; per human grade, the share the judge graded higher (over-rated) or lower.",
        lambda _section: None,
        True,
    ),
)


# A figure's columns that may hold one value on every row of a section: (attribute, heading).
_SHAREABLE = (
    ("dataset", "data"),
    ("metric", "metric"),
    ("family", "family"),
    ("judge", "judge"),
    ("embedder", "embedder"),
    ("note", "note"),
)


def _calibration_columns(rows: list[Any], family: bool) -> tuple[list[str], list[tuple[str, str]]]:
    """The columns a section's table shows, and (heading, value) of those said once above it.

    A column with one value on every row (the judge, the data set, a note) repeated down 15
    rows crowded out the figures; it is said once over the table instead.
    """
    shown, shared = [], []
    for attr, heading in _SHAREABLE:
        if attr == "family" and not family:
            continue
        values = {getattr(f, attr) or "" for f in rows}
        if len(rows) > 1 and len(values) == 1:
            if values != {""}:
                shared.append((heading, values.pop()))
        else:
            shown.append(attr)
    return shown, shared


def render_calibration_html(section: CalibrationSection) -> str:
    """The page of a calibration run: one section per kind of figure, each with its chart."""
    sections = []
    for kinds, key, title, intro, chart, family in _CALIBRATION_SECTIONS:
        rows = section.of_kind(*kinds)
        if rows:
            shown, shared = _calibration_columns(list(rows), family)
            sections.append(
                {
                    "key": key,
                    "title": title,
                    "intro": intro,
                    "figure": chart(section),
                    "rows": rows,
                    "shown": shown,
                    "shared": shared,
                }
            )
    manifest = dict(section.manifest)
    config = manifest.pop("config", {})
    return (
        _env()
        .get_template("calibration.html.j2")
        .render(
            c=section,
            m=manifest,
            font=FONT,
            sections=sections,
            statistic_label=statistic_label,
            config_json=redact(json.dumps(config, indent=2, ensure_ascii=False, default=str)),
            manifest_json=redact(json.dumps(manifest, indent=2, ensure_ascii=False, default=str)),
        )
    )


def write_calibration_html(section: CalibrationSection, path: Path | str | None = None) -> Path:
    """Write the calibration page (atomically) into its run folder, or to ``path``."""
    target = section.target(REPORT_FILE, path)
    write_bytes(render_calibration_html(section).encode("utf-8"), target)
    return target


__all__ = [
    "REPORT_FILE",
    "fill_people",
    "render_frame",
    "pack",
    "unpack",
    "render_calibration_html",
    "render_compare_html",
    "render_html",
    "stamp_completion",
    "when",
    "write_calibration_html",
    "write_compare_html",
    "write_html",
]
