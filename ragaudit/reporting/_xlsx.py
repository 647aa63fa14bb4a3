"""``report.xlsx``: the report model in the spreadsheet layout QA teams review by hand.

Sheets: ``answers`` (question, answer, reference, then one column per metric: the
hand-review layout), ``summary``, one sheet per metric with every row's status and reason,
and ``run`` (judge, embedder, warnings). Numbers are numbers, the header row is frozen,
filters are on.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import polars as pl
from xlsxwriter import Workbook
from xlsxwriter.worksheet import Worksheet

from ragaudit.reporting._calibration import CalibrationSection
from ragaudit.reporting._model import Report
from ragaudit.runfolder import write_bytes

# Excel keeps at most 32,767 characters in a cell.
_CELL_CHARS = 32_000
_SHEET_CHARS = 31
_BAD_SHEET = re.compile(r"[\[\]:*?/\\]")


class _ExactWorksheet(Worksheet):
    """A worksheet that writes every float with the digits that round-trip it.

    xlsxwriter writes numbers with 16 significant digits; a float64 needs up to 17, so a
    score read back from the sheet could differ from the Parquet value in its last bit.
    """

    def _xml_number_element(self, number: Any, attributes: Any = None) -> None:
        attr = "".join(f' {k}="{self._escape_attributes(v)}"' for k, v in attributes or [])
        text = repr(float(number)) if isinstance(number, float) else f"{number:.16G}"
        self.fh.write(f"<c{attr}><v>{text}</v></c>")


def _clip(text: str | None) -> str | None:
    return None if text is None else text[:_CELL_CHARS]


def answers_frame(report: Report) -> pl.DataFrame:
    """The hand-review layout: question, answer, reference, one column per metric (ok values)."""
    data: dict[str, list[Any]] = {
        "question": [q.question for q in report.questions],
        "answer": [_clip(q.answer) for q in report.questions],
        "reference": [_clip(q.reference) for q in report.questions],
    }
    for m in report.metrics:
        data[m] = [
            cell.value if (cell := q.scores.get(m)) and cell.status == "ok" else None
            for q in report.questions
        ]
    data["question_id"] = [q.question_id for q in report.questions]
    schema: dict[str, type[pl.DataType]] = {
        "question": pl.String,
        "answer": pl.String,
        "reference": pl.String,
    }
    schema |= {m: pl.Float64 for m in report.metrics} | {"question_id": pl.String}
    return pl.DataFrame(data, schema=schema)


_METRIC_SCHEMA: dict[str, type[pl.DataType]] = {
    "metric": pl.String,
    "mean": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "n_ok": pl.Int64,
    "n_failed": pl.Int64,
    "n_skipped": pl.Int64,
    "threshold": pl.Float64,
    "flagged": pl.Boolean,
    "higher_is_better": pl.Boolean,
}
"""A metric's summary columns: the summary sheet's and each breakdown cell's."""


def summary_frame(report: Report) -> pl.DataFrame:
    """One row per metric, as in ``summary.parquet`` plus the metric's direction.

    With people's labels, each metric's mean corrected by them (PPI) and, in rows of kind
    ``figure``, the judged candidates' figures (the relevant share, NDCG@10): the judge's
    mean beside the corrected one, as ``summary.parquet`` keeps them.
    """
    from ragaudit.ppi import corrected_note, figure_rows

    people = report.people
    rows = [
        {
            "metric": s.metric,
            "mean": s.mean,
            "ci_low": s.ci_low,
            "ci_high": s.ci_high,
            "n_ok": s.n_ok,
            "n_failed": s.n_failed,
            "n_skipped": s.n_skipped,
            "threshold": s.threshold,
            "flagged": s.flagged,
            "higher_is_better": s.higher_is_better,
            "kind": "metric",
            "ppi_mean": s.ppi_mean,
            "ppi_ci_low": s.ppi_ci_low,
            "ppi_ci_high": s.ppi_ci_high,
            "n_labels": s.n_labels,
            "labels_to_halve": s.labels_to_halve,
            "ppi_note": corrected_note(people, s.metric),
        }
        for s in report.summary
    ]
    rows += [{**r, "higher_is_better": True} for r in figure_rows(people)]
    return pl.DataFrame(
        rows,
        schema={
            **_METRIC_SCHEMA,
            "kind": pl.String,
            "ppi_mean": pl.Float64,
            "ppi_ci_low": pl.Float64,
            "ppi_ci_high": pl.Float64,
            "n_labels": pl.Int64,
            "labels_to_halve": pl.Int64,
            "ppi_note": pl.String,
        },
    )


