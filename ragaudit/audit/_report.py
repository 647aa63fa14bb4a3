"""An audit day's ``report.html``: estimates, by turn, what moved, strata, the worst requests.

The estimates with their intervals per segment (and what they estimate: the population, the
unit, what an interval holds) and by turn position and turn kind, the day against the day
before and the trailing week (one line per segment and cause, then every change with its
split by cause), the strata and what was drawn, the worst requests with their conversation so
far, served documents and grades.

One self-contained page under the same Content-Security-Policy as a run's ``report.html``
(``default-src 'none'``, inline style only, no script): Jinja2 with autoescaping, so every query,
document, answer and reason from the logs is escaped text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from ragaudit.atomic import write_bytes
from ragaudit.audit._drift import change_rows
from ragaudit.audit._moves import moves
from ragaudit.audit._served import conversation_counts
from ragaudit.dataset import Turn, exchanges
from ragaudit.numbers import fixed
from ragaudit.reporting import template_env
from ragaudit.secrets import redact

if TYPE_CHECKING:
    from ragaudit.audit._served import AuditDay, Served

WORST = 20
"""Requests shown in the worst list."""
_TEXT = 600
"""Characters of a served document shown (the whole text is in requests.parquet)."""


def _num(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return fixed(float(value), digits)


def _estimate_rows(estimates: pl.DataFrame | None) -> list[dict[str, Any]]:
    if estimates is None or estimates.is_empty():
        return []
    rows = []
    for r in estimates.sort(["segment", "metric"]).iter_rows(named=True):
        ppi, labelled = r.get("ppi_estimate"), r.get("ppi_n") or 0
        rows.append(
            {
                "segment": r["segment"],
                "metric": r["metric"],
                "estimate": _num(r["estimate"]),
                "ci": f"{_num(r['ci_low'])} – {_num(r['ci_high'])}",
                "n": r.get("n"),
                # An estimated count of the day's requests (a sum of design weights): whole.
                "requests": _num(r.get("requests"), 0),
                "ess": _num(r.get("ess"), 1),
                "method": r.get("method") or "",
                "ppi": None
                if ppi is None
                else f"{_num(ppi)} ({_num(r.get('ppi_ci_low'))} – {_num(r.get('ppi_ci_high'))})",
                "ppi_n": labelled,
            }
        )
    return rows


PART_COLUMNS = ("between", "within", "content", "engine", "new")
"""The parts shown beside each change, in the order they are named."""


def change_table(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every change of a day with its parts beside it (``changes.parquet``'s rows).

    One row per segment × metric × comparison: the figures then and now, the change with its
    interval and adjusted p, whether it moved (and was small), and each part's change, marked
    where it moved beyond noise.
    """
    parts: dict[tuple[str, str, str], dict[str, Mapping[str, Any]]] = {}
    totals = []
    for r in rows:
        key = (str(r["segment"]), str(r["metric"]), str(r["against"]))
        if r.get("part", "total") == "total":
            totals.append(r)
        else:
            parts.setdefault(key, {})[str(r["part"])] = r
    out = []
    for r in sorted(totals, key=lambda r: (r["segment"], r["metric"], r["against"] != "previous")):
        mine = parts.get((str(r["segment"]), str(r["metric"]), str(r["against"])), {})
        out.append(
            {
                "segment": r["segment"],
                "metric": r["metric"],
                "against": "the day before" if r["against"] == "previous" else "the trailing week",
                "reference": _num(r.get("reference")),
                "estimate": _num(r.get("estimate")),
                "diff": fixed(r.get("diff"), sign=True),
                "ci": f"{fixed(r.get('ci_low'), sign=True)} .. "
                f"{fixed(r.get('ci_high'), sign=True)}",
                "p": _num(r.get("p_adjusted"), 4),
                "moved": "small" if r.get("small") else ("moved" if r.get("moved") else ""),
                "cause": r.get("attribution") or "",
                "pairs": r.get("pairs"),
                "parts": [
                    (
                        fixed(mine[name]["diff"], sign=True) if name in mine else "–",
                        bool(name in mine and mine[name].get("moved")),
                    )
                    for name in PART_COLUMNS
                ],
            }
        )
    return out


def strata_rows(strata: pl.DataFrame | None, sample: pl.DataFrame) -> list[dict[str, Any]]:
    """Every stratum of the day (``strata_table``), drawn from or not, with its draws.

    Its units and requests, the expected and realised draws, and the requests its drawn units
    represent (their weights).
    """
    if strata is None or strata.is_empty():
        return []
    represented = (
        dict(sample.group_by("stratum").agg(pl.col("weight").sum()).iter_rows())
        if sample.height
        else {}
    )
    return [
        {
            **r,
            "expected": _num(r["expected"], 1),
            "represented": _num(represented.get(r["stratum"]), 0),
        }
        for r in strata.sort(["segment", "band", "stratum"]).iter_rows(named=True)
    ]


