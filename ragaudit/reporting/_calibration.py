"""The calibration section of a report: a calibration run folder read into frozen dataclasses."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ragaudit.runfolder import RunFolder


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


def build_calibration(run_dir: Path | str) -> CalibrationSection | None:
    """The calibration section of a run folder, or None when it holds no calibration."""
    run_dir = Path(run_dir)
    run = RunFolder(run_dir.parent, run_dir.name)
    if not run.has("calibration"):
        return None
    meta_path = run_dir / "calibration.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    models = meta.get("models", {})
    figures = tuple(
        CalibrationFigure(**{k: v for k, v in row.items() if k != "run_id"})
        for row in run.rows("calibration")
    )
    return CalibrationSection(
        run_id=run.run_id,
        judge=models.get("judge"),
        embedder=models.get("embedder"),
        warnings=tuple(meta.get("warnings", [])),
        figures=figures,
    )


__all__ = ["CalibrationFigure", "CalibrationSection", "build_calibration"]
