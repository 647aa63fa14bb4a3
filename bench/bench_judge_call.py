"""Seconds per call of the offline judge (Gemma 3 270M on llama.cpp), as the demo makes them.

Run: ``python bench/bench_judge_call.py [--calls N] [--rounds R] [--synthetic [--tokens T]]
[--variant LABEL:KEY=VAL,KEY=VAL ...]``, or ``--capture`` to record the demo's calls anew.

By default each variant replays the demo's own judge calls, recorded from a cold ``ragaudit
demo`` run in ``bench/data/demo_judge_calls.jsonl.gz`` (every request the ``local`` provider
got: the flattened prompt, its grammars, ``max_tokens``, temperature), one after another as
the demo's lock serialises them, through the provider's ``_generate`` (litellm's and the
gateway's own share is measured by bench_gateway). ``--calls N`` replays N of them, spread
over the file. ``--synthetic`` makes instead one ``{supported, reason}`` judge request per
demo question through litellm, cut to about T prompt tokens (default 600).

Each variant is a child process (R rounds, variants in turn, so that a load on the machine
hits them alike). A variant's KEY=VAL pairs are environment variables of its process, for
example ``RAGAUDIT_LOCAL_THREADS=1`` or ``RAGAUDIT_LOCAL_EXTRA_BUFFERS=1``; ``LLAMA_DIR=/path``
puts a llama-cpp-python installed there (``pip install --target``) ahead of this
environment's. Without ``--variant``: the previous default (``LazyGrammar``, a Python
callback that checks the top 64 tokens at every step) against the judge as it is
(``GreedyGrammar``: the best token first, the grammar over more tokens only when it refuses
it), with this environment's threads; compare threads with ``--variant``.

Per variant: llama-cpp-python's version, the threads (to generate / for prompts), wall and CPU
seconds a call, the part of a call
inside llama.cpp's own decoding timers and the rest (sampling, grammar, Python), llama.cpp's
prompt and generation rates (tokens a second inside those timers), and whether
its answers equal the first variant's, call by call.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _util import REPO, table

DEMO = REPO / "data" / "demo"
CALLS_FILE = Path(__file__).resolve().parent / "data" / "demo_judge_calls.jsonl.gz"
# The demo's judge calls took ~1.1 s each a round before llama-cpp-python 0.3.36 (issue 44).
GOAL_S = 1.1
BEFORE = "before (main), LazyGrammar:RAGAUDIT_LOCAL_GREEDY_CHECK=0"
AFTER = "after, GreedyGrammar:"


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


def synthetic_prompts(tokens: int) -> list[list[dict[str, str]]]:
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


def recorded_calls(n: int | None) -> list[dict[str, Any]]:
    """``n`` of the demo's recorded calls (all when None), spread over the file, in order."""
    with gzip.open(CALLS_FILE, "rt", encoding="utf-8") as lines:
        calls = [json.loads(line) for line in lines]
    if n is None or n >= len(calls):
        return calls
    step = len(calls) / n
    return [calls[int(i * step)] for i in range(n)]


def _synthetic_caller(tokens: int) -> tuple[Any, int]:
    import litellm
    from pydantic import BaseModel

    from ragaudit.cache import providers
    from ragaudit.cache._local import COMPLETION_MODEL

    class Verdict(BaseModel):
        supported: bool
        reason: str

    providers.register_all()
    requests = synthetic_prompts(tokens)

    def call(i: int) -> tuple[int, int, list[str]]:
        reply = asyncio.run(
            litellm.acompletion(
                model=COMPLETION_MODEL,
                messages=requests[i % len(requests)],
                response_format=Verdict,
                temperature=0,
            )
        )
        return (
            reply.usage.prompt_tokens,
            reply.usage.completion_tokens,
            [c.message.content for c in reply.choices],
        )

    return call, len(requests)


def _replay_caller(records: list[dict[str, Any]]) -> tuple[Any, int]:
    from ragaudit.cache._local import LOCAL

    def call(i: int) -> tuple[int, int, list[str]]:
        record = records[i % len(records)]
        kwargs = dict(record["kwargs"])
        if kwargs.get("grammars") is not None:
            kwargs["grammars"] = tuple(kwargs["grammars"])
        reply = LOCAL.llama.run(lambda llm: LOCAL._generate(llm, record["prompt"], kwargs))
        return (
            reply.usage.prompt_tokens,
            reply.usage.completion_tokens,
            [c["message"]["content"] for c in reply.choices],
        )

    return call, len(records)