_BREAKDOWN_SCHEMA: dict[str, type[pl.DataType]] = {
    "breakdown": pl.String,
    "cell": pl.String,
    "questions": pl.Int64,
    **_METRIC_SCHEMA,
    "note": pl.String,
}


def breakdowns_frame(report: Report) -> pl.DataFrame:
    """Every metric by turn position, turn kind and answerability: a row per cell and metric.

    As ``summary.parquet``'s rows of kind ``breakdown``, with the cell's questions and the
    breakdown's note (how a cell was read where the set does not say).
    """
    rows = [
        {
            "breakdown": b.name,
            "cell": cell,
            "questions": b.size(cell),
            **{k: getattr(s, k) for k in _BREAKDOWN_SCHEMA if hasattr(s, k)},
            "note": b.note,
        }
        for b in report.breakdowns
        for cell, s in b.summaries
    ]
    return pl.DataFrame(rows, schema=_BREAKDOWN_SCHEMA)


def metric_frame(report: Report, metric: str) -> pl.DataFrame:
    """Every question's row of ``metric``: value, status, error and the judge's reasons.

    With judge repeats or a jury, a last column holds each judge's samples of the row.
    """
    rows = []
    for q in report.questions:
        cell = q.scores.get(metric)
        rows.append(
            {
                "question_id": q.question_id,
                "question": q.question,
                "value": cell.value if cell else None,
                "status": cell.status if cell else "missing",
                "error": _clip(cell.error) if cell else None,
                "reason": _clip(cell.reason) if cell else None,
                "k_used": cell.k_used if cell else None,
                "samples": _samples_text(cell) if cell else None,
            }
        )
    frame = pl.DataFrame(
        rows,
        schema={
            "question_id": pl.String,
            "question": pl.String,
            "value": pl.Float64,
            "status": pl.String,
            "error": pl.String,
            "reason": pl.String,
            "k_used": pl.Int64,
            "samples": pl.String,
        },
    )
    # A run without samples keeps the sheet it always had.
    return frame if frame["samples"].null_count() < frame.height else frame.drop("samples")


def _samples_text(cell: Any) -> str | None:
    """``judge: 0.8, 0.75, failed; other: 1.0`` for a row with several samples, else None."""
    if not cell.samples:
        return None
    by: dict[str, list[str]] = {}
    for value, judge in zip(cell.samples, cell.sample_judges, strict=True):
        by.setdefault(judge, []).append("failed" if value is None else f"{value:.4g}")
    return "; ".join(f"{j}: {', '.join(v)}" for j, v in by.items())


def judge_noise_frame(report: Report) -> pl.DataFrame:
    """Per metric, each judge's self-agreement and the jury's, then the rows judges split on."""
    rows = [
        {
            "metric": n.metric,
            "agreement": n.kind,
            "judge": n.judge,
            "question_id": None,
            "alpha": n.alpha,
            "ci_low": n.ci_low,
            "ci_high": n.ci_high,
            "rows": n.n_items,
            "answers_per_row": n.n_raters,
            "judge_means": None,
        }
        for n in report.judge_noise
    ]
    rows += [
        {
            "metric": d.metric,
            "agreement": "disagreement",
            "judge": None,
            "question_id": d.question_id,
            "alpha": None,
            "ci_low": None,
            "ci_high": None,
            "rows": None,
            "answers_per_row": len(d.scores),
            "judge_means": "; ".join(
                f"{j}: {'-' if v is None else f'{v:.4f}'}" for j, v in d.scores.items()
            ),
        }
        for d in report.judge_disagreements
    ]
    return pl.DataFrame(
        rows,
        schema={
            "metric": pl.String,
            "agreement": pl.String,
            "judge": pl.String,
            "question_id": pl.String,
            "alpha": pl.Float64,
            "ci_low": pl.Float64,
            "ci_high": pl.Float64,
            "rows": pl.Int64,
            "answers_per_row": pl.Int64,
            "judge_means": pl.String,
        },
    )


