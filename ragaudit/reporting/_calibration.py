"""The calibration section of a report: a calibration run folder read into frozen dataclasses."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragaudit.manifest import failure_warnings
from ragaudit.reporting._calls import read_calls, rollup_calls
from ragaudit.reporting._model import StageCalls
from ragaudit.runfolder import RunFolder

CALIBRATION_META = "calibration.json"
"""What a calibration run records about itself beside its tables (its manifest)."""


@dataclass(frozen=True)
class CalibrationFigure:
    """One figure of ``calibration.parquet``."""

    kind: str
    dataset: str
    metric: str
    family: str | None
    statistic: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    note: str
    judge: str
    embedder: str


@dataclass(frozen=True)
class CalibrationSection:
    """Every figure of one calibration, the models that produced them and their warnings."""

    run_id: str
    judge: str | None
    embedder: str | None
    warnings: tuple[str, ...]
    figures: tuple[CalibrationFigure, ...]
    run_dir: Path | None = None
    manifest: dict[str, Any] = field(default_factory=dict)
    items: tuple[tuple[str, int], ...] = ()
    """Scored items per status (ok, failed, skipped)."""
    calls: tuple[StageCalls, ...] = ()
    calls_total: StageCalls | None = None

    def of_kind(self, *kinds: str) -> tuple[CalibrationFigure, ...]:
        """The figures of the given kinds, in table order."""
        return tuple(f for f in self.figures if f.kind in kinds)

    def target(self, name: str, path: Path | str | None = None) -> Path:
        """Where a file of the calibration goes: ``path``, else ``name`` in its run folder.

        Raises:
            ValueError: no ``path`` and the section has no run folder.
        """
        if path is not None:
            return Path(path)
        if self.run_dir is None:
            raise ValueError(f"the calibration section has no run folder: give a path for {name}")
        return Path(self.run_dir) / name


def build_calibration(run_dir: Path | str) -> CalibrationSection | None:
    """The calibration section of a run folder, or None when it holds no calibration."""
    run_dir = Path(run_dir)
    run = RunFolder(run_dir.parent, run_dir.name)
    if not run.has("calibration"):
        return None
    meta_path = run_dir / CALIBRATION_META
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    models = meta.get("models", {})
    figures = tuple(
        CalibrationFigure(**{k: v for k, v in row.items() if k != "run_id"})
        for row in run.rows("calibration")
    )
    items: dict[str, int] = {}
    if run.has("calibration_scores"):
        for status in run.read("calibration_scores").column("status").to_pylist():
            items[status] = items.get(status, 0) + 1
    per_stage, total = rollup_calls(read_calls(run.calls_dir))
    warnings = list(meta.get("warnings", []))
    warnings += [w for w in failure_warnings(run, ["calibration_scores"]) if w not in warnings]
    return CalibrationSection(
        run_id=run.run_id,
        judge=models.get("judge"),
        embedder=models.get("embedder"),
        warnings=tuple(warnings),
        figures=figures,
        run_dir=run_dir,
        manifest=meta,
        items=tuple(sorted(items.items())),
        calls=per_stage,
        calls_total=total,
    )


__all__ = ["CALIBRATION_META", "CalibrationFigure", "CalibrationSection", "build_calibration"]
