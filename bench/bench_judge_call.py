"""Seconds per call of the offline judge (Gemma 3 270M on llama.cpp), as the demo makes them.

Run: ``python bench/bench_judge_call.py [N]``. N (default 10) JSON-schema judge calls, one
after another as the demo's lock serialises them, through litellm and the ``local``
provider: each a different question and passage of ``data/demo``, the same kind of prompt
and grammar as a demo's faithfulness or relevance call. Prints llama-cpp-python's version
and the CPU features its build uses (a build without them is one cause of slow calls), then
wall and CPU seconds a call. Run it in another environment (another llama-cpp-python version
or build options) beside this one to see which is fast; the demo's ``llm_calls`` hold the
same figure per call (``latency_s``).
"""

from __future__ import annotations

import asyncio
import json
import resource
import statistics
import sys
import time

from _util import REPO, table
from pydantic import BaseModel

DEMO = REPO / "data" / "demo" / "questions.jsonl"
MODEL = "local/gemma-3-270m"
# The demo's judge calls took ~1.1 s each before llama-cpp-python 0.3.36 (issue 44).
GOAL_S = 1.1


class Verdict(BaseModel):
    relevant: bool
    reason: str


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def main() -> None:
    import litellm
    import llama_cpp

    from ragaudit.cache import providers

    providers.register_all()
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    rows = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines()]
    flags = llama_cpp.llama_print_system_info().decode()
    flags = flags.split(":", 1)[-1]  # "CPU : SSE3 = 1 | AVX = 1 | ..."
    used = [f.split("=")[0].strip() for f in flags.split("|") if f.strip().endswith("= 1")]
    print(f"llama-cpp-python {llama_cpp.__version__}; CPU features built in: {', '.join(used)}")

    async def call(i: int) -> None:
        row = rows[i % len(rows)]
        passage = row.get("reference") or row["response"]
        await litellm.acompletion(
            model=MODEL,
            messages=[
                {"role": "system", "content": "Judge whether the passage answers the question."},
                {
                    "role": "user",
                    "content": f"Question: {row['question']}\nPassage: {passage}",
                },
            ],
            response_format=Verdict,
            temperature=0,
        )

    await call(0)  # loads the model: not timed
    walls, cpus = [], []
    for i in range(1, n + 1):
        wall, cpu = time.perf_counter(), cpu_s()
        await call(i)
        walls.append(time.perf_counter() - wall)
        cpus.append(cpu_s() - cpu)
    print(
        table(
            [
                (
                    n,
                    f"{statistics.mean(walls):.2f}",
                    f"{statistics.median(walls):.2f}",
                    f"{statistics.mean(cpus):.2f}",
                )
            ],
            ("calls", "mean s/call", "median s/call", "CPU s/call"),
        )
    )
    mean = statistics.mean(walls)
    print(
        f"goal <= {GOAL_S} s a judge call: "
        + ("met" if mean <= GOAL_S else f"not met: {mean:.2f} s (load: check `uptime`)")
    )


if __name__ == "__main__":
    asyncio.run(main())
