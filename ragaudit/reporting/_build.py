"""``build_report``: the report model from a run folder alone (its tables and manifest)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from ragaudit import noise, runfolder
from ragaudit.agreement import JudgeOrder, gold_grades, ndcg_at_k
from ragaudit.directions import higher_is_better
from ragaudit.errors import StageError
from ragaudit.labels import has_labels
from ragaudit.reporting._breakdowns import (
    conversation_row,
    split_questions,
    stored_breakdowns,
    summarise_breakdowns,
)
from ragaudit.reporting._calls import read_calls, rollup_calls
from ragaudit.reporting._model import (
    AgreementRow,
    ContextRow,
    GradeNoiseRow,
    JudgeCost,
    JudgeDisagreement,
    JudgeNoiseRow,
    MetricSummary,
    NdcgPoint,
    NuggetRow,
    QuestionRow,
    ReferenceRow,
    Report,
    ScoreCell,
    WorstQuestion,
)
from ragaudit.reporting._summary import stored_rows, summarise, worst_questions
from ragaudit.runfolder import RunFolder, RunState, run_state
from ragaudit.stats import Agreement

if TYPE_CHECKING:
    # Only the annotations: ragaudit.ppi imports the calibration, which imports this package.
    from ragaudit.ppi import JudgeVsPeople, LabelledItem

# Reference answers the score stage reads instead of the question set's (tasks/score.py).
USABLE_REFERENCE = frozenset({"ok", "partial"})


def judge_cost(run: RunFolder) -> JudgeCost | None:
    """Judge calls and prompt tokens per question of the sort stage, from its ``ranking`` table.

    None for a run without the sort stage, or one written before the table counted them.
    """
    if not run.has("ranking"):
        return None
    rows = run.read("ranking").to_pylist()
    if not rows or rows[0].get("relevance_calls") is None:
        return None
    n = len(rows)

    def mean(col: str) -> float:
        return sum(r.get(col) or 0 for r in rows) / n

    return JudgeCost(
        questions=n,
        method=rows[0].get("method"),
        relevance_calls=mean("relevance_calls"),
        relevance_tokens=mean("relevance_tokens"),
        ordering_calls=mean("ordering_calls"),
        ordering_tokens=mean("ordering_tokens"),
        # Version 2 tables have no head_source: no counts, and the line says nothing of reuse.
        head_sources=tuple(
            sorted(Counter(r["head_source"] for r in rows if r.get("head_source")).items())
        ),
        # Version 3 tables have no head_note: nothing said of why heads were ordered afresh.
        fresh_notes=tuple(
            Counter(r["head_note"] for r in rows if r.get("head_note")).most_common()
        ),
    )


def run_folder(run_dir: Path | str) -> RunFolder:
    """The ``RunFolder`` of a run directory."""
    path = Path(run_dir)
    return RunFolder(path.parent, path.name)


def directions(metrics: list[str] | tuple[str, ...]) -> dict[str, bool]:
    """``metric → higher_is_better``, read from ``ragaudit.directions`` (no scorer imported)."""
    return {m: higher_is_better(m) for m in metrics}


def question_set_hash(questions: pl.DataFrame) -> str:
    """Hash of the question set as evaluated: ids, texts, filters and given references."""
    return runfolder.question_set_hash(questions.to_arrow())


def _warnings(manifest: dict[str, Any], run: RunFolder, state: RunState) -> tuple[str, ...]:
    """The manifest's warnings, those its config implies, and the run's state (``run_state``).

    The flow writes the manifest's warnings when it ends, after the report stage has built
    its model; recomputing them from the stored config lets that model carry them too.
    """
    from pydantic import ValidationError

    from ragaudit.config import RunConfig
    from ragaudit.manifest import failure_warnings, judge_warnings

    found = list(manifest.get("warnings", ()))
    # A live run's own report stage reads its folder while it runs: not a finding about it.
    if state.warning and state.status != "running":
        found.insert(0, state.warning)
    if "config" in manifest:
        # A config of another ragaudit version may not validate: keep what was stored.
        with contextlib.suppress(ValidationError):
            found += judge_warnings(RunConfig.model_validate(manifest["config"]), run)
    # A juror failing its calls is in the report even when the report stage ran before the
    # flow wrote the manifest's warnings (the same sentences: deduplicated below).
    found += failure_warnings(run, ["scores", "verdicts"])
    return tuple(dict.fromkeys(found))


def _report_defaults() -> dict[str, Any]:
    from ragaudit.config import ReportConfig

    return ReportConfig().model_dump(mode="json")


def _read(run: RunFolder, name: str) -> pl.DataFrame | None:
    return pl.from_arrow(run.read(name)) if run.has(name) else None  # type: ignore[return-value]


def _by_question(table: pl.DataFrame | None) -> dict[str, dict[str, Any]]:
    if table is None:
        return {}
    return {r["question_id"]: r for r in table.iter_rows(named=True)}


# The nugget metrics share one judging per question: any of them gives the verdicts.
_NUGGET_METRICS = (
    "nugget_recall_vital",
    "nugget_recall_strict_vital",
    "nugget_recall_all",
    "nugget_recall_strict_all",
)


def _nuggets(
    rows: list[dict[str, Any]], cells: dict[str, ScoreCell]
) -> tuple[tuple[NuggetRow, ...], str | None, str | None]:
    """A question's nuggets with the answer's verdicts, its nugget status and note."""
    verdicts: dict[str, dict[str, Any]] = {}
    for name in _NUGGET_METRICS:
        cell = cells.get(name)
        if cell is None or cell.status != "ok" or not cell.reason:
            continue
        try:
            judged = json.loads(cell.reason).get("metric", {}).get("nuggets", [])
        except (ValueError, AttributeError):
            continue
        verdicts = {n["text"]: n for n in judged if isinstance(n, dict) and "text" in n}
        break
    out = []
    for r in sorted(rows, key=lambda r: r["nugget_index"] if r["nugget_index"] is not None else -1):
        if r["text"] is None:
            continue
        v = verdicts.get(r["text"], {})
        out.append(
            NuggetRow(
                index=r["nugget_index"],
                text=r["text"],
                importance=r["importance"],
                context_ids=tuple(r["context_ids"] or ()),
                verdict=v.get("verdict"),
                verdict_reason=v.get("reason"),
            )
        )
    first = rows[0] if rows else {}
    return tuple(out), first.get("status"), first.get("reason")


def _metric_order(scores: pl.DataFrame | None, configured: list[str]) -> tuple[str, ...]:
    present = scores["metric"].unique(maintain_order=True).to_list() if scores is not None else []
    ordered = [m for m in configured if m in present]
    return tuple(ordered + [m for m in present if m not in ordered])


def _score_top_k(score_config: Mapping[str, Any]) -> int:
    from ragaudit.config import ScoreConfig

    return int(score_config.get("top_k") or ScoreConfig().top_k)


def _engine_orders(candidates: pl.DataFrame | None) -> dict[str, list[dict[str, Any]]]:
    """Each question's candidates in engine order (the order the score stage takes its top k)."""
    if candidates is None:
        return {}
    out: dict[str, list[dict[str, Any]]] = {}
    for r in candidates.sort("question_id", "engine_rank").iter_rows(named=True):
        out.setdefault(r["question_id"], []).append(r)
    return out


