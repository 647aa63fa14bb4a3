"""A tune's folder: its table, qrels, run files, ``best.yaml``, ``tune.json`` and report.

``tune.parquet``, ``pool.qrels.txt``, ``run.<variant>.txt`` and a self-contained ``report.html``.
The page is Jinja2 with autoescaping under a ``default-src 'none'`` Content-Security-Policy, and
its charts are the report's own Altair → Vega-Lite → SVG path: everything from the engine, the
corpus and the judge is escaped text.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import altair as alt
import numpy as np
import yaml

from ragaudit.atomic import write_bytes, write_json, write_table
from ragaudit.numbers import fixed
from ragaudit.reporting import chart_svg, configure_chart, template_env
from ragaudit.schemas import TUNE, TUNE_TURNS, dumps, to_table
from ragaudit.trec import qrels_text, run_text
from ragaudit.tuning._metrics import metric_label
from ragaudit.tuning._plan import BASELINE, collect_section
from ragaudit.tuning._run import TuneOutcome, tune_dir
from ragaudit.tuning._stats import fold_tally

REPORT = "report.html"
TABLE = "tune.parquet"
QRELS = "pool.qrels.txt"
BEST = "best.yaml"
TURNS = "turns.parquet"
"""Each query-form variant's gain per group of turns (a tune of conversations only)."""

POOL_NOTE = (
    "Figures are over this tune's pool: a document no variant here retrieved was never graded "
    "and counts as not relevant, so a variant's NDCG depends on which variants were pooled "
    "with it (the same variant scores otherwise in another tune); compare variants within one "
    "tune, not figures across tunes."
)
"""Said on the page, the console and ``tune.json``: figures are relative to the pool."""


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and math.isfinite(v)


def _latency(out: TuneOutcome, name: str) -> tuple[float | None, float | None]:
    run = next(r for r in out.runs if r.variant.name == name)
    xs = [r.latency_s for r in run.questions.values()]
    if not xs:
        return None, None
    p50, p95 = np.percentile(xs, [50, 95])
    return float(p50), float(p95)


def table_rows(out: TuneOutcome) -> list[dict[str, Any]]:
    """``tune.parquet``'s rows: variant × metric, failed variants once with their error."""
    cfg = out.config.tune
    d = out.decision
    primary = cfg.metrics[0]
    order = sorted(
        (s for s in d.stats if s.metric == primary),
        key=lambda s: -(s.mean if s.mean is not None else -math.inf),
    )
    rank = {s.variant: i for i, s in enumerate(order, start=1)}
    # With folds no variant has a held-out gain of its own: the gain pools each fold's winner
    # (tune.json, the recommendation), so the columns stay empty rather than show it as one.
    own = d.winner if len(out.splits) == 1 else None
    rows: list[dict[str, Any]] = []
    for s in d.stats:
        p50, p95 = _latency(out, s.variant)
        judged = out.judged.get(s.variant)
        rows.append(
            {
                "tune": cfg.name,
                "variant": s.variant,
                "metric": s.metric,
                "depth": cfg.depth,
                "status": "ok",
                "rank": rank.get(s.variant),
                "n_tuning": s.n_tuning,
                "mean": s.mean,
                "ci_low": s.ci_low,
                "ci_high": s.ci_high,
                "diff": s.diff,
                "p_value": s.p_value,
                "p_adjusted": s.p_adjusted,
                "n_heldout": s.n_heldout or (d.n_heldout if s.variant == own else 0),
                "heldout_gain": s.heldout_gain
                if s.variant != own or s.metric != primary
                else d.heldout_gain,
                "heldout_ci_low": s.heldout_ci_low
                if s.variant != own or s.metric != primary
                else d.heldout_ci[0],
                "heldout_ci_high": s.heldout_ci_high
                if s.variant != own or s.metric != primary
                else d.heldout_ci[1],
                "heldout_p": s.heldout_p
                if s.variant != own or s.metric != primary
                else d.heldout_p,
                "judged_at_k": judged,
                "condensed": bool(judged is not None and _finite(judged) and judged < 1.0),
                "latency_p50_s": p50,
                "latency_p95_s": p95,
                "winner": s.variant == d.winner,
                "recommended": s.variant == d.recommended,
                "params": dumps(_variant(out, s.variant).params),
                "changes": dumps(_variant(out, s.variant).changes),
            }
        )
    for run in out.runs:
        if run.status != "ok":
            rows.append(
                {
                    "tune": cfg.name,
                    "variant": run.variant.name,
                    "metric": primary,
                    "depth": cfg.depth,
                    "status": "failed",
                    "error": run.error,
                    "winner": False,
                    "recommended": False,
                    "params": dumps(run.variant.params),
                    "changes": dumps(run.variant.changes),
                }
            )
    return rows


