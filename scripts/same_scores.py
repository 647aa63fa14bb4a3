"""Same memo, same tables: a check that a change to the judging or scoring code changed no result.

Run the demo questions through ``ragaudit run`` with the fake judge, once per checkout, into
one folder whose memo they share; then compare the runs' ``scores``, ``verdicts``,
``ranking``, ``ground_truth`` and ``nuggets`` tables row by row (every column but ``run_id``)
and print the provider calls of each run after the first, which must be 0 when the change kept
every request the same::

    OLD/venv/bin/python scripts/same_scores.py run --root /tmp/same --run-id before
    python scripts/same_scores.py run --root /tmp/same --run-id after
    python scripts/same_scores.py run --root /tmp/same --run-id after-new-syntax --new-syntax
    python scripts/same_scores.py compare --root /tmp/same before after after-new-syntax

The config sets every metric option through the flat ``score.<metric>_<option>`` keys that
configs written before the options moved to their metrics use (so that the old code reads it
too); ``--new-syntax`` writes the same options as ``{metric: {option: value}}`` entries.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl

REPO = Path(__file__).resolve().parents[1]
METRICS = [
    "faithfulness",
    "answer_relevancy",
    "context_precision",
    "context_precision_without_reference",
    "context_recall",
    "nonllm_context_precision",
    "nonllm_context_recall",
    "context_relevance",
    "context_entity_recall",
    "noise_sensitivity",
    "factual_correctness",
    "semantic_similarity",
    "answer_correctness",
    "aspect_coherence",
    "summarization_score",
    "rouge_l",
    "bleu",
    "nugget_recall_strict_vital",
    "nugget_recall_vital",
    "nugget_recall_all",
    "nugget_recall_strict_all",
]
# The tables compared besides ``scores``, each with the columns that order its rows.
TABLES = {
    "verdicts": ["question_id", "context_id"],
    "ranking": ["question_id"],
    "ground_truth": ["question_id"],
    "nuggets": ["question_id", "nugget_index"],
}
LEGACY = {
    "answer_relevancy_strictness": 2,
    "aspect_strictness": 3,
    "answer_correctness_weights": [0.5, 0.5],
    "factual_correctness_atomicity": "high",
    "factual_correctness_beta": 2.0,
    "summarization_coeff": 0.3,
}
NEW = {
    "answer_relevancy": {"strictness": 2},
    "aspect_coherence": {"strictness": 3},
    "answer_correctness": {"weights": [0.5, 0.5]},
    "factual_correctness": {"atomicity": "high", "beta": 2.0},
    "summarization_score": {"coeff": 0.3},
}


def config(root: Path, new_syntax: bool) -> dict[str, Any]:
    """The run's config: the demo data, the fake judge and embedder, the memo under ``root``."""
    score: dict[str, Any] = {"top_k": 3}
    if new_syntax:
        score["metrics"] = [{m: NEW[m]} if m in NEW else m for m in METRICS]
    else:
        score.update(metrics=METRICS, **LEGACY)
    return {
        "questions": str(REPO / "data" / "demo" / "questions.jsonl"),
        "runs_root": str(root / "runs"),
        "cache_dir": str(root / "cache"),
        "collect": {
            "backend": "local",
            "index_path": str(root / "index"),
            "corpus": str(REPO / "data" / "demo" / "corpus.jsonl"),
            "top_n": 6,
        },
        "models": {"judge": "fake/judge", "embedder": "fake/embed", "backoff_s": 0.0},
        "score": score,
    }


def run(root: Path, run_id: str, new_syntax: bool) -> None:
    """One ``ragaudit run`` with this interpreter's ragaudit."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{run_id}.json"
    path.write_text(json.dumps(config(root, new_syntax)), encoding="utf-8")
    cmd = [sys.executable, "-m", "ragaudit", "run", "--config", str(path), "--run-id", run_id]
    subprocess.run(cmd, check=True, cwd=root)


def scores(root: Path, run_id: str) -> pl.DataFrame:
    """The run's score rows without ``run_id``, in a fixed order."""
    frame = pl.read_parquet(root / "runs" / run_id / "scores.parquet").drop("run_id")
    return frame.sort("metric", "question_id")


def provider_calls(root: Path, run_id: str) -> int:
    """Calls the run sent to a provider (the rest came from the memo)."""
    manifest = json.loads((root / "runs" / run_id / "manifest.json").read_text(encoding="utf-8"))
    return int(manifest["llm"]["provider_calls"])


def table(root: Path, run_id: str, name: str, keys: list[str]) -> pl.DataFrame:
    """One of the run's tables without ``run_id``, in a fixed order."""
    frame = pl.read_parquet(root / "runs" / run_id / f"{name}.parquet").drop("run_id")
    return frame.sort(keys, nulls_last=True)


def differs(name: str, first: pl.DataFrame, other: pl.DataFrame, keys: list[str]) -> bool:
    """Whether ``other`` differs from ``first``; prints how (columns compared when shared)."""
    # A column one side's schema lacks (added by a later version) is said, not compared.
    only = sorted(set(first.columns) ^ set(other.columns))
    if only:
        print(f"  {name}: columns in one run only, not compared: {', '.join(only)}")
    shared = [c for c in first.columns if c in other.columns]
    first, other = first.select(shared), other.select(shared)
    equal = other.equals(first)
    print(f"  {name}: {other.height} rows, identical={equal}")
    if not equal:
        joined = first.join(other, on=keys, suffix="_other", how="full", nulls_equal=True)
        for column in shared:
            if column in keys:
                continue
            diff = joined.filter(pl.col(column).ne_missing(pl.col(f"{column}_other")))
            if diff.height:
                print(f"    {column}: {diff.height} rows differ")
    return not equal


def compare(root: Path, run_ids: list[str]) -> bool:
    """Whether every run's tables equal the first's; prints what differs."""
    first = scores(root, run_ids[0])
    others = {name: table(root, run_ids[0], name, keys) for name, keys in TABLES.items()}
    same = True
    calls = provider_calls(root, run_ids[0])
    sizes = ", ".join(f"{t.height} {name} rows" for name, t in others.items())
    print(f"{run_ids[0]}: {first.height} score rows, {sizes}, {calls} provider calls")
    for other in run_ids[1:]:
        calls = provider_calls(root, other)
        print(f"{other}: {calls} provider calls")
        if differs("scores", first, scores(root, other), ["metric", "question_id"]):
            same = False
        for name, keys in TABLES.items():
            if differs(name, others[name], table(root, other, name, keys), keys):
                same = False
        same = same and calls == 0
    return same


def main() -> None:
    """Run or compare, as the arguments say."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run")
    one.add_argument("--root", type=Path, required=True)
    one.add_argument("--run-id", required=True)
    one.add_argument("--new-syntax", action="store_true")
    both = sub.add_parser("compare")
    both.add_argument("--root", type=Path, required=True)
    both.add_argument("run_ids", nargs="+")
    args = parser.parse_args()
    if args.command == "run":
        run(args.root, args.run_id, args.new_syntax)
    else:
        sys.exit(0 if compare(args.root, args.run_ids) else 1)


if __name__ == "__main__":
    main()