def _judge_orders(
    ranked: Mapping[str, Mapping[str, Any]], verdicts: Mapping[str, Mapping[str, Mapping[str, Any]]]
) -> dict[str, JudgeOrder]:
    """Each question's judged order and grades as the sort stage held them (its tables)."""
    return {
        qid: JudgeOrder(
            r["ordered_ids"] or [],
            r["tie_group"] or [],
            r["irrelevant_ids"] or [],
            r.get("unjudged_ids") or [],
            grades=_grades(verdicts.get(qid, {})),
        )
        for qid, r in ranked.items()
    }


def _grades(verdicts: Mapping[str, Mapping[str, Any]]) -> dict[str, int] | None:
    # A verdicts table written before grades has no ``grade``: None, so the gains come from
    # the judged order, as that run's agreement table took them.
    if verdicts and all("grade" not in v for v in verdicts.values()):
        return None
    return {cid: v["grade"] for cid, v in verdicts.items() if v.get("grade") is not None}


def _contexts(
    top: list[dict[str, Any]],
    verdicts: Mapping[str, dict[str, Any]],
    judge_place: Mapping[str, int],
    gold: Mapping[str, int] | None,
    supporting: set[str],
) -> tuple[ContextRow, ...]:
    rows = []
    for c in top:
        cid = c["context_id"]
        v = verdicts.get(cid, {})
        rows.append(
            ContextRow(
                context_id=cid,
                text=c["text"],
                engine_rank=c["engine_rank"],
                engine_score=c["engine_score"],
                relevant=v.get("relevant") if v.get("status") == "ok" else None,
                verdict_reason=v.get("reason") or v.get("error"),
                verdict_status=v.get("status"),
                judge_rank=judge_place.get(cid),
                grade=v.get("grade") if v.get("status") == "ok" else None,
                gold_grade=None if gold is None else gold.get(cid, 0),
                supporting=cid in supporting,
                grade_samples=tuple(
                    zip(v.get("grade_judges") or (), v.get("grade_samples") or (), strict=True)
                ),
            )
        )
    return tuple(rows)