def turn_rows(out: TuneOutcome) -> list[dict[str, Any]]:
    """``turns.parquet``'s rows: variant × metric × breakdown × group, each with n and CI."""
    cfg = out.config.tune
    return [
        {
            "tune": cfg.name,
            "variant": t.variant,
            "query_form": t.query_form,
            "metric": t.metric,
            "depth": cfg.depth,
            "breakdown": t.breakdown,
            "group": t.group,
            "n": t.n,
            "labelled": t.labelled,
            "baseline": t.baseline,
            "mean": t.mean,
            "gain": t.gain,
            "ci_low": t.ci_low,
            "ci_high": t.ci_high,
            "p_value": t.p_value,
            "p_adjusted": t.p_adjusted,
        }
        for t in out.turns
    ]


def query_forms(out: TuneOutcome) -> dict[str, Any]:
    """Per query form the variants use: where each question's text came from, what failed."""
    tally: dict[str, Any] = {}
    for form, queries in out.queries.items():
        sources: dict[str, int] = {}
        for q in queries.values():
            sources[q.source] = sources.get(q.source, 0) + 1
        failed = {qid: q.error for qid, q in queries.items() if q.error}
        tally[form] = {"sources": sources, "failed": failed}
    return tally


def _rewrites_failed(out: TuneOutcome) -> int:
    return sum(1 for queries in out.queries.values() for q in queries.values() if q.error)


def _variant(out: TuneOutcome, name: str) -> Any:
    return next(r.variant for r in out.runs if r.variant.name == name)


def _top(out: TuneOutcome, name: str) -> dict[str, list[str]]:
    run = next(r for r in out.runs if r.variant.name == name)
    return {qid: got.ids for qid, got in run.questions.items()}


def sweep_chart(out: TuneOutcome, param: str) -> str | None:
    """The SVG chart of swept parameter ``param``: the first metric's mean and 95% CI."""
    primary = out.config.tune.metrics[0]
    stats = {s.variant: s for s in out.decision.stats if s.metric == primary}
    rows = []
    for run in out.runs:
        v = run.variant
        s = stats.get(v.name)
        if param not in v.sweeps or s is None or s.mean is None:
            continue
        x = v.params.get(param)
        rows.append(
            {
                "x": x if isinstance(x, int | float) and not isinstance(x, bool) else str(x),
                "mean": s.mean,
                "low": s.ci_low if _finite(s.ci_low) else s.mean,
                "high": s.ci_high if _finite(s.ci_high) else s.mean,
                "n": s.n_tuning,
            }
        )
    if len(rows) < 2:
        return None
    nominal = any(isinstance(r["x"], str) for r in rows)
    if nominal:
        for r in rows:
            r["x"] = str(r["x"])
    x = alt.X("x:N" if nominal else "x:Q", title=f"params.{param}", scale=alt.Scale(zero=False))
    base = alt.Chart(alt.NamedData(name="points")).encode(x=x)
    y = alt.Y("low:Q", title=f"{metric_label(primary, out.config.tune.depth)} (95% CI)")
    band = (
        base.mark_rule(strokeWidth=3, opacity=0.4) if nominal else base.mark_area(opacity=0.15)
    ).encode(y=y, y2="high:Q")
    line = base.mark_line(point=True).encode(y=alt.Y("mean:Q"))
    chart = alt.layer(band, line).properties(
        width=480, height=260, title=alt.TitleParams(f"Varying params.{param}", anchor="start")
    )
    return chart_svg(configure_chart(chart), {"points": rows})


def moves(out: TuneOutcome) -> list[dict[str, Any]]:
    """The winner's per-question wins and losses against the baseline, biggest first."""
    d = out.decision
    if d.winner == BASELINE:
        return []
    primary = out.config.tune.metrics[0]
    base, win = out.values[BASELINE][primary], out.values[d.winner][primary]
    top_b, top_w = _top(out, BASELINE), _top(out, d.winner)
    heldout = {q for _, h in out.splits for q in h}
    rows = []
    for qid, q in out.questions.items():
        a, b = base.get(qid, math.nan), win.get(qid, math.nan)
        if not (_finite(a) and _finite(b)) or a == b:
            continue
        grades = out.pool.grades.get(qid, {})
        ins = [c for c in top_w.get(qid, []) if c not in set(top_b.get(qid, []))]
        outs = [c for c in top_b.get(qid, []) if c not in set(top_w.get(qid, []))]
        rows.append(
            {
                "question_id": qid,
                "question": q.question,
                "heldout": qid in heldout,
                "baseline": a,
                "winner": b,
                "diff": b - a,
                "moved_in": [(c, grades.get(c)) for c in ins],
                "moved_out": [(c, grades.get(c)) for c in outs],
            }
        )
    return sorted(rows, key=lambda r: -abs(r["diff"]))