def turn_rows(turns: pl.DataFrame | None) -> list[dict[str, Any]]:
    """The estimates by turn band and turn kind (``estimate_turns``), as the page shows them."""
    if turns is None or turns.is_empty():
        return []
    return [
        {
            "breakdown": "turn position" if r["breakdown"] == "turn_band" else "turn kind",
            "cell": r["cell"],
            "metric": r["metric"],
            "estimate": _num(r["estimate"]),
            "ci": f"{_num(r['ci_low'])} – {_num(r['ci_high'])}",
            "n": r["n"],
            "incomplete": r["incomplete"],
            "requests": _num(r.get("requests"), 0),
            "ess": _num(r.get("ess"), 1),
        }
        for r in turns.sort("metric", maintain_order=True).iter_rows(named=True)
    ]


def shown_history(s: Served, max_exchanges: int) -> tuple[list[Turn], int]:
    """The earlier turns shown above a request: its last ``max_exchanges``, and how many not."""
    parts = exchanges(s.history)
    kept = parts[max(0, len(parts) - max_exchanges) :] if max_exchanges else []
    return [t for e in kept for t in e], len(parts) - len(kept)


def _worst(day: AuditDay, metric: str) -> list[dict[str, Any]]:
    by_request: dict[str, dict[str, Any]] = {}
    for r in day.scores:
        by_request.setdefault(r["request_id"], {})[r["metric"]] = r
    grades: dict[str, dict[int, Mapping[str, Any]]] = {}
    for v in day.verdicts:
        grades.setdefault(v["request_id"], {})[v["rank"]] = v
    ranked = sorted(
        (
            s
            for s in day.served
            if by_request.get(s.request_id, {}).get(metric, {}).get("status") == "ok"
        ),
        key=lambda s: (by_request[s.request_id][metric]["value"], s.request_id),
    )
    out = []
    for s in ranked[:WORST]:
        scores = by_request[s.request_id]
        history, cut = shown_history(s, day.config.conversation.max_history_turns)
        out.append(
            {
                "request_id": s.request_id,
                "segment": s.segment,
                "query": s.query,
                "turn": s.turn,
                "history": [(t.role, t.text[:_TEXT], len(t.text) > _TEXT) for t in history],
                "history_cut": cut,
                "history_incomplete": s.history_incomplete,
                "answer": s.answer,
                "value": _num(scores[metric]["value"]),
                "scores": [
                    (m, _num(r.get("value")) if r["status"] == "ok" else r["status"])
                    for m, r in sorted(scores.items())
                ],
                "docs": [
                    {
                        "rank": d["rank"],
                        "id": d["id"],
                        "text": (d["text"] or "")[:_TEXT],
                        "cut": len(d["text"] or "") > _TEXT,
                        "grade": grades.get(s.request_id, {}).get(d["rank"], {}).get("grade"),
                        "status": grades.get(s.request_id, {}).get(d["rank"], {}).get("status"),
                        "reason": grades.get(s.request_id, {}).get(d["rank"], {}).get("reason"),
                    }
                    for d in s.docs
                ],
            }
        )
    return out


def primary_metric(day: AuditDay) -> str:
    """The metric the worst requests are ranked by: nDCG@k within the served list."""
    return f"ndcg@{day.section.k}"


def render_report(day: AuditDay) -> str:
    """The day's report page."""
    read = day.read
    metric = primary_metric(day)
    redactions: Mapping[str, int] = getattr(read, "redactions", {}) or {}
    rows = change_rows(day.watch.changes) if day.watch is not None else []
    lines = moves(rows, day.day.isoformat())
    bad_samples: Sequence[tuple[str, str]] = getattr(read, "bad_samples", []) or []
    return (
        template_env("ragaudit.audit", trim=False)
        .get_template("report.html.j2")
        .render(
            name=day.section.name,
            day=day.day.isoformat(),
            judge=day.config.models.judge_model,
            records=getattr(read, "records", None),
            bad=getattr(read, "bad", None),
            bad_samples=list(bad_samples)[:10],
            read_notes=list(getattr(read, "notes", [])),
            redactions=sorted(redactions.items()),
            sampled=len(day.served),
            grading=day.grading,
            calls=day.calls,
            k=day.section.k,
            estimates=_estimate_rows(day.estimates),
            lines=[{"kind": m.kind, "text": m.text()} for m in lines],
            changes=change_table(rows),
            parts=PART_COLUMNS,
            compared=day.watch is not None,
            conversations=conversation_counts(day.served),
            max_history_turns=day.config.conversation.max_history_turns,
            turns=turn_rows(day.turn_estimates),
            strata=strata_rows(day.strata, day.sample),
            metric=metric,
            worst=_worst(day, metric),
        )
    )


def write_report(day: AuditDay, path: Path | None = None) -> Path:
    """Write ``report.html`` into the day's folder (atomically)."""
    target = path or day.folder / "report.html"
    # Known secrets never reach a file, whatever a log carried (as every report is written).
    write_bytes(redact(render_report(day)).encode("utf-8"), target)
    return target


__all__ = [
    "PART_COLUMNS",
    "WORST",
    "change_table",
    "primary_metric",
    "render_report",
    "shown_history",
    "strata_rows",
    "turn_rows",
    "write_report",
]
