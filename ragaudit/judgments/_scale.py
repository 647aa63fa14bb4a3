"""Grade scales: how a source writes a grade, mapped to ragaudit's 0–3 and back.

Every tool writes grades its own way: Quepid and ``_rank_eval`` integers (0–3, 0–1, 1–4, 0–10),
SRW strings of floats (``"3.000"``; ``"0.9"`` for its LLM judgments; ``"100.000"`` in its ESCI
data), UBI click models COEC ratios (clicks over expected clicks, unbounded). A
:class:`GradeScale` declares one such scale: the three cuts that map a value to a grade 0–3, the
value written back for each grade, how many decimals it is written with, its bounds, and the
values meaning "could not rate". Each import stores its scale beside every row together with
the value as the source wrote it, so an export to the same scale writes that value back
exactly, and an export to another scale writes the grade's mark in it (and says so in its loss
report).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ragaudit.errors import InputError
from ragaudit.hashing import canonical_json


class GradeScale(BaseModel):
    """A source's grade scale and its reversible mapping to ragaudit's grades 0–3.

    A value ``v`` gets the grade ``#{c in cuts : v >= c}``; grade ``g`` is written as
    ``marks[g]`` with ``decimals`` digits after the point.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "custom"
    """What the scale is called in reports (``0-3``, ``unit``, ``coec``)."""
    cuts: tuple[float, float, float]
    """Ascending lower bounds of grades 1, 2 and 3 (equal cuts skip a grade; ``inf``: never)."""
    marks: tuple[float, float, float, float]
    """The value written for grades 0, 1, 2 and 3 (each mark maps back to its own grade)."""
    decimals: int = Field(0, ge=0, le=6)
    """Digits after the point when a value is written (``"3.000"``: 3; integers: 0)."""
    low: float | None = None
    """The smallest value the source writes (None: unbounded); smaller values are refused."""
    high: float | None = None
    """The largest value the source writes (None: unbounded); larger values are refused."""
    unrateable: tuple[str, ...] = ()
    """Values the source writes for a pair its rater could not rate (``"-1"``)."""

    @model_validator(mode="after")
    def _consistent(self) -> GradeScale:
        if list(self.cuts) != sorted(self.cuts):
            raise ValueError(f"cuts {list(self.cuts)} are not ascending")
        for grade, mark in enumerate(self.marks):
            # A scale of fewer than four steps writes two grades alike (binary: 0 and 1 as 0):
            # such a mark maps back to one of them, any other mark to its own grade.
            shared = sum(m == mark for m in self.marks) > 1
            if self.grade_of(mark) != grade and not shared:
                raise ValueError(
                    f"mark {mark} of grade {grade} maps back to grade {self.grade_of(mark)}"
                )
        return self

    @property
    def key(self) -> str:
        """The scale as stored beside each row (canonical JSON)."""
        return canonical_json(self.model_dump(mode="json"))

    def grade_of(self, value: float) -> int:
        """The grade 0–3 of ``value``."""
        return sum(value >= c for c in self.cuts)

    def write(self, grade: int) -> str:
        """Grade ``grade`` written in this scale."""
        return number_text(self.marks[grade], self.decimals)

    def lossless(self) -> bool:
        """Whether every grade has its own mark (four distinct values)."""
        return len(set(self.marks)) == 4

    def grades(self, values: pl.Expr) -> pl.Expr:
        """The grade of each value (a string column), null where it is not a number."""
        v = values.str.strip_chars().cast(pl.Float64, strict=False)
        total = pl.lit(0, dtype=pl.Int64)
        for cut in self.cuts:
            total = total + (v >= cut).cast(pl.Int64)
        return pl.when(v.is_not_null()).then(total).otherwise(None)

    def written(self, grades: pl.Expr) -> pl.Expr:
        """Each grade (an integer column) written in this scale."""
        return grades.replace_strict(
            {g: self.write(g) for g in range(4)}, default=None, return_dtype=pl.String
        )


def number_text(value: float, decimals: int) -> str:
    """A number as a scale writes it: ``3`` at 0 decimals, ``3.000`` at 3."""
    if decimals == 0:
        return str(int(round(value)))
    return f"{value:.{decimals}f}"


def _evenly(low: float, high: float, decimals: int, name: str) -> GradeScale:
    step = (high - low) / 3
    marks = tuple(round(low + g * step, decimals) for g in range(4))
    cuts = tuple((marks[g] + marks[g + 1]) / 2 for g in range(3))
    return GradeScale(
        name=name,
        cuts=cuts,  # type: ignore[arg-type]
        marks=marks,  # type: ignore[arg-type]
        decimals=decimals,
        low=low,
        high=high,
    )


