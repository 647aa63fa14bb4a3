"""The dry run against the run it predicts: per stage, estimated and logged calls and tokens.

A round is: ``ragaudit demo --dry-run``'s estimate (in this process, with litellm's completion
and embedding entry points counted: the dry run must make 0 model calls, and the local models
must stay unloaded), then the real demo run (``ragaudit demo`` in a subprocess, same settings,
a fresh LLM memo so every call reaches the model), then one table: per call-log stage, the
estimated and the logged calls, prompt tokens and completion tokens with the error in % of the
logged figure. Every call-log row counts as a call (a memo hit inside the run as well: the
dry run does not predict them; the table shows how many there were).

With the offline judge (Gemma 3 270M on llama.cpp) a round takes ~10 minutes on 2 idle cores.

    python bench/bench_dryrun.py                 # one round in a fresh runs root (priors)
    python bench/bench_dryrun.py --rounds 2      # round 2 reads round 1 as the judge's record
    python bench/bench_dryrun.py --fake          # the fake judge and embedder: seconds
    python bench/bench_dryrun.py --against data/runs/demo     # no real run: that run's log
    python bench/bench_dryrun.py --priors        # no judge record (runs root or file): priors
    python bench/bench_dryrun.py --root DIR      # DIR/runs holds earlier runs: the record
    python bench/bench_dryrun.py --root DIR --questions en.jsonl   # then zh.jsonl: the record
                                                 # from other questions than the estimated ones

``--rounds 2`` repeats the round in the same runs root with a new run id: its dry run reads
round 1's finished run as the judge's record (relevant share, reply and reference lengths).
That record comes from the same five questions, which a real user's earlier runs need not
share; the round-1 table is the figure for a judge with no record.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
from _util import REPO, scratch, table  # first: the offline environment

from ragaudit.config import RunConfig, load_config, set_path
from ragaudit.dryrun import Estimate
from ragaudit.flows import estimate_run

DEMO_CONFIG = REPO / "data" / "demo" / "config.yaml"
TOLERANCE = 0.10
ENTRY_POINTS = ("completion", "acompletion", "embedding", "aembedding")


def settings(root: Path, round_no: int, fake: bool, questions: Path | None) -> list[str]:
    """The ``--set`` items of one round: runs root, a fresh memo, a shared index."""
    items = [
        f"runs_root={root / 'runs'}",
        f"cache_dir={root / f'cache-{round_no}'}",
        f"collect.index_path={root / 'index'}",
    ]
    if questions is not None:
        items.append(f"questions={questions.resolve()}")
    if fake:
        items += ["models.judge=fake/judge", "models.embedder=fake/embed", "models.backoff_s=0"]
    return items


def config_for(items: list[str]) -> RunConfig:
    import yaml

    overrides: dict[str, Any] = {}
    for item in items:
        dotted, raw = item.split("=", 1)
        set_path(overrides, dotted, yaml.safe_load(raw))
    return load_config(DEMO_CONFIG, overrides)


def dry_run(
    config: RunConfig, use_history: bool = True, records: list[Path] | None = None
) -> tuple[Estimate, int, float]:
    """The estimate, the model calls made while computing it, and its wall time."""
    import litellm

    from ragaudit.cache import _local
    from ragaudit.cache._fake import FAKE

    made: Counter[str] = Counter()
    originals = {name: getattr(litellm, name) for name in ENTRY_POINTS}

    def counting(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            made[name] += 1
            return originals[name](*args, **kwargs)

        return call

    for name in ENTRY_POINTS:
        setattr(litellm, name, counting(name))
    FAKE.reset()
    started = time.perf_counter()
    try:
        estimate = asyncio.run(estimate_run(config, use_history=use_history, records=records))
    finally:
        for name, fn in originals.items():
            setattr(litellm, name, fn)
    wall = time.perf_counter() - started
    calls = sum(made.values()) + FAKE.stats.calls + FAKE.stats.embeddings
    loaded = [r for r in (_local.LOCAL.llama, _local.LOCAL.embedder) if r._model is not None]
    return estimate, calls + len(loaded), wall


def real_run(items: list[str], run_id: str) -> float:
    """``ragaudit demo`` with the same settings; its wall time."""
    cmd = [sys.executable, "-m", "ragaudit", "demo", "--run-id", run_id]
    for item in items:
        cmd += ["--set", item]
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, env=os.environ.copy(), capture_output=True, text=True)
    if done.returncode not in (0, 3):  # 3: finished, but the judge failed on most calls
        sys.stdout.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"the real run failed (exit {done.returncode})")
    return time.perf_counter() - started


def logged(run_dir: Path) -> dict[str, dict[str, float]]:
    """Per stage from the run's call log: calls, memo hits, prompt and completion tokens."""
    parts = sorted((run_dir / "llm_calls").glob("*.parquet"))
    calls = pl.concat([pl.read_parquet(p) for p in parts], how="vertical_relaxed")
    per_stage = calls.group_by("stage").agg(
        pl.len().alias("calls"),
        pl.col("cache_hit").sum().alias("hits"),
        pl.col("error").is_not_null().sum().alias("errors"),
        pl.col("tokens_in").fill_null(0).sum().alias("tokens_in"),
        pl.col("tokens_out").fill_null(0).sum().alias("tokens_out"),
    )
    return {row.pop("stage"): row for row in per_stage.iter_rows(named=True)}


