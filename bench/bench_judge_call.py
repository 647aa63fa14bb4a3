"""Seconds per call of the offline judge (Gemma 3 270M on llama.cpp), as the demo makes them.

Run: ``python bench/bench_judge_call.py [--calls N] [--tokens T] [--rounds R]
[--variant LABEL:KEY=VAL,KEY=VAL ...]``. Each variant is a child process that loads the judge
and makes N JSON-schema judge calls one after another, as the demo's lock serialises them,
through litellm and the ``local`` provider: each a different demo question with its own
corpus passages, cut to about T prompt tokens (default 600, the mean of a demo's judge
calls; its answers average ~55 tokens). Variants run in turn, R rounds, so that a load on the
machine hits them alike; the figures are per variant over all its rounds.

A variant's KEY=VAL pairs are environment variables of its process, for example
``RAGAUDIT_LOCAL_THREADS=1`` or ``RAGAUDIT_LOCAL_EXTRA_BUFFERS=1``; ``LLAMA_DIR=/path`` puts a
llama-cpp-python installed there (``pip install --target``) ahead of this environment's, to
compare builds. Without ``--variant``: this environment as the provider loads it, and, where
its build has no AMX kernels, the same without llama.cpp's extra CPU buffer types (weight
repacking), as the provider loads a build that has them.

Per variant it prints llama-cpp-python's version, whether AMX and the extra buffers are in
use, then wall and CPU seconds a call, and llama.cpp's own prompt and generation rates
(tokens per second of its timers), so that a slow call shows where its time went.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _util import REPO, table

DEMO = REPO / "data" / "demo"
# The demo's judge calls took ~1.1 s each before llama-cpp-python 0.3.36 (issue 44).
GOAL_S = 1.1


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def build_features() -> list[str]:
    """CPU features llama.cpp's build uses ("AVX2", "AMX_INT8", "REPACK"…)."""
    import llama_cpp

    flags = llama_cpp.llama_print_system_info().decode()
    out = []
    for part in flags.split("|"):
        name, _, value = part.rpartition("=")
        name = name.rsplit(":", 1)[-1].strip()
        if value.strip() == "1" and name:
            out.append(name)
    return out


def prompts(tokens: int) -> list[list[dict[str, str]]]:
    """One judge request per demo question: the question, its answer and its own passages."""
    from ragaudit.cache._local import count_prompt_tokens

    rows = [json.loads(line) for line in (DEMO / "questions.jsonl").read_text("utf-8").splitlines()]
    corpus = [json.loads(line) for line in (DEMO / "corpus.jsonl").read_text("utf-8").splitlines()]
    out = []
    for row in rows:
        passages = [d["text"] for d in corpus if d["metadata"]["collection"] == row["question_id"]]
        system = (
            "Judge whether the answer is supported by the passages. Reply in JSON with a"
            " verdict for the answer and a short reason."
        )
        body = f"Question: {row['question']}\nAnswer: {row['response']}\nPassages:"
        for passage in passages:
            longer = f"{body}\n- {passage}"
            messages = [
                {"role": "system", "content": system},
                {"role": "user", "content": longer},
            ]
            if count_prompt_tokens(messages) > tokens:
                break
            body = longer
        out.append([{"role": "system", "content": system}, {"role": "user", "content": body}])
    return out


async def worker(calls: int, tokens: int) -> dict[str, object]:
    """This process's figures for ``calls`` judge calls (printed as one JSON line)."""
    import litellm
    import llama_cpp
    from pydantic import BaseModel

    from ragaudit.cache import providers
    from ragaudit.cache._llama_patches import extra_buffers_wanted
    from ragaudit.cache._local import COMPLETION_MODEL, LLAMA_THREADS, LOCAL

    class Verdict(BaseModel):
        supported: bool
        reason: str

    providers.register_all()
    requests = prompts(tokens)

    async def call(i: int) -> tuple[int, int]:
        reply = await litellm.acompletion(
            model=COMPLETION_MODEL,
            messages=requests[i % len(requests)],
            response_format=Verdict,
            temperature=0,
        )
        return reply.usage.prompt_tokens, reply.usage.completion_tokens

    await call(len(requests) - 1)  # loads the model: not timed
    ctx = LOCAL.llama.model()._ctx.ctx
    walls, cpus, tokens_in, tokens_out = [], [], [], []
    prompt_ms = eval_ms = 0.0
    prompt_n = eval_n = 0
    for i in range(calls):
        llama_cpp.llama_perf_context_reset(ctx)
        wall, cpu = time.perf_counter(), cpu_s()
        n_in, n_out = await call(i)
        walls.append(time.perf_counter() - wall)
        cpus.append(cpu_s() - cpu)
        tokens_in.append(n_in)
        tokens_out.append(n_out)
        perf = llama_cpp.llama_perf_context(ctx)
        prompt_ms += perf.t_p_eval_ms
        prompt_n += perf.n_p_eval
        eval_ms += perf.t_eval_ms
        eval_n += perf.n_eval
    return {
        "version": llama_cpp.__version__,
        "features": build_features(),
        "extra_buffers": extra_buffers_wanted(),
        "threads": LLAMA_THREADS,
        "walls": walls,
        "cpus": cpus,
        "tokens_in": statistics.mean(tokens_in),
        "tokens_out": statistics.mean(tokens_out),
        "prompt_tps": prompt_n / (prompt_ms / 1e3) if prompt_ms else 0.0,
        "eval_tps": eval_n / (eval_ms / 1e3) if eval_ms else 0.0,
    }


