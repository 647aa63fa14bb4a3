"""A day's moves as lines: one per (day, segment, cause), naming each metric that moved.

A change of a segment's figure is tested against the day before and against the trailing
week, metric by metric, and split by cause (``changes.parquet``, one row per segment × metric
× comparison × part). One event moves several of those rows at once — an engine change moves
nDCG, DCG, precision and the relevant share of its segment, against both references — so the
rows a reader acts on are grouped: the rows of one segment and one cause are one line, naming
the metrics that moved and each one's change against each reference that saw it. The console,
``report.html``, the viewer and the regression event print these lines; the full table stays
beside them.

What a line is (:data:`KINDS`): an ``alarm`` (a move for the worse by at least the metric's
``audit.min_change`` whose cause is the service's — engine, content — or the judge's, or that
nothing explains), ``traffic`` (the traffic's own doing: the mix between segments, the mix
within one, new queries), ``better``, or ``small`` (beyond noise, under the minimum: raises
nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragaudit.directions import label
from ragaudit.numbers import fixed

KINDS = ("alarm", "traffic", "better", "small")
"""What a line is, the most pressing first."""
AGAINST = {"previous": "the day before", "baseline": "the trailing week"}
_HEADS = {
    "alarm": "regressed",
    "traffic": "moved with the traffic",
    "better": "improved",
    "small": "moved a little (under audit.min_change)",
}


@dataclass(frozen=True)
class MetricMove:
    """One metric's change in a line, against one reference."""

    metric: str
    against: str
    diff: float
    ci_low: float | None
    ci_high: float | None
    kind: str


@dataclass(frozen=True)
class Move:
    """One line: the moves of one (day, segment, cause)."""

    day: str
    segment: str
    cause: str
    kind: str
    metrics: tuple[MetricMove, ...]
    behind: tuple[str, ...] = ()
    """The overall line's segments behind it, each with its share of the change."""
    reasons: tuple[str, ...] = ()

    @property
    def against(self) -> tuple[str, ...]:
        """The references the moves were seen against (the day before first)."""
        seen = {m.against for m in self.metrics}
        return tuple(a for a in AGAINST if a in seen)

    def text(self) -> str:
        """The line as printed: segment, what it is, its cause, each metric's change."""
        per_metric: dict[str, list[MetricMove]] = {}
        for m in self.metrics:
            per_metric.setdefault(m.metric, []).append(m)
        shown = []
        for metric, moves in per_metric.items():
            against = [
                f"{fixed(m.diff, sign=True)} ({fixed(m.ci_low, sign=True)} .. "
                f"{fixed(m.ci_high, sign=True)}) against {AGAINST.get(m.against, m.against)}"
                + (" (small)" if m.kind == "small" and self.kind != "small" else "")
                for m in sorted(moves, key=lambda m: list(AGAINST).index(m.against))
            ]
            shown.append(f"{label(metric)} {', '.join(against)}")
        text = f"{self.segment} {_HEADS[self.kind]}, {self.cause}: {'; '.join(shown)}"
        if self.behind:
            text += f" — from {', '.join(self.behind)}"
        if self.reasons:
            text += f" — {'; '.join(self.reasons)}"
        return text

    def to_dict(self) -> dict[str, Any]:
        """The line as the event payload and the summary carry it."""
        return {
            "day": self.day,
            "segment": self.segment,
            "cause": self.cause,
            "kind": self.kind,
            "against": list(self.against),
            "metrics": [vars(m) for m in self.metrics],
            "behind": list(self.behind),
            "reasons": list(self.reasons),
            "text": self.text(),
        }


def _rows_v1(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """A row of a ``changes.parquet`` written before the split: its whole change, its cause."""
    if "part" in row:
        return row
    if not row.get("moved"):
        return {**row, "part": "total", "kind": None}
    kind = "alarm" if row.get("regressed") else "better"
    return {**row, "part": "total", "kind": kind, "cause": row.get("attribution") or "unexplained"}


def moves(rows: Sequence[Mapping[str, Any]], day: str) -> list[Move]:
    """The lines of a day's ``changes.parquet`` rows: one per (segment, cause), alarms first.

    A line's kind is its most pressing row's; the overall line names the segments behind its
    largest row.
    """
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for raw in rows:
        row = _rows_v1(raw)
        if not row.get("kind"):
            continue
        groups.setdefault((str(row["segment"]), str(row["cause"])), []).append(row)
    out = []
    for (segment, cause), members in groups.items():
        kind = min((str(r["kind"]) for r in members), key=KINDS.index)
        largest = max(members, key=lambda r: abs(float(r["diff"])))
        reasons = dict.fromkeys(str(x) for r in members for x in (r.get("reasons") or []))
        out.append(
            Move(
                day=day,
                segment=segment,
                cause=cause,
                kind=kind,
                metrics=tuple(
                    MetricMove(
                        metric=str(r["metric"]),
                        against=str(r["against"]),
                        diff=float(r["diff"]),
                        ci_low=r.get("ci_low"),
                        ci_high=r.get("ci_high"),
                        kind=str(r["kind"]),
                    )
                    for r in members
                ),
                behind=tuple(str(x) for x in (largest.get("behind") or [])),
                reasons=tuple(reasons),
            )
        )
    return sorted(out, key=lambda m: (KINDS.index(m.kind), m.segment.startswith("("), m.segment))


__all__ = ["AGAINST", "KINDS", "MetricMove", "Move", "moves"]