def worker(calls: int | None, tokens: int, synthetic: bool) -> dict[str, object]:
    """This process's figures (printed as one JSON line)."""
    import llama_cpp

    from ragaudit.cache._llama_patches import extra_buffers_wanted
    from ragaudit.cache._local import LLAMA_BATCH_THREADS, LLAMA_THREADS, LOCAL

    if synthetic:
        call, size = _synthetic_caller(tokens)
        n = calls or 5
        warm = size - 1
    else:
        records = recorded_calls(calls)
        call, n = _replay_caller(records)
        warm = None
    LOCAL.llama.run(lambda llm: None)  # loads the model: not timed
    if warm is not None:
        call(warm)  # the first litellm call imports and registers: not timed
    ctx = LOCAL.llama.run(lambda llm: llm._ctx.ctx)
    walls, cpus, inside, tokens_in, tokens_out, answers = [], [], [], [], [], []
    # llama.cpp's own prompt and generation counts and milliseconds, summed over the calls.
    rates = {"n_p_eval": 0, "t_p_eval_ms": 0.0, "n_eval": 0, "t_eval_ms": 0.0}
    for i in range(n):
        llama_cpp.llama_perf_context_reset(ctx)
        wall, cpu = time.perf_counter(), cpu_s()
        n_in, n_out, texts = call(i)
        walls.append(time.perf_counter() - wall)
        cpus.append(cpu_s() - cpu)
        perf = llama_cpp.llama_perf_context(ctx)
        inside.append((perf.t_p_eval_ms + perf.t_eval_ms) / 1e3)
        for key in rates:
            rates[key] += getattr(perf, key)
        tokens_in.append(n_in)
        tokens_out.append(n_out)
        answers.append(texts)
    return {
        "version": llama_cpp.__version__,
        "features": build_features(),
        "extra_buffers": extra_buffers_wanted(),
        "threads": f"{LLAMA_THREADS}/{LLAMA_BATCH_THREADS}",
        "walls": walls,
        "cpus": cpus,
        "inside": inside,
        "tokens_in": statistics.mean(tokens_in),
        "tokens_out": statistics.mean(tokens_out),
        "answers": answers,
        "rates": rates,
    }


