"""A calibration run: its inputs from files or the bundled data, its run folder, its tables."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from ragaudit import runfolder
from ragaudit.cache import Gateway, hold_gateway, items_in_flight
from ragaudit.calibration._data import load_halueval, load_labels, load_wikieval
from ragaudit.calibration._grades import (
    calibrate_judge_grades,
    load_grade_labels,
)
from ragaudit.calibration._run import BUNDLED, Calibration, CalibrationInputs, run_calibration
from ragaudit.calibration._scenarios import make_scenarios
from ragaudit.config import RunConfig
from ragaudit.dataset import load_questions
from ragaudit.judging import Judge
from ragaudit.manifest import base_manifest, judge_warnings
from ragaudit.metrics import Deps
from ragaudit.reporting import CALIBRATION_META, write_calibration_report
from ragaudit.runfolder import FolderRun, RunFolder, write_json
from ragaudit.schemas import CALIBRATION, CALIBRATION_GRADES, CALIBRATION_SCORES, to_table
from ragaudit.scoring import make_deps
from ragaudit.search import read_corpus


def gather_inputs(
    *,
    wikieval: Path | None = None,
    halueval: Path | None = None,
    labels: Path | None = None,
    scenarios_from: Path | None = None,
    grade_labels: Path | None = None,
    corpus: Path | None = None,
    limit: int | None = None,
    seed: int = 0,
) -> CalibrationInputs:
    """The inputs named, or with none named the bundled data and the demo's scenarios."""
    if not any((wikieval, halueval, labels, scenarios_from, grade_labels)):
        wikieval = BUNDLED / "wikieval"
        halueval = BUNDLED / "halueval" / "qa_samples.jsonl"
        demo = BUNDLED.parent / "demo"
        scenarios_from, corpus = demo / "questions.jsonl", demo / "corpus.jsonl"
    labelled = []
    if wikieval:
        labelled += load_wikieval(wikieval, limit)
    if halueval:
        labelled += load_halueval(halueval, limit)
    if labels:
        labelled += load_labels(labels)
    rows = []
    if scenarios_from:
        docs = read_corpus(corpus) if corpus is not None else []
        rows = make_scenarios(load_questions(scenarios_from, limit=limit), docs, seed=seed)
    grades = load_grade_labels(grade_labels) if grade_labels else []
    return CalibrationInputs(labelled, rows, grades)


def metric_deps(config: RunConfig, gateway: Gateway) -> Deps:
    """The models and score options the metrics use, as a run with ``config`` gives them."""
    return make_deps(config, Judge.from_config(config.models, gateway, items_in_flight(config)))


async def calibrate(
    config: RunConfig,
    inputs: CalibrationInputs,
    *,
    threshold: float = 0.5,
    gateway: Gateway | None = None,
    limit: int | None = None,
) -> tuple[Calibration, RunFolder, list[str]]:
    """Calibrate the configured judge.

    Writes the ``calibration`` and ``calibration_scores`` tables (and ``calibration_grades``,
    the judge's grade of every human-graded context, when the inputs hold human grades),
    ``calibration.json`` (the run's manifest: config, code, packages, models, warnings, the
    per-grade calibration) and the pages rendered from them alone: ``report.html`` and
    ``calibration.xlsx``.

    Args:
        config: the run's config (models, score options, runs root, run id).
        inputs: the labelled items and scenario rows to score.
        threshold: cut of scores and labels for kappa and accuracy.
        gateway: the gateway to call through; None holds the config's own for the run.
        limit: items scored at once; None keeps the gateway's call limit busy.
    """
    run_id = config.resolved_run_id(prefix="calibrate")
    run = RunFolder(config.runs_root, run_id)
    # The calibration's folder is a run of the calibration kind: locked while it scores (a
    # second one into it is refused before paying), ``interrupted`` or ``failed`` when it stops.
    with FolderRun(run.path, runfolder.CALIBRATION.name, config) as folder_run:
        result, warnings = await _calibrate(
            config, inputs, run, threshold=threshold, gateway=gateway, limit=limit
        )
        folder_run.finish("completed", warnings=warnings)
    return result, run, warnings


async def _calibrate(
    config: RunConfig,
    inputs: CalibrationInputs,
    run: RunFolder,
    *,
    threshold: float,
    gateway: Gateway | None,
    limit: int | None,
) -> tuple[Calibration, list[str]]:
    run_id = run.run_id
    started = time.perf_counter()
    # The scope writes the call log into the run folder as the calls are made.
    held = contextlib.nullcontext(gateway) if gateway is not None else hold_gateway(config)
    with held as gw, gw.scope("calibrate", run_id=run_id, calls_dir=run.calls_dir) as counts:
        in_flight = limit if limit is not None else items_in_flight(config)
        # One judge for the metrics and the grades: its window worked out once.
        judge = Judge.from_config(config.models, gw, in_flight)
        deps = make_deps(config, judge)
        assert judge.window is not None  # from_config always works one out
        result = await run_calibration(
            inputs, deps, window=judge.window, threshold=threshold, limit=in_flight
        )
        if inputs.grade_labels:
            result.grades = await calibrate_judge_grades(
                inputs.grade_labels,
                judge,
                relevant_grade=config.sort.relevant_grade,
                run_id=run_id,
            )
            result.figures += result.grades.figures(deps.embedder)
    run.write(
        "calibration", to_table([{"run_id": run_id, **f} for f in result.figures], CALIBRATION)
    )
    rows: list[dict[str, Any]] = [
        {"run_id": run_id, **{k: v for k, v in r.items() if k in CALIBRATION_SCORES.names}}
        for r in result.scores
    ]
    run.write("calibration_scores", to_table(rows, CALIBRATION_SCORES))
    if result.grades is not None:
        run.write("calibration_grades", to_table(result.grades.rows, CALIBRATION_GRADES))
    warnings = judge_warnings(config)
    write_json(
        {
            **base_manifest(config, run_id),
            "kind": "calibration",
            "threshold": threshold,
            "warnings": warnings,
            "seconds": round(time.perf_counter() - started, 3),
            "llm": counts.as_dict(),
            "items": {
                "labelled": len(inputs.labelled),
                "scenario_rows": len(inputs.scenarios),
                "grade_labels": len(inputs.grade_labels),
            },
            **({"grade_calibration": result.grades.as_dict()} if result.grades else {}),
        },
        run.path / CALIBRATION_META,
    )
    write_calibration_report(run.path)
    return result, warnings


__all__ = ["calibrate", "gather_inputs", "metric_deps"]