def _ci(low: float | None, high: float | None, sign: bool = True) -> str:
    if low is None or high is None:
        return "n/a"
    return f"{fixed(low, 3, sign=sign)} to {fixed(high, 3, sign=sign)}"


def _ci_short(low: float | None, high: float | None) -> str:
    """A table cell's interval, ``0.700–0.900``: narrow enough for 15 columns on one line."""
    if low is None or high is None:
        return "n/a"
    return f"{fixed(low, 3)}–{fixed(high, 3)}"


def shared_texts(out: TuneOutcome) -> int:
    """Pooled ids whose (question, text) another pooled id has: graded once, for both."""
    keys = {
        (out.questions[qid].question, text)
        for qid, docs in out.pool.texts.items()
        for text in docs.values()
    }
    return out.pool.size - len(keys)


def calls_line(out: TuneOutcome) -> str:
    """``12 judge calls (30 grades from the store, 0 from the memo)`` — what grading paid."""
    c, g = out.calls, out.grading
    paid = c.get("provider_calls", 0)
    shared = shared_texts(out)
    # Why the calls are fewer than the pool, when some ids hold one text.
    same = f"; {shared} pooled ids share a text with another and take its grade" if shared else ""
    rewrites = out.rewrite_calls.get("calls", 0)
    # The rewrites of turns (collect.query_form: rewrite) are judge calls too, said apart.
    extra = (
        f"; {rewrites} rewrites of turns ({out.rewrite_calls.get('provider_calls', 0)} paid, "
        f"{out.rewrite_calls.get('cache_hits', 0)} memo hits)"
        if rewrites
        else ""
    )
    if paid == 0:
        return (
            f"0 judge calls (all from the store/memo: {g.found_in_store} grades from the store, "
            f"{c.get('cache_hits', 0)} memo hits{same}){extra}"
        )
    return (
        f"{paid} judge calls ({g.found_in_store} grades from the store, "
        f"{c.get('cache_hits', 0)} memo hits{same}){extra}"
    )