def capture(out: Path) -> None:
    """Run ``ragaudit demo`` cold (fresh runs root and memo) and record every judge request."""
    import tempfile

    from ragaudit.cache import _local
    from ragaudit.cli import app

    original = _local.LocalProvider._generate
    records: list[dict[str, Any]] = []

    def recording(self: Any, llm: Any, prompt: str, kwargs: dict[str, Any]) -> Any:
        reply = original(self, llm, prompt, kwargs)
        kept = {k: v for k, v in kwargs.items() if k != "deadline"}
        records.append({"prompt": prompt, "kwargs": kept})
        return reply

    _local.LocalProvider._generate = recording  # type: ignore[method-assign]
    scratch = Path(tempfile.mkdtemp(prefix="ragaudit-bench-judge-call-"))
    try:
        app(
            [
                "demo",
                "--run-id",
                "capture",
                "--runs-root",
                str(scratch / "runs"),
                "--set",
                f"cache_dir={scratch / 'cache'}",
            ],
            standalone_mode=False,
        )
    finally:
        _local.LocalProvider._generate = original  # type: ignore[method-assign]
    out.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same calls give the same bytes.
    with open(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as packed:
        for record in records:
            line = json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"
            packed.write(line.encode("utf-8"))
    print(f"{len(records)} judge calls recorded in {out}")


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


def _rate(runs: list[dict], count: str, millis: str) -> str:
    """Tokens a second inside llama.cpp's own timer, over all of a variant's calls."""
    tokens = sum(r["rates"][count] for r in runs)
    seconds = sum(r["rates"][millis] for r in runs) / 1e3
    return f"{tokens / seconds:.0f}" if seconds else ""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=None, help="calls a process (default: all)")
    ap.add_argument("--tokens", type=int, default=600, help="prompt tokens of --synthetic")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--synthetic", action="store_true")
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--capture", action="store_true", help="record the demo's calls anew")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.capture:
        capture(CALLS_FILE)
        return
    child_args = ["--tokens", str(args.tokens)]
    child_args += ["--calls", str(args.calls)] if args.calls else []
    child_args += ["--synthetic"] if args.synthetic else []
    if args.worker:
        print(json.dumps(worker(args.calls, args.tokens, args.synthetic)))
        return

    specs = args.variant or [BEFORE, AFTER]
    results: dict[str, list[dict]] = {spec: [] for spec in specs}
    failed: dict[str, str] = {}
    load = os.getloadavg()[0]
    for _ in range(args.rounds):
        for spec in specs:
            if spec in failed:
                continue
            out, why = run_child(variant_env(spec)[1], ["--worker", *child_args])
            if out is None:
                failed[spec] = why
            else:
                results[spec].append(out)
    source = (
        f"synthetic judge calls of ~{args.tokens} prompt tokens"
        if args.synthetic
        else f"the demo's recorded judge calls ({CALLS_FILE.name})"
    )
    print(
        f"{source}, {args.rounds} round(s); load average {load:.1f} at the start,"
        f" {os.getloadavg()[0]:.1f} at the end"
    )
    rows = []
    means: dict[str, float] = {}
    base = specs[0]
    base_answers = [a for r in results.get(base, []) for a in r["answers"]]
    for spec in specs:
        label = spec.partition(":")[0]
        if spec in failed:
            rows.append((label, "", "", "", "", "", "", "", "", "", "", "", failed[spec]))
            continue
        runs = results[spec]
        walls = [w for r in runs for w in r["walls"]]
        inside = [s for r in runs for s in r["inside"]]
        answers = [a for r in runs for a in r["answers"]]
        first = runs[0]
        means[spec] = statistics.mean(walls)
        same = sum(a == b for a, b in zip(answers, base_answers, strict=False))
        rows.append(
            (
                label,
                first["version"],
                "on" if first["extra_buffers"] else "off",
                first["threads"],
                len(walls),
                f"{statistics.mean(r['tokens_in'] for r in runs):.0f}/"
                f"{statistics.mean(r['tokens_out'] for r in runs):.0f}",
                f"{means[spec]:.2f}",
                f"{statistics.median(walls):.2f}",
                f"{statistics.mean(c for r in runs for c in r['cpus']):.2f}",
                f"{statistics.mean(inside):.2f} / {means[spec] - statistics.mean(inside):.2f}",
                _rate(runs, "n_p_eval", "t_p_eval_ms"),
                _rate(runs, "n_eval", "t_eval_ms"),
                f"{same}/{len(answers)}",
            )
        )
    print(
        table(
            rows,
            (
                "variant",
                "version",
                "extra bufs",
                "threads",
                "calls",
                "tokens in/out",
                "wall s/call",
                "median",
                "CPU s/call",
                "llama.cpp / rest",
                "prompt tok/s",
                "gen tok/s",
                "same answers",
            ),
        )
    )
    if not means:
        raise SystemExit("no variant ran")
    for spec, mean in means.items():
        if spec != base and base in means:
            print(f"{spec.partition(':')[0]} / {base.partition(':')[0]}: {mean / means[base]:.2f}x")
    last = specs[-1]
    if last in means:
        mean = means[last]
        print(
            f"goal <= {GOAL_S} s a demo judge call ({last.partition(':')[0]}): "
            + ("met" if mean <= GOAL_S else f"not met: {mean:.2f} s at load {load:.1f}")
        )
    if len(means) > 1 and base in means:
        total = len(base_answers)
        differ = [
            s.partition(":")[0]
            for s in specs[1:]
            if s in means
            and sum(
                a == b
                for a, b in zip(
                    (a for r in results[s] for a in r["answers"]), base_answers, strict=False
                )
            )
            < total
        ]
        print(
            "goal: the same answers as the first variant, call by call: "
            + ("met" if not differ else f"not met: {', '.join(differ)} differ")
        )


if __name__ == "__main__":
    main()