def nuggets_frame(report: Report) -> pl.DataFrame:
    """Every question's nuggets: importance, the contexts holding each, the answer's verdict."""
    rows = [
        {
            "question_id": q.question_id,
            "question": q.question,
            "rank": n.index,
            "importance": n.importance,
            "nugget": n.text,
            "context_ids": ", ".join(n.context_ids),
            "verdict": n.verdict,
            "reason": _clip(n.verdict_reason),
        }
        for q in report.questions
        for n in q.nuggets
    ]
    return pl.DataFrame(
        rows,
        schema={
            "question_id": pl.String,
            "question": pl.String,
            "rank": pl.Int64,
            "importance": pl.String,
            "nugget": pl.String,
            "context_ids": pl.String,
            "verdict": pl.String,
            "reason": pl.String,
        },
    )


def citations_frame(report: Report) -> pl.DataFrame:
    """Every cited answer's sentences: the contexts each cites and their support."""
    rows = []
    for q in report.questions:
        cell = next(
            (
                c
                for m in ("citation_recall", "citation_precision", "citation_support_recall")
                if (c := q.scores.get(m)) is not None and c.status == "ok" and c.reason
            ),
            None,
        )
        if cell is None:
            continue
        try:
            sentences = json.loads(cell.reason or "{}").get("metric", {}).get("sentences", [])
        except (ValueError, AttributeError):
            continue
        for k, s in enumerate(sentences):
            rows.append(
                {
                    "question_id": q.question_id,
                    "sentence_no": k + 1,
                    "sentence": s.get("sentence"),
                    "cited": ", ".join(s.get("cited") or []),
                    "support": s.get("support"),
                    "each": json.dumps(s.get("each"), ensure_ascii=False)
                    if s.get("each")
                    else None,
                }
            )
    return pl.DataFrame(
        rows,
        schema={
            "question_id": pl.String,
            "sentence_no": pl.Int64,
            "sentence": pl.String,
            "cited": pl.String,
            "support": pl.String,
            "each": pl.String,
        },
    )


def run_frame(report: Report) -> pl.DataFrame:
    """Which run, judge and embedder produced the report, and the run's warnings."""
    items = [
        ("run_id", report.run_id),
        ("judge", report.judge),
        ("embedder", report.embedder),
        ("generator", report.generator),
        ("questions", report.questions_file),
        ("question_set_hash", report.question_set_hash),
        ("status", report.status),
        ("started_at", report.started_at),
        ("finished_at", report.finished_at),
    ] + [("warning", w) for w in report.warnings]
    return _fields(items)


def _fields(items: list[tuple[str, Any]]) -> pl.DataFrame:
    """A ``field``/``value`` sheet, every value as text (None stays empty)."""
    return pl.DataFrame(
        {"field": [k for k, _ in items], "value": [None if v is None else str(v) for _, v in items]}
    )


def sheet_names(metrics: tuple[str, ...], taken: set[str]) -> dict[str, str]:
    """A valid, unique sheet name per metric (at most 31 characters, none of Excel's bad ones)."""
    out: dict[str, str] = {}
    used = {t.lower() for t in taken}
    for m in metrics:
        base = _BAD_SHEET.sub("_", m)[:_SHEET_CHARS]
        name, n = base, 1
        while name.lower() in used:
            n += 1
            name = f"{base[: _SHEET_CHARS - len(str(n)) - 1]}~{n}"
        used.add(name.lower())
        out[m] = name
    return out


def text_workbook(target: io.BytesIO | str) -> Workbook:
    """A workbook in which every string stays text.

    Questions, contexts and answers come from outside; by default xlsxwriter turns a string
    starting with ``=`` into a live formula (``=HYPERLINK(...)`` becomes a clickable link in the
    user's sheet) and a URL-looking string into a hyperlink. Every workbook we write goes
    through here so that no cell can act.
    """
    return Workbook(
        target,
        {"nan_inf_to_errors": True, "strings_to_formulas": False, "strings_to_urls": False},
    )


def _write(frame: pl.DataFrame, wb: Workbook, name: str, widths: dict[str, int]) -> None:
    ws = wb.add_worksheet(name, worksheet_class=_ExactWorksheet)
    frame.write_excel(
        workbook=wb,
        worksheet=ws,
        autofilter=True,
        freeze_panes=(1, 0),
        float_precision=4,
        column_widths={c: w for c, w in widths.items() if c in frame.columns} or None,
        table_style=None,
    )