def error(est: float, real: float) -> float | None:
    return None if not real else (est - real) / real


def pct(value: float | None) -> str:
    return "–" if value is None else f"{value:+.1%}"


def compare(estimate: Estimate, log: dict[str, dict[str, float]]) -> list[str]:
    """Print the table; return the stages whose calls and prompt tokens are within 10 %."""
    est = {k: v for k, v in estimate.by_stage().items() if v["calls"]}
    rows, good = [], []
    totals = {"est": Counter[str](), "log": Counter[str]()}
    for stage in sorted(set(est) | set(log)):
        e = est.get(stage, {"calls": 0.0, "tokens_in": 0.0, "tokens_out": 0.0})
        r = log.get(stage, {"calls": 0, "hits": 0, "errors": 0, "tokens_in": 0, "tokens_out": 0})
        errs = [error(e[k], r[k]) for k in ("calls", "tokens_in", "tokens_out")]
        ok = all(x is not None and abs(x) <= TOLERANCE for x in errs)
        if ok:
            good.append(stage)
        for key in ("calls", "tokens_in", "tokens_out"):
            totals["est"][key] += e[key]
            totals["log"][key] += r[key]
        rows.append(
            (
                stage,
                f"{e['calls']:.0f}",
                f"{r['calls']} ({r['hits']} hit, {r['errors']} err)",
                pct(errs[0]),
                f"{e['tokens_in']:,.0f}",
                f"{r['tokens_in']:,}",
                pct(errs[1]),
                f"{e['tokens_out']:,.0f}",
                f"{r['tokens_out']:,}",
                pct(errs[2]),
                "yes" if ok else "no",
            )
        )
    t_e, t_l = totals["est"], totals["log"]
    rows.append(
        (
            "total",
            f"{t_e['calls']:.0f}",
            f"{t_l['calls']:.0f}",
            pct(error(t_e["calls"], t_l["calls"])),
            f"{t_e['tokens_in']:,.0f}",
            f"{t_l['tokens_in']:,.0f}",
            pct(error(t_e["tokens_in"], t_l["tokens_in"])),
            f"{t_e['tokens_out']:,.0f}",
            f"{t_l['tokens_out']:,.0f}",
            pct(error(t_e["tokens_out"], t_l["tokens_out"])),
            "",
        )
    )
    headers = (
        "stage",
        "calls est",
        "calls logged",
        "err",
        "prompt est",
        "prompt logged",
        "err",
        "compl est",
        "compl logged",
        "err",
        "all 3 within 10%",
    )
    print(table(rows, headers))
    return good


def report(estimate: Estimate, calls: int, wall: float) -> None:
    print(f"dry run: {wall:.1f} s, model calls made: {calls}")
    for line in estimate.evidence:
        print(f"  judge-dependent: {line}")
    for note in estimate.notes:
        if note.startswith("tokens of"):
            print(f"  {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fake", action="store_true", help="the fake judge and embedder")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--against", type=Path, help="compare with this finished run's log")
    parser.add_argument("--questions", type=Path, help="another question set (same corpus)")
    parser.add_argument(
        "--root", type=Path, help="work in DIR (its runs/ are the judge's record) not a fresh one"
    )
    parser.add_argument(
        "--record", type=Path, action="append", help="a judge record file (ragaudit record)"
    )
    parser.add_argument(
        "--priors", action="store_true", help="no record at all: priors where the judge decides"
    )
    args = parser.parse_args()

    if args.against is not None:
        # The run's own stored config, with an empty runs root: the run itself must not be its
        # own evidence. A judge record file (the package's for the offline judge, or --record)
        # stands in, as on a first run; --priors: none either.
        manifest = json.loads((args.against / "manifest.json").read_text(encoding="utf-8"))
        config = RunConfig.model_validate(manifest["config"])
        config = config.model_copy(update={"runs_root": scratch("dryrun-empty")})
        estimate, calls, wall = dry_run(config, not args.priors, args.record)
        report(estimate, calls, wall)
        compare(estimate, logged(args.against))
        return

    root = args.root or scratch("dryrun")
    judge = "fake/judge" if args.fake else "the offline judge"
    print(f"runs root {root / 'runs'}; {judge}; {args.rounds} round(s)")
    # Numbered after the runs already there: a run id used before would resume, not run.
    first = 1 + max((int(p.name.split("-")[1]) for p in (root / "runs").glob("bench-*")), default=0)
    for round_no in range(first, first + args.rounds):
        items = settings(root, round_no, args.fake, args.questions)
        config = config_for(items)
        print(f"\nround {round_no}: judge {config.models.judge_model}")
        estimate, calls, wall = dry_run(config, not args.priors, args.record)
        report(estimate, calls, wall)
        if calls:
            raise SystemExit(f"the dry run made {calls} model call(s)")
        run_id = f"bench-{round_no}"
        real_wall = real_run(items, run_id)
        print(f"real run: {real_wall:.1f} s ({real_wall / wall:.0f}x the dry run)")
        good = compare(estimate, logged(Path(config.runs_root) / run_id))
        print(f"stages with calls, prompt and completion tokens within 10 %: {', '.join(good)}")


if __name__ == "__main__":
    main()