def from_points(points: list[float], name: str | None = None) -> GradeScale:
    """The scale of a list of allowed values (a Quepid book's ``scale``, ``[0, 1, 2, 3]``).

    Two points are binary: the higher is relevant (grade 2), written for grades 2 and 3. Four
    points are grades 0–3 in order. Other counts are spread evenly over 0–3.
    """
    pts = sorted({float(p) for p in points})
    label = name or "-".join(number_text(p, 0) for p in (pts[0], pts[-1]))
    if len(pts) < 2:
        raise InputError(f"a scale of {len(pts)} point(s) cannot grade anything: {points}")
    decimals = 0 if all(p == int(p) for p in pts) else 3
    if len(pts) == 2:
        lo, hi = pts
        mid = (lo + hi) / 2
        return GradeScale(
            name=label,
            cuts=(mid, mid, math.inf),
            marks=(lo, lo, hi, hi),
            decimals=decimals,
            low=lo,
            high=hi,
        )
    if len(pts) == 4:
        cuts = tuple((pts[g] + pts[g + 1]) / 2 for g in range(3))
        return GradeScale(
            name=label,
            cuts=cuts,  # type: ignore[arg-type]
            marks=tuple(pts),  # type: ignore[arg-type]
            decimals=decimals,
            low=pts[0],
            high=pts[-1],
        )
    return _evenly(pts[0], pts[-1], decimals, label)


SCALES: dict[str, GradeScale] = {
    "0-3": _evenly(0, 3, 0, "0-3"),
    "0-1": from_points([0, 1], "0-1"),
    "0-4": GradeScale(
        name="0-4",
        # 3 and 4 both count as the top grade's neighbourhood: 3 "excellent" stays highly
        # relevant (2), 4 "perfect" is 3; written back, grade 2 is 2 and grade 3 is 4.
        cuts=(0.5, 1.5, 3.5),
        marks=(0, 1, 2, 4),
        decimals=0,
        low=0,
        high=4,
    ),
    "1-4": from_points([1, 2, 3, 4], "1-4"),
    "0-10": _evenly(0, 10, 0, "0-10"),
    "srw": GradeScale(
        name="srw", cuts=(0.5, 1.5, 2.5), marks=(0, 1, 2, 3), decimals=3, low=0, high=3
    ),
    "unit": GradeScale(
        name="unit",
        cuts=(0.25, 0.5, 0.75),
        marks=(0.0, 0.333, 0.667, 1.0),
        decimals=3,
        low=0,
        high=1,
    ),
    "coec": GradeScale(
        # Clicks over expected clicks: 1 is a document clicked as often as its rank predicts.
        name="coec",
        cuts=(0.5, 1.0, 2.0),
        marks=(0.0, 0.75, 1.5, 3.0),
        decimals=3,
        low=0,
    ),
    "esci": GradeScale(
        # Amazon's ESCI labels as SRW's test data writes them: irrelevant 0, complement 1,
        # substitute 10, exact 100.
        name="esci",
        cuts=(0.5, 5.0, 50.0),
        marks=(0, 1, 10, 100),
        decimals=3,
        low=0,
        high=100,
    ),
}
"""The named scales ``--scale`` takes; any other scale is given as JSON or YAML."""

RAGAUDIT = SCALES["0-3"]
"""The judge's scale: grades 0–3 written as integers."""


def scale_of(spec: str | GradeScale | None, default: GradeScale) -> GradeScale:
    """The scale ``spec`` names: a built-in name, inline JSON/YAML, or a YAML/JSON file.

    Raises:
        InputError: An unknown name, or a definition that is not a valid scale.
    """
    if spec is None:
        return default
    if isinstance(spec, GradeScale):
        return spec
    text = spec.strip()
    if text in SCALES:
        return SCALES[text]
    path = Path(text)
    source = f"--scale {text}"
    if not text.startswith(("{", "[")) and path.suffix.lower() in {".yaml", ".yml", ".json"}:
        if not path.is_file():
            raise InputError(f"{source}: file not found")
        text = path.read_text(encoding="utf-8")
    elif not text.startswith(("{", "[")):
        raise InputError(
            f"{source}: not a scale name (known: {', '.join(SCALES)}), inline JSON or a file"
        )
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{source}: not JSON or YAML ({exc})") from None
    if isinstance(data, list):
        return from_points(data)
    try:
        return GradeScale.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'scale'}: {e['msg']}" for e in exc.errors()
        )
        raise InputError(f"{source}: {problems}") from None


def stored_scale(key: str | None) -> GradeScale:
    """The scale a stored row names (the judge's 0–3 when it names none)."""
    if not key:
        return RAGAUDIT
    return GradeScale.model_validate(json.loads(key))


__all__ = ["RAGAUDIT", "SCALES", "GradeScale", "from_points", "number_text", "scale_of"]