def grade_noise_frame(report: Report) -> pl.DataFrame:
    """The relevance grades' self- and jury agreement (no rows with one sample per grade)."""
    return pl.DataFrame(
        [asdict(g) for g in report.grade_noise],
        schema={
            "kind": pl.String,
            "judge": pl.String,
            "scale": pl.String,
            "level": pl.String,
            "alpha": pl.Float64,
            "ci_low": pl.Float64,
            "ci_high": pl.Float64,
            "n_items": pl.Int64,
            "n_raters": pl.Int64,
            "disagreed": pl.Int64,
        },
        orient="row",
    )


def people_frame(report: Report) -> pl.DataFrame:
    """The "Judge against people" section as rows: every figure with its interval and n."""
    rows: list[tuple[Any, ...]] = []
    p = report.people
    if p is not None:
        for a in (*p.agreement, *p.ndcg):
            part = "engine NDCG@10" if a.between == "engine" else "agreement"
            rows.append(
                (part, a.kind, a.between, a.statistic, a.value, a.ci_low, a.ci_high, a.n, a.note)
            )
        for c in p.confusion:
            for grade, k, share, low, high in c.judge:
                where = (f"human grade {c.human}", f"judge grade {grade}")
                rows.append(("confusion", *where, "share", share, low, high, c.n, f"{k} of {c.n}"))
        for f in p.corrected:
            for name, mean, low, high, n in (
                ("judge only", f.judge_mean, f.judge_ci_low, f.judge_ci_high, f.n_judged),
                ("PPI", f.ppi_mean, f.ppi_ci_low, f.ppi_ci_high, f.n_labelled),
                ("labels only", f.labels_mean, f.labels_ci_low, f.labels_ci_high, f.n_labelled),
            ):
                rows.append(("corrected", f.figure, None, name, mean, low, high, n, f.note))
            rows.append(
                ("corrected", f.figure, None, "ppi_corr", f.ppi_corr, None, None, f.n_labelled, "")
            )
            halve = None if f.labels_to_halve is None else float(f.labels_to_halve)
            rows.append(
                ("corrected", f.figure, None, "labels_to_halve", halve, None, None, f.n_judged, "")
            )
    return pl.DataFrame(
        rows,
        schema={
            "part": pl.String,
            "labels": pl.String,
            "between": pl.String,
            "statistic": pl.String,
            "value": pl.Float64,
            "ci_low": pl.Float64,
            "ci_high": pl.Float64,
            "n": pl.Int64,
            "note": pl.String,
        },
        orient="row",
    )


def write_xlsx(report: Report, path: Path) -> Path:
    """Write ``report`` as an xlsx workbook at ``path`` (atomically)."""
    buffer = io.BytesIO()
    text_widths = {"question": 40, "answer": 60, "reference": 60, "reason": 60, "error": 40}
    wb = text_workbook(buffer)
    _write(answers_frame(report), wb, "answers", text_widths)
    _write(summary_frame(report), wb, "summary", {"metric": 28})
    extra = {
        "nuggets": nuggets_frame(report),
        "citations": citations_frame(report),
        "judge_noise": judge_noise_frame(report),
    }
    extra = {k: v for k, v in extra.items() if v.height}
    if report.breakdowns:
        extra["breakdowns"] = breakdowns_frame(report)
    if report.grade_noise:
        extra["grade_noise"] = grade_noise_frame(report)
    if report.people is not None:
        extra["judge_vs_people"] = people_frame(report)
    taken = {"answers", "summary", "run", *extra}
    for metric, name in sheet_names(report.metrics, taken).items():
        _write(metric_frame(report, metric), wb, name, text_widths)
    for name, frame in extra.items():
        _write(frame, wb, name, {"question": 40, "nugget": 60, "sentence": 60, "reason": 60})
    _write(run_frame(report), wb, "run", {"field": 20, "value": 100})
    wb.close()
    write_bytes(buffer.getvalue(), path)
    return path