def render_html(out: TuneOutcome) -> str:
    """The tune's report page."""
    cfg = out.config.tune
    d = out.decision
    primary = cfg.metrics[0]
    by = {(s.variant, s.metric): s for s in d.stats}
    rows = [r for r in table_rows(out) if r["metric"] == primary]
    rows.sort(key=lambda r: (r["status"] != "ok", r.get("rank") or 0))
    variants = []
    for r in rows:
        name = r["variant"]
        v: dict[str, Any] = {
            "name": name,
            "rank": r.get("rank") or "",
            "failed": r["status"] != "ok",
            "error": r.get("error"),
            "recommended": r["recommended"] and name != BASELINE,
            "changes": json.dumps(
                {
                    **json.loads(r["changes"]),
                    **({"params": json.loads(r["params"])} if json.loads(r["params"]) else {}),
                },
                ensure_ascii=False,
            )
            if name != BASELINE
            else "(the collect section)",
        }
        if not v["failed"]:
            cells = [by[(name, m)] for m in cfg.metrics]
            v["cells"] = [(fixed(c.mean, 3), _ci_short(c.ci_low, c.ci_high)) for c in cells]
            v["n"] = r["n_tuning"]
            v["diff"] = fixed(r["diff"], 3, sign=True) if r["diff"] is not None else "—"
            v["p"] = fixed(r["p_value"], 3) if r["p_value"] is not None else "—"
            v["p_adj"] = fixed(r["p_adjusted"], 3) if r["p_adjusted"] is not None else "—"
            v["heldout"] = (
                fixed(r["heldout_gain"], 3, sign=True) if r["heldout_gain"] is not None else "—"
            )
            v["judged"] = fixed(r["judged_at_k"], 2)
            v["condensed"] = r["condensed"]
            v["latency"] = f"{fixed(r['latency_p50_s'], 3)} / {fixed(r['latency_p95_s'], 3)}"
        variants.append(v)
    charts = [svg for p in cfg.params if (svg := sweep_chart(out, p)) is not None]
    moved = [
        {
            **m,
            "a": fixed(m["baseline"], 3),
            "b": fixed(m["winner"], 3),
            "d": m["diff"],
            "ds": fixed(m["diff"], 3, sign=True),
        }
        for m in moves(out)
    ]
    n_tuning = len({q for t, _ in out.splits for q in t}) if len(out.splits) == 1 else 0
    # What the page says once, below the gain's figures: the figures are in the sentence above.
    if d.recommended != BASELINE:
        conclusion = "Better than the baseline beyond noise on questions it was not chosen on."
    elif d.winner == BASELINE:
        conclusion = "No variant beat the baseline on the " + (
            "tuning questions." if len(out.splits) == 1 else "questions."
        )
    else:
        conclusion = f"Not better beyond noise (α {out.config.report.alpha:g}): keep the baseline."
    turns = _turn_tables(out)
    failed = query_forms(out)
    env = template_env("ragaudit.tuning", trim=False)
    return env.get_template("tune.html.j2").render(
        name=cfg.name,
        judge=out.config.models.judge_model,
        prompt="relevance (graded 0–3, one candidate per call)",
        depth=cfg.depth,
        n_questions=len(out.questions),
        n_tuning=n_tuning,
        n_heldout=len(out.splits[0][1]) if len(out.splits) == 1 else len(out.questions),
        folds=len(out.splits) if len(out.splits) > 1 else 0,
        fold_winners=fold_tally(d.fold_winners) if d.fold_winners else "",
        conclusion=conclusion,
        holdout_note=d.holdout_note,
        pool_note=POOL_NOTE,
        excluded=out.excluded,
        pool_size=out.pool.size,
        calls_line=calls_line(out),
        keep=d.recommended == BASELINE,
        recommended=d.recommended,
        winner=d.winner,
        metric=primary,
        gain=fixed(d.heldout_gain, 3, sign=True) if d.heldout_gain is not None else "n/a",
        gain_ci=_ci(*d.heldout_ci),
        gain_p=fixed(d.heldout_p, 3) if d.heldout_p is not None else "n/a",
        n_gain=d.n_heldout,
        why=d.why,
        adjustment=out.config.report.adjustment,
        metrics=cfg.metrics,
        variants=variants,
        charts=charts,
        moved=moved,
        turns=turns,
        forms={r.variant.name: r.variant.config.collect.query_form for r in out.runs},
        rewrite_failures=[
            (qid, error) for form in failed.values() for qid, error in form["failed"].items()
        ],
    )


def _turn_tables(out: TuneOutcome) -> list[dict[str, Any]]:
    """The page's gains by turn: per variant and breakdown, the first metric's groups."""
    primary = out.config.tune.metrics[0]
    tables: dict[tuple[str, str], dict[str, Any]] = {}
    for t in out.turns:
        if t.metric != primary:
            continue
        table = tables.setdefault(
            (t.variant, t.breakdown),
            {"variant": t.variant, "form": t.query_form, "breakdown": t.breakdown, "rows": []},
        )
        table["rows"].append(
            {
                "group": t.group,
                "n": t.n,
                "labelled": t.labelled,
                "baseline": fixed(t.baseline, 3),
                "mean": fixed(t.mean, 3),
                "gain": fixed(t.gain, 3, sign=True),
                "d": t.gain or 0.0,
                "ci": _ci(t.ci_low, t.ci_high),
                "p": fixed(t.p_value, 3) if t.p_value is not None else "n/a",
                "p_adj": fixed(t.p_adjusted, 3) if t.p_adjusted is not None else "n/a",
            }
        )
    return list(tables.values())