def _grade_noise(run: RunFolder) -> tuple[GradeNoiseRow, ...]:
    """The ``grade_noise`` table's rows (none in a run without it, or with one sample)."""
    table = _read(run, "grade_noise")
    if table is None:
        return ()
    fields = GradeNoiseRow.__dataclass_fields__
    return tuple(
        GradeNoiseRow(**{k: v for k, v in r.items() if k in fields})
        for r in table.iter_rows(named=True)
    )


CURVE_MAX_K = 20


def ndcg_curve(
    engine: Mapping[str, Sequence[str]],
    judges: Mapping[str, JudgeOrder],
    gold: Mapping[str, Mapping[str, int] | None],
    max_k: int = CURVE_MAX_K,
) -> tuple[NdcgPoint, ...]:
    """Mean NDCG@k for k = 1..max_k of each comparison of the ``agreement`` table.

    Each question's figure is :func:`ragaudit.agreement.ndcg_at_k`, the one the table holds at
    ``agreement_k`` (graded gains: the judge's grades, the gold grades); the mean is over the
    questions where it is defined, as the table's.
    """
    longest = max((len(order) for order in engine.values()), default=0)
    values: dict[tuple[str, int], list[float]] = {}
    for qid, order in engine.items():
        for k in range(1, min(max_k, longest) + 1):
            figures = ndcg_at_k(order, k, judge=judges.get(qid), gold=gold.get(qid))
            for comparison, v in figures.items():
                values.setdefault((comparison, k), [])
                if not math.isnan(v):
                    values[(comparison, k)].append(v)
    return tuple(
        NdcgPoint(comparison, k, math.fsum(vals) / len(vals) if vals else None, len(vals))
        for (comparison, k), vals in sorted(values.items())
    )


def score_cells(scores: pl.DataFrame) -> dict[str, dict[str, ScoreCell]]:
    """The scores table as question → metric → cell."""
    cells: dict[str, dict[str, ScoreCell]] = {}
    for r in scores.iter_rows(named=True):
        cells.setdefault(r["question_id"], {})[r["metric"]] = ScoreCell(
            metric=r["metric"],
            value=r["value"],
            status=r["status"],
            error=r["error"],
            reason=r["reason"],
            k_used=r["k_used"],
            judge=r["judge"],
            # A run folder written before samples were kept has neither column.
            samples=tuple(r.get("samples") or ()),
            sample_judges=tuple(r.get("sample_judges") or ()),
        )
    return cells