def compare_frames(comparison: Any) -> dict[str, pl.DataFrame]:
    """A ``Comparison``'s sheets: every row B − A with whether labels corrected it, the notes.

    ``labels`` says per row ``corrected`` (people's labels of both runs, PPI), ``unused``
    (labelled in a run but not used: the notes say why) or nothing (no labels of it).
    """
    corrected, unused = set(comparison.corrected), set(comparison.labels_unused)
    schema: dict[str, type[pl.DataType]] = {
        "metric": pl.String,
        "higher_is_better": pl.Boolean,
        "n_paired": pl.Int64,
        "mean_a": pl.Float64,
        "mean_b": pl.Float64,
        "diff": pl.Float64,
        "ci_low": pl.Float64,
        "ci_high": pl.Float64,
        "p_value": pl.Float64,
        "p_adjusted": pl.Float64,
        "moved": pl.Boolean,
        "verdict": pl.String,
        "noise": pl.String,
    }
    rows = [
        {
            **{k: getattr(m, k) for k in schema},
            "labels": "corrected"
            if m.metric in corrected
            else "unused"
            if m.metric in unused
            else None,
        }
        for m in comparison.metrics
    ]
    changes = pl.DataFrame(rows, schema=schema | {"labels": pl.String})
    by_turn = pl.DataFrame(
        [
            {
                "breakdown": b.name,
                "cell": c.cell,
                **{k: getattr(c.change, k) for k in schema},
                "can_move": c.can_move,
            }
            for b in comparison.breakdowns
            for c in b.changes
        ],
        schema={"breakdown": pl.String, "cell": pl.String} | schema | {"can_move": pl.Boolean},
    )
    items = [
        ("run_a", comparison.run_a),
        ("run_b", comparison.run_b),
        ("judge_a", comparison.judge_a),
        ("judge_b", comparison.judge_b),
        ("verdict", comparison.verdict),
        *(("note", n) for n in comparison.notes),
        *(("warning", w) for w in comparison.warnings),
    ]
    sheets = {"compare": changes, "run": _fields(items)}
    if comparison.breakdowns:
        # Each breakdown one family, adjusted apart from the overall metrics: never gated.
        sheets = {"compare": changes, "breakdowns": by_turn, "run": _fields(items)}
    return sheets


def write_compare_xlsx(comparison: Any, path: Path | str) -> Path:
    """Write ``compare.xlsx`` (the rows B − A and the notes) atomically at ``path``."""
    buffer = io.BytesIO()
    wb = text_workbook(buffer)
    for name, frame in compare_frames(comparison).items():
        _write(frame, wb, name, {"metric": 28, "noise": 36, "field": 12, "value": 120})
    wb.close()
    write_bytes(buffer.getvalue(), Path(path))
    return Path(path)


CALIBRATION_XLSX = "calibration.xlsx"


def calibration_frame(section: CalibrationSection) -> pl.DataFrame:
    """One row per calibration figure, with its interval, its units and the models."""
    return pl.DataFrame(
        [asdict(f) for f in section.figures],
        schema={
            "kind": pl.String,
            "dataset": pl.String,
            "metric": pl.String,
            "family": pl.String,
            "statistic": pl.String,
            "value": pl.Float64,
            "ci_low": pl.Float64,
            "ci_high": pl.Float64,
            "n": pl.Int64,
            "note": pl.String,
            "judge": pl.String,
            "embedder": pl.String,
        },
        orient="row",
    )


def write_calibration_xlsx(section: CalibrationSection, path: Path | str | None = None) -> Path:
    """Write ``calibration.xlsx`` (the figures, and the run's models and warnings) atomically."""
    target = section.target(CALIBRATION_XLSX, path)
    items = [
        ("run_id", section.run_id),
        ("judge", section.judge),
        ("embedder", section.embedder),
        *((f"items {status}", n) for status, n in section.items),
        *(("warning", w) for w in section.warnings),
    ]
    run = _fields(items)
    buffer = io.BytesIO()
    wb = text_workbook(buffer)
    _write(calibration_frame(section), wb, "calibration", {"statistic": 20, "note": 60})
    _write(run, wb, "run", {"field": 20, "value": 100})
    wb.close()
    write_bytes(buffer.getvalue(), target)
    return target


__all__ = [
    "CALIBRATION_XLSX",
    "calibration_frame",
    "compare_frames",
    "grade_noise_frame",
    "write_calibration_xlsx",
    "answers_frame",
    "metric_frame",
    "run_frame",
    "sheet_names",
    "people_frame",
    "summary_frame",
    "text_workbook",
    "write_compare_xlsx",
    "write_xlsx",
]