def write_outputs(out: TuneOutcome) -> Path:
    """Write every output into ``<runs_root>/<tune.name>/``; returns the folder."""
    folder = tune_dir(out.config)
    folder.mkdir(parents=True, exist_ok=True)
    write_table(to_table(table_rows(out), TUNE), folder / TABLE)
    # In the question set's order, each question's documents in pooling order: the searches
    # and grades finish in any order, the files come out the same on every rerun.
    order = [qid for qid in out.questions if qid in out.pool.texts]
    grades = {
        qid: {c: out.pool.grades[qid][c] for c in out.pool.texts[qid] if c in out.pool.grades[qid]}
        for qid in order
        if qid in out.pool.grades
    }
    write_bytes(qrels_text(grades).encode(), folder / QRELS)
    written = set()
    for run in out.runs:
        if run.status == "ok":
            tops = {qid: run.questions[qid].ids for qid in out.questions if qid in run.questions}
            write_bytes(
                run_text(tops, tag=run.variant.name).encode(), folder / run.variant.file_name
            )
            written.add(run.variant.file_name)
    for stale in folder.glob("run.*.txt"):
        # A rerun with fewer variants (or one that failed now): its old run would be read as
        # this tune's.
        if stale.name not in written:
            stale.unlink(missing_ok=True)
    best = _variant(out, out.decision.recommended)
    header = (
        f"# ragaudit tune {out.config.tune.name}: {out.decision.why}\n"
        "# The collect section to paste into the run config.\n"
    )
    body = yaml.safe_dump(collect_section(best), allow_unicode=True, sort_keys=False)
    write_bytes((header + body).encode(), folder / BEST)
    if out.turns:
        write_table(to_table(turn_rows(out), TUNE_TURNS), folder / TURNS)
    else:
        # A rerun without query-form variants: the old table would be read as this tune's.
        (folder / TURNS).unlink(missing_ok=True)
    write_json(summary(out), folder / "tune.json")
    write_bytes(render_html(out).encode(), folder / REPORT)
    return folder


def summary(out: TuneOutcome) -> dict[str, Any]:
    """``tune.json``: the decision and what grading paid."""
    d = out.decision
    return {
        "tune": out.config.tune.name,
        "winner": d.winner,
        "recommended": d.recommended,
        "why": d.why,
        "heldout_gain": d.heldout_gain,
        "heldout_ci": list(d.heldout_ci),
        "heldout_p": d.heldout_p,
        "n_heldout": d.n_heldout,
        "pool_size": out.pool.size,
        "grades_from_store": out.grading.found_in_store,
        "grades_imported_from_runs": out.from_runs,
        "graded_now": out.grading.graded,
        "grades_failed": out.grading.failed,
        "left_ungraded": out.grading.left_ungraded,
        "llm": dict(out.calls),
        "variants": len(out.runs),
        "failed": {r.variant.name: r.error for r in out.runs if r.status != "ok"},
        "judged_at_k": {k: v for k, v in out.judged.items()},
        "fold_winners": list(d.fold_winners),
        "holdout_note": d.holdout_note,
        "shared_texts": shared_texts(out),
        "pool_note": POOL_NOTE,
        "query_forms": {r.variant.name: r.variant.config.collect.query_form for r in out.runs},
        "queries": query_forms(out),
        "rewrite_llm": dict(out.rewrite_calls),
        "turn_gains": turn_rows(out),
    }


def ranked(out: TuneOutcome) -> list[dict[str, Any]]:
    """The console's table: each variant on the first metric, best first (tune.parquet rows)."""
    primary = out.config.tune.metrics[0]
    rows = [r for r in table_rows(out) if r["metric"] == primary and r["status"] == "ok"]
    return sorted(rows, key=lambda r: (r["rank"] is None, r["rank"] or 0))


def console_lines(out: TuneOutcome, folder: Path) -> list[str]:
    """The console summary."""
    d = out.decision
    ok = sum(1 for r in out.runs if r.status == "ok")
    lines = [
        f"tune {out.config.tune.name}: {ok}/{len(out.runs)} variants, pool {out.pool.size} "
        f"documents; {calls_line(out)}",
        d.why if d.recommended == BASELINE else f"recommended: {d.recommended} — {d.why}",
        f"report: {folder / REPORT}  best: {folder / BEST}  table: {folder / TABLE}",
    ]
    lines.append(POOL_NOTE)
    failed = _rewrites_failed(out)
    if failed:
        lines.append(
            f"{failed} rewrites of turns failed: those turns searched their history form "
            "instead (tune.json: queries)"
        )
    if out.turns:
        lines.append(f"gains by turn band and turn kind: {folder / TURNS}")
    condensed = [k for k, v in out.judged.items() if _finite(v) and v < 1.0]
    if condensed:
        lines.append(
            "judged documents only (budget): "
            + ", ".join(f"{k} {out.judged[k]:.2f}" for k in condensed)
        )
    return lines


__all__ = [
    "BEST",
    "POOL_NOTE",
    "QRELS",
    "REPORT",
    "TABLE",
    "TURNS",
    "calls_line",
    "console_lines",
    "ranked",
    "moves",
    "render_html",
    "shared_texts",
    "summary",
    "sweep_chart",
    "table_rows",
    "query_forms",
    "turn_rows",
    "write_outputs",
]