def variant_env(spec: str) -> tuple[str, dict[str, str]]:
    label, _, pairs = spec.partition(":")
    env = {**os.environ}
    path = [str(REPO)]
    for pair in filter(None, pairs.split(",")):
        key, _, value = pair.partition("=")
        if key == "LLAMA_DIR":
            path.insert(0, value)
        else:
            env[key] = value
    env["PYTHONPATH"] = os.pathsep.join(path)
    return label, env


def run_child(env: dict[str, str], args: list[str]) -> tuple[dict | None, str]:
    """A child's JSON answer, or None and why it failed (a signal names itself)."""
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        if proc.returncode < 0:
            import signal

            return None, f"died with {signal.Signals(-proc.returncode).name}"
        return None, (proc.stderr.strip().splitlines() or ["failed"])[-1]
    return json.loads(proc.stdout.strip().splitlines()[-1]), ""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=600)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--features", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.features:
        print(json.dumps(build_features()))
        return
    if args.worker:
        print(json.dumps(asyncio.run(worker(args.calls, args.tokens))))
        return

    specs = args.variant
    if not specs:
        features, _ = run_child(variant_env("")[1], ["--features"])
        specs = ["this environment"]
        if features is not None and not any(f.startswith("AMX") for f in features):
            specs.append("this environment, extra buffers off:RAGAUDIT_LOCAL_EXTRA_BUFFERS=0")
        else:
            print("extra buffers on: not run (this build has AMX kernels: SIGILL here)")
    results: dict[str, list[dict]] = {spec: [] for spec in specs}
    failed: dict[str, str] = {}
    load = os.getloadavg()[0]
    for _ in range(args.rounds):
        for spec in specs:
            if spec in failed:
                continue
            _, env = variant_env(spec)
            out, why = run_child(
                env, ["--worker", "--calls", str(args.calls), "--tokens", str(args.tokens)]
            )
            if out is None:
                failed[spec] = why
            else:
                results[spec].append(out)
    print(
        f"judge calls of ~{args.tokens} prompt tokens, {args.calls} a process, {args.rounds}"
        f" rounds; load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    )
    rows = []
    means: dict[str, float] = {}
    for spec in specs:
        label = spec.partition(":")[0]
        if spec in failed:
            rows.append((label, "", "", "", "", "", "", "", "", failed[spec]))
            continue
        runs = results[spec]
        walls = [w for r in runs for w in r["walls"]]
        cpus = [c for r in runs for c in r["cpus"]]
        first = runs[0]
        means[spec] = statistics.mean(walls)
        rows.append(
            (
                label,
                first["version"],
                "yes" if any(f.startswith("AMX") for f in first["features"]) else "no",
                "on" if first["extra_buffers"] else "off",
                first["threads"],
                f"{statistics.mean(r['tokens_in'] for r in runs):.0f}/"
                f"{statistics.mean(r['tokens_out'] for r in runs):.0f}",
                f"{means[spec]:.2f}",
                f"{statistics.mean(cpus):.2f}",
                f"{statistics.mean(r['prompt_tps'] for r in runs):.0f}",
                f"{statistics.mean(r['eval_tps'] for r in runs):.1f}",
            )
        )
    print(
        table(
            rows,
            (
                "variant",
                "version",
                "AMX",
                "extra bufs",
                "threads",
                "tokens in/out",
                "wall s/call",
                "CPU s/call",
                "prompt tok/s",
                "gen tok/s",
            ),
        )
    )
    if not means:
        raise SystemExit("no variant ran")
    base = specs[0]
    for spec, mean in means.items():
        if spec != base and base in means:
            print(f"{spec.partition(':')[0]} / {base.partition(':')[0]}: {mean / means[base]:.2f}x")
    best_spec = min(means, key=means.__getitem__)
    best = means[best_spec]
    print(
        f"goal <= {GOAL_S} s a demo-sized judge call ({best_spec.partition(':')[0]}): "
        + ("met" if best <= GOAL_S else f"not met: {best:.2f} s at load {load:.1f}")
    )


if __name__ == "__main__":
    main()