def _stored_noise(run: RunFolder) -> list[JudgeNoiseRow]:
    """The ``judge_noise`` table the report stage wrote, as report rows."""
    out = []
    for r in run.read("judge_noise").to_pylist():
        found = Agreement(
            r["alpha"], r["ci_low"], r["ci_high"], r["n_items"], r["n_raters"], "interval"
        )
        out.append(
            JudgeNoiseRow(
                metric=r["metric"],
                kind=r["kind"],
                judge=r["judge"],
                alpha=r["alpha"],
                ci_low=r["ci_low"],
                ci_high=r["ci_high"],
                n_items=r["n_items"],
                n_raters=r["n_raters"],
                text=found.text,
            )
        )
    return out


# Rows listed per metric where a jury's judges disagree most.
DISAGREEMENTS = 10


def judge_noise(
    metrics: tuple[str, ...],
    cells: Mapping[str, Mapping[str, ScoreCell]],
    texts: Mapping[str, str],
    resamples: int = 999,
) -> tuple[list[JudgeNoiseRow], list[JudgeDisagreement]]:
    """Per metric, the judges' agreement over its rows scored ``ok`` with several samples.

    And the rows whose judges disagree most (a jury only), largest spread first.
    """
    rows: list[JudgeNoiseRow] = []
    apart: list[JudgeDisagreement] = []
    for metric in metrics:
        sampled = [
            (qid, by[metric])
            for qid, by in cells.items()
            if metric in by and by[metric].status == "ok" and len(by[metric].samples) > 1
        ]
        if not sampled:
            continue
        found = noise.score_noise(
            [(c.samples, c.sample_judges) for _, c in sampled], resamples=resamples
        )
        for f in found:
            a = f.agreement
            rows.append(
                JudgeNoiseRow(
                    metric,
                    f.kind,
                    f.judge,
                    a.alpha,
                    a.ci_low,
                    a.ci_high,
                    a.n_items,
                    a.n_raters,
                    a.text,
                )
            )
        spreads = []
        for qid, cell in sampled:
            means = noise.judge_means(cell.samples, cell.sample_judges)
            known = [v for v in means.values() if v is not None]
            if len(known) > 1 and max(known) > min(known):
                spreads.append((max(known) - min(known), qid, means))
        spreads.sort(key=lambda x: (-x[0], x[1]))
        apart += [
            JudgeDisagreement(metric, qid, texts.get(qid, ""), means, spread)
            for spread, qid, means in spreads[:DISAGREEMENTS]
        ]
    return rows, apart


@dataclass(frozen=True)
class PeopleSection:
    """What people's labels add to a report: the judge against them, and the items labelled."""

    people: JudgeVsPeople | None
    labelled: tuple[LabelledItem, ...]


NO_PEOPLE = PeopleSection(None, ())


def people_section(run_dir: Path | str) -> PeopleSection:
    """The run's labels against its judge (:data:`NO_PEOPLE` without a labels store).

    The costly part of a report after a label (the agreement figures' bootstrap): the viewer
    keeps it per labels signature and puts it on a report built without it
    (:func:`with_people`), so a label never rebuilds the rest.
    """
    path = Path(run_dir)
    if not has_labels(path):
        return NO_PEOPLE
    from ragaudit.ppi import judge_vs_people, people_labels

    return PeopleSection(judge_vs_people(path), tuple(people_labels(path)))


def with_people(base: Report, section: PeopleSection) -> Report:
    """``base`` (built with :data:`NO_PEOPLE`) with ``section``'s figures and labels.

    People's labels may be newer than the stored summary: their PPI columns are recomputed.
    """
    if section.people is None and not section.labelled:
        return base
    summary = base.summary
    if section.people is not None:
        from ragaudit.ppi import summary_columns

        summary = tuple(
            dataclasses.replace(s, **summary_columns(section.people, s.metric)) for s in summary
        )
    return dataclasses.replace(
        base, summary=summary, people=section.people, labelled=section.labelled
    )


