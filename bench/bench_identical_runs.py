"""Identical runs make identical calls: a soak of the same score run, each on a fresh memo.

The deterministic fake judge answers the same prompts the same way every time, so every run
of the same questions and config must send the provider exactly the same number of calls.
Each run is the real flow (collect from the question set, then every default metric as its
own Prefect task, in its own thread and event loop), so identical prompts asked by two metrics
at once, samples asked together and repairs all race as they do in use. Prints each run's
provider calls and exits 1 if any two differ.

Measured (2026-11-25, 2 loaded cores, 200 rows, the four default metrics): 20 runs, 1,601
provider calls each. With the completions' in-flight table made process-wide but embeddings
still unshared, three runs made 1,602, 1,614 and 1,602: answer relevancy's embeddings of a
text many rows share were paid once or several times depending on timing.

    python bench/bench_identical_runs.py [--runs 20] [--rows 200] [--latency 0.02]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter

from _util import scratch, table
from support.synthetic import write_questions

from ragaudit.config import load_config
from ragaudit.flows.evaluate import evaluate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.02)
    args = parser.parse_args()
    from prefect.testing.utilities import prefect_test_harness

    tmp = scratch("identical")
    questions = write_questions(tmp / "questions.jsonl", args.rows, candidates=4)
    rows = []
    with prefect_test_harness(server_startup_timeout=120):
        for i in range(args.runs):
            config = load_config(
                None,
                {
                    "questions": str(questions),
                    "runs_root": str(tmp / "runs"),
                    "cache_dir": str(tmp / f"cache-{i}"),  # a fresh memo: every call is paid
                    "collect": {"backend": "question_set"},
                    "sort": {"enabled": False},
                    "ground_truth": {"enabled": False},
                    "models": {
                        "judge": f"fake/judge?latency={args.latency}",
                        "embedder": "fake/embed",
                        "concurrency": 16,
                        "backoff_s": 0,
                    },
                    "score": {"top_k": 3},
                },
                environ={},
            )
            manifest = asyncio.run(evaluate(config.model_dump_json(), f"run{i}"))
            llm = manifest["llm"]
            rows.append((i, manifest["status"], llm["calls"], llm["provider_calls"]))
            print(f"run {i}: {llm['provider_calls']} provider calls", flush=True)
    print(table(rows, ("run", "status", "calls", "provider calls")))
    counts = Counter(r[3] for r in rows)
    print(f"distinct provider-call counts over {args.runs} runs: {dict(counts)}")
    return 0 if len(counts) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