def build_report(run_dir: Path | str) -> Report:
    """The report model of the run folder ``run_dir``, people's labels included.

    The summary is read from ``summary.parquet`` when the report stage wrote it (so every
    rendering shows the same digits), else computed from ``scores`` with the run's report
    config.

    Raises:
        StageError: ``run_dir`` is not a run folder (no manifest and no tables).
    """
    return with_people(build_base(run_dir), people_section(run_dir))


def build_base(run_dir: Path | str) -> Report:
    """The report model of ``run_dir`` without people's labels (:func:`build_report`'s rest).

    Raises:
        StageError: ``run_dir`` is not a run folder (no manifest and no tables).
    """
    run = run_folder(run_dir)
    manifest = run.read_manifest()
    if not manifest and not any(run.path.glob("*.parquet")):
        raise StageError(f"{run.path}: not a run folder (no manifest.json and no tables)")
    config = manifest.get("config", {})
    score_config = config.get("score", {})
    report_config = {**_report_defaults(), **config.get("report", {})}
    models = manifest.get("models", {})

    scores = _read(run, "scores")
    metrics = _metric_order(scores, list(score_config.get("metrics", ())))
    up = directions(metrics)

    summary: list[MetricSummary]
    summary_table = run.read("summary").to_pylist() if run.has("summary") else None
    if summary_table is not None:
        summary = [
            MetricSummary(**r, higher_is_better=up.get(r["metric"], True))
            for r in stored_rows(summary_table)[0]
        ]
    elif scores is not None:
        summary = summarise(
            scores, report_config["thresholds"], report_config["bootstrap_samples"], up
        )
    else:
        summary = []

    questions = _read(run, "questions")
    answers = _read(run, "answers")
    truth = _read(run, "ground_truth")
    answer_by = _by_question(answers)
    truth_by = _by_question(truth)
    nugget_table = _read(run, "nuggets")
    nugget_rows: dict[str, list[dict[str, Any]]] = {}
    if nugget_table is not None:
        for r in nugget_table.iter_rows(named=True):
            nugget_rows.setdefault(r["question_id"], []).append(r)
    engine = _engine_orders(_read(run, "candidates"))
    verdicts: dict[str, dict[str, dict[str, Any]]] = {}
    verdict_table = _read(run, "verdicts")
    if verdict_table is not None:
        for r in verdict_table.iter_rows(named=True):
            verdicts.setdefault(r["question_id"], {})[r["context_id"]] = r
    ranked = _by_question(_read(run, "ranking"))
    top_k = _score_top_k(score_config)
    golds: dict[str, dict[str, int] | None] = {}
    # The candidates the sort stage judged and compared (``sort.max_candidates``).
    judged_candidates = config.get("sort", {}).get("max_candidates") or None
    stored = {q.question_id: q for q in run.questions()} if questions is not None else {}
    cells = score_cells(scores) if scores is not None else {}
    rows: list[QuestionRow] = []
    texts: dict[str, str] = {}
    if questions is not None:
        for q in questions.iter_rows(named=True):
            qid = q["question_id"]
            texts[qid] = q["question"]
            answer = answer_by.get(qid, {})
            ref = truth_by.get(qid)
            reference = (
                ref["reference"] if ref and ref["status"] in USABLE_REFERENCE else q["reference"]
            )
            supporting = tuple(ref["supporting_ids"] or ()) if ref else ()
            # The curve's gold is the sort stage's (its candidates); the drill-down's, all of them.
            golds[qid] = gold_grades(stored[qid], engine.get(qid, [])[:judged_candidates])
            order = (ranked.get(qid) or {}).get("ordered_ids") or []
            nuggets, nuggets_status, nuggets_note = _nuggets(
                nugget_rows.get(qid, []), cells.get(qid, {})
            )
            rows.append(
                QuestionRow(
                    question_id=qid,
                    question=q["question"],
                    answer=answer.get("response", q.get("response")),
                    answer_status=answer.get("status"),
                    reference=reference,
                    language=q["language"],
                    scores=cells.get(qid, {}),
                    reference_status=ref["status"] if ref else None,
                    supporting_ids=supporting,
                    contexts=_contexts(
                        engine.get(qid, [])[:top_k],
                        verdicts.get(qid, {}),
                        {cid: i + 1 for i, cid in enumerate(order)},
                        gold_grades(stored[qid], engine.get(qid, [])),
                        set(supporting),
                    ),
                    nuggets=nuggets,
                    nuggets_status=nuggets_status if nugget_table is not None else None,
                    nuggets_note=nuggets_note,
                    conversation=conversation_row(stored[qid], q.get("conversation")),
                )
            )
    split = split_questions(list(stored.values()))
    found = stored_breakdowns(split, summary_table or [], up)
    if found is None and scores is not None:
        # A summary written before breakdowns (or none): the figures from the scores.
        found = summarise_breakdowns(
            split, scores, report_config["thresholds"], report_config["bootstrap_samples"], up
        )
    curve = ndcg_curve(
        {
            qid: [c["context_id"] for c in cands[:judged_candidates]]
            for qid, cands in engine.items()
        },
        _judge_orders(ranked, verdicts),
        golds,
    )

    worst = (
        [
            WorstQuestion(w.metric, w.question_id, w.value, texts.get(w.question_id, ""))
            for w in worst_questions(scores, int(report_config["worst"]), up)
        ]
        if scores is not None
        else []
    )
    agreement_df = _read(run, "agreement")
    agreement = (
        [
            AgreementRow(
                question_id=r["question_id"],
                comparison=r["comparison"],
                metric=r["metric"],
                k=r["k"],
                value=r["value"],
                n_questions=r["n_questions"],
                status=r["status"],
                reason=r["reason"],
            )
            for r in agreement_df.iter_rows(named=True)
        ]
        if agreement_df is not None
        else []
    )
    references = (
        [
            ReferenceRow(
                question_id=r["question_id"],
                status=r["status"],
                origin=r["origin"],
                mode=r["mode"],
                error=r["error"],
                n_supporting=len(r["supporting_ids"] or []),
                calls=r["calls"],
                tokens_in=r["tokens_in"],
                tokens_out=r["tokens_out"],
            )
            for r in truth.iter_rows(named=True)
        ]
        if truth is not None
        else []
    )
    per_stage, total = rollup_calls(read_calls(run.calls_dir))
    noise_rows, disagreements = judge_noise(metrics, cells, texts)
    if run.has("judge_noise"):
        # The report stage's figures, as the summary's: every rendering shows the same digits.
        noise_rows = _stored_noise(run)
    state = run_state(run.path)
    return Report(
        run_id=run.run_id,
        run_dir=run.path,
        status=manifest.get("status"),
        started_at=manifest.get("started_at"),
        finished_at=manifest.get("finished_at"),
        judge=models.get("judge"),
        embedder=models.get("embedder"),
        generator=models.get("generator"),
        warnings=_warnings(manifest, run, state),
        incomplete=state.warning,
        questions_file=config.get("questions"),
        question_set_hash=question_set_hash(questions) if questions is not None else None,
        metrics=metrics,
        summary=tuple(summary),
        questions=tuple(rows),
        worst=tuple(worst),
        agreement=tuple(agreement),
        references=tuple(references),
        calls=per_stage,
        calls_total=total,
        prompt_versions=total.prompt_versions if total else (),
        score_config=score_config,
        report_config=report_config,
        timings=manifest.get("timings", {}),
        ndcg_curve=curve,
        manifest=manifest,
        grade_noise=_grade_noise(run),
        judge_cost=judge_cost(run),
        judge_noise=tuple(noise_rows),
        judge_disagreements=tuple(disagreements),
        breakdowns=found or (),
    )


__all__ = [
    "CURVE_MAX_K",
    "DISAGREEMENTS",
    "NO_PEOPLE",
    "USABLE_REFERENCE",
    "PeopleSection",
    "build_base",
    "build_report",
    "directions",
    "judge_noise",
    "ndcg_curve",
    "people_section",
    "score_cells",
    "with_people",
    "question_set_hash",
    "run_folder",
]
