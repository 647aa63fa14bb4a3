"""ragaudit's score path side by side with RAGAS 0.4.3's three ways of scoring, in one run.

The same rows × the six metrics both tools have (faithfulness, answer relevancy, context
precision with a reference, context recall, factual correctness, noise sensitivity), the same
fake judge (``fake/judge?latency=…``, our scripted litellm provider, counted where it answers),
at most ``--concurrency`` judge calls in flight for every path:

- ours: ``ragaudit.scoring.score_rows`` per metric, all metrics together, through the gateway
  (its per-model limit is the concurrency; rows in flight per metric as the flow sets them);
- ragas (a): ``ragas.metrics.collections`` metrics, ``await metric.abatch_score(rows)`` per
  metric, all metrics together (``abatch_score`` is a bare gather with no limit of its own);
- ragas (b): the ``@experiment`` decorator, one experiment row scoring the six metrics at once;
- ragas (c): legacy ``aevaluate()`` with the deprecated ``ragas.metrics`` objects
  (``RunConfig(max_workers=4 × concurrency)``, as many rows in flight as ours).

Every ragas path gets ``llm_factory(judge, provider="litellm", client=<litellm.acompletion
under a semaphore of --concurrency>)``: the semaphore is the only way to bound ragas's calls in
flight that all three paths accept. Three conditions: clean; faults (``errors=0.2`` transient
failures per attempt and ``malformed=0.1`` cut-off replies, the same seed for every path); and a
re-score from the cache, the same rows and metrics, both sides warm (imports done, their cache
filled by an earlier run of this process), ``--repeats`` times, the paths taking turns:

- ours: the clean run's memo folder again through a new gateway, as a re-run of the score stage
  in a new process does its work: every row's window fit (token counts: the counts this
  process kept are dropped first, a new process has none), the metric and ragas objects built
  per row, every judge step answered from the memo (one diskcache read, parsed into its
  schema by the gateway), recorded in the row's trace and the call log (in memory here),
  embeddings from the memo, the row dicts with their JSON reasons; no Parquet (``score_rows``
  returns the rows);
- ragas: ``DiskCacheBackend`` on ``llm_factory(cache=…)`` and on the embeddings
  (``LiteLLMEmbeddings(cache=…)``, which caches single texts only), filled by one run of the
  collections path and read by each cached path: metrics built once per path, every judge step
  a cache-key hash, ``has_key`` and ``get`` (the stored parsed answer, unpickled).

The verdict compares the best wall time of the repeats of each (every repeat is printed).
Before every measured run the garbage of the ones before is collected, so no path pays for
another's.

A cell is ok when it holds a numeric, non-NaN score.

Under faults a judge answer is lost when its transient retries run out (``errors`` to the power
``1 + models.max_retries`` per call) or when its reply and each of its repairs come back cut
off (the fake decides that per distinct request, and a repair is a new request). So a cell
that rests on ``d`` distinct judge requests is ok with chance ``s**d``, ``s`` the chance that
one answer is obtained within ``1 + models.max_repairs`` calls, and the expected ok share is
the mean of ``s**d`` over the cells. The ``d`` of each cell is counted in an untimed pass
(each metric on its own memo, so a request two metrics share counts for both; answer
relevancy's samples of one prompt are one request to the fake). The expected and measured
shares are printed for the default bound (one repair: at most two calls per answer) and for
one more repair (at most three), which ours is also measured with.

    python bench/bench_vs_ragas.py [--rows 200] [--latency 0.1] [--concurrency 16] [--k 3]
                                   [--repeats 3] [--skip PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import io
import logging
import math
import os
import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("TQDM_DISABLE", "1")  # the experiment API's progress bar

from _util import scratch, table  # noqa: E402
from bench_score import samples  # noqa: E402

import ragaudit  # noqa: E402,F401  (offline environment first)
from ragaudit.cache import (
    Gateway,  # noqa: E402
    providers,  # noqa: E402
)
from ragaudit.cache._fake import FAKE, FakeOptions, FakeRequest  # noqa: E402
from ragaudit.config import ModelsConfig  # noqa: E402
from ragaudit.metrics import Deps, Sample, resolve  # noqa: E402
from ragaudit.metrics._judge import _steps  # noqa: E402
from ragaudit.scoring import score_rows  # noqa: E402
from ragaudit.tasks import score  # noqa: E402

OURS = (
    "faithfulness",
    "answer_relevancy",
    "context_precision",
    "context_recall",
    "factual_correctness",
    "noise_sensitivity",
)
STRICTNESS = 3
EMBEDDER = "fake/embed"
# The product's defaults: at most one repair, so at most two calls per answer.
DEFAULTS = ModelsConfig()


@dataclass
class Result:
    """One path under one condition."""

    tool: str
    path: str
    condition: str
    wall: float
    cpu: float
    calls: int
    ok: int
    cells: int

    def line(self) -> tuple:  # noqa: D102
        return (
            self.condition,
            self.tool,
            self.path,
            f"{self.wall:.2f}",
            f"{self.cpu:.2f}",
            self.calls,
            f"{self.ok}/{self.cells}",
        )


@dataclass
class Expectation:
    """The ok share expected under faults, by repairs allowed per judge answer."""

    by_metric: dict[str, list[int]]
    """Distinct judge requests per cell, by metric."""
    answer: dict[int, float]
    """Chance that one judge answer is obtained."""
    shares: dict[int, float]
    """Expected share of ok cells."""


def ok_value(value: Any) -> bool:
    """A numeric, non-NaN score."""
    try:
        return value is not None and not isinstance(value, bool) and not math.isnan(float(value))
    except (TypeError, ValueError):
        return False


async def timed(
    run: Callable[[], Awaitable[tuple[int, int]]],
) -> tuple[float, float, int, int, int]:
    """Wall, CPU, judge calls at the fake provider, ok cells, cells."""
    FAKE.reset()
    gc.collect()
    started, cpu = time.perf_counter(), time.process_time()
    ok, cells = await run()
    return time.perf_counter() - started, time.process_time() - cpu, FAKE.stats.calls, ok, cells


# -- ours ---------------------------------------------------------------------------------


def _deps(gateway: Gateway, judge: str) -> Deps:
    """What our score path runs a metric with in this bench."""
    return Deps.of(
        gateway=gateway,
        judge=judge,
        embedder=EMBEDDER,
        options={"answer_relevancy_strictness": STRICTNESS},
    )


async def ours(
    batch: list[Sample],
    judge: str,
    memo: Any,
    concurrency: int,
    repairs: int = DEFAULTS.max_repairs,
) -> tuple[int, int]:
    """Our score path: every metric's rows through ``score_rows``, all metrics together."""
    gateway = Gateway(
        memo,
        concurrency=concurrency,
        backoff_s=0.0,
        max_retries=DEFAULTS.max_retries,
        max_repairs=repairs,
    )
    deps = _deps(gateway, judge)
    try:
        results = await asyncio.gather(
            *(
                score_rows(
                    resolve(n, deps.options), batch, deps, window=32_000, limit=4 * concurrency
                )
                for n in OURS
            )
        )
    finally:
        gateway.close()
    rows = [r for rs in results for r in rs]
    return sum(r["status"] == "ok" and ok_value(r.get("value")) for r in rows), len(rows)


async def requests_per_cell(batch: list[Sample], judge: str) -> dict[str, list[int]]:
    """Distinct judge requests the fake sees per cell of ours, by metric (an untimed pass).

    Each metric runs on a memo of its own, so a request two metrics share is counted for both
    (a cell's fate rests on it whichever metric asked first). A request is attributed to its
    row by the row's trace list, which the scoring task's context carries into the provider.
    """
    cells: dict[int, tuple[list[Any], set[str]]] = {}
    out: dict[str, list[int]] = {}

    def note(req: FakeRequest) -> None:
        # The row's own trace list (``steps()`` would give a fresh list while it is empty).
        trace = _steps.get()
        if trace is None:
            raise RuntimeError("a judge request outside a scored row")
        # Holding the list keeps its id from being reused by a later row.
        cells.setdefault(id(trace), (trace, set()))[1].add(req.digest())

    with FAKE.script(note):
        for name in OURS:
            cells.clear()
            gateway = Gateway(scratch("vs-ragas-count") / "memo", concurrency=64, backoff_s=0.0)
            deps = _deps(gateway, judge)
            try:
                await score_rows(resolve(name, deps.options), batch, deps, window=32_000, limit=64)
            finally:
                gateway.close()
            if len(cells) != len(batch):
                raise RuntimeError(f"{name}: requests attributed to {len(cells)} of the rows")
            out[name] = [len(digests) for _, digests in cells.values()]
    return out


def answer_chance(errors: float, malformed: float, retries: int, repairs: int) -> float:
    """Chance that one judge answer is obtained within ``1 + repairs`` calls.

    A call is lost when all its ``1 + retries`` attempts fail (``errors ** (1 + retries)``);
    a reply is cut off with chance ``malformed``, independently for the answer and for each
    repair (each is a distinct request).
    """
    reached = 1.0 - errors ** (1 + retries)
    return reached * (1.0 - malformed) * sum((malformed * reached) ** i for i in range(repairs + 1))


def expected_share(per_cell: list[int], judge: str, repairs: int) -> float:
    """The expected share of ok cells under the faults of ``judge``, ``repairs`` per answer."""
    _, opts = FakeOptions.parse(judge)
    s = answer_chance(opts.errors, opts.malformed, DEFAULTS.max_retries, repairs)
    # A mean of per-cell chances: cells that share a request are not independent, but the
    # expected count is the sum of each cell's chance all the same.
    return sum(s**d for d in per_cell) / len(per_cell)


# -- ragas --------------------------------------------------------------------------------


def ragas_cache(cache_dir: Any) -> Any:
    """ragas's own disk cache in ``cache_dir`` (None: no cache)."""
    from ragas.cache import DiskCacheBackend

    return DiskCacheBackend(str(cache_dir)) if cache_dir is not None else None


def ragas_llm(judge: str, concurrency: int, cache: Any = None) -> Any:
    """ragas's LLM on litellm, at most ``concurrency`` calls in flight."""
    import litellm
    from ragas.llms import llm_factory

    limit = asyncio.Semaphore(concurrency)

    async def acompletion(**kwargs: Any) -> Any:
        async with limit:
            return await litellm.acompletion(**kwargs)

    return llm_factory(judge, provider="litellm", client=acompletion, cache=cache)


def collections_metrics(llm: Any) -> dict[str, Any]:
    """ragas's current metrics, one per metric of ours (embeddings cached with the LLM)."""
    from ragas.embeddings import LiteLLMEmbeddings
    from ragas.metrics import collections as rc

    embeddings = LiteLLMEmbeddings(model=EMBEDDER, cache=getattr(llm, "cache", None))
    return {
        "faithfulness": rc.Faithfulness(llm=llm),
        "answer_relevancy": rc.AnswerRelevancy(
            llm=llm, embeddings=embeddings, strictness=STRICTNESS
        ),
        "context_precision": rc.ContextPrecisionWithReference(llm=llm),
        "context_recall": rc.ContextRecall(llm=llm),
        "factual_correctness": rc.FactualCorrectness(llm=llm),
        "noise_sensitivity": rc.NoiseSensitivity(llm=llm),
    }


def inputs(name: str, s: Sample) -> dict[str, Any]:
    """The keyword arguments ragas's collections metric ``name`` takes for ``s``."""
    q, a, ref, ctx = s.question, s.response, s.reference, s.contexts
    return {
        "faithfulness": {"user_input": q, "response": a, "retrieved_contexts": ctx},
        "answer_relevancy": {"user_input": q, "response": a},
        "context_precision": {"user_input": q, "reference": ref, "retrieved_contexts": ctx},
        "context_recall": {"user_input": q, "retrieved_contexts": ctx, "reference": ref},
        "factual_correctness": {"response": a, "reference": ref},
        "noise_sensitivity": {
            "user_input": q,
            "response": a,
            "reference": ref,
            "retrieved_contexts": ctx,
        },
    }[name]


async def ragas_collections(batch: list[Sample], llm: Any) -> tuple[int, int]:
    """(a) ``abatch_score`` per metric, the metrics together; a failed batch scores nothing."""
    metrics = collections_metrics(llm)
    results = await asyncio.gather(
        *(m.abatch_score([inputs(n, s) for s in batch]) for n, m in metrics.items()),
        return_exceptions=True,
    )
    ok = sum(ok_value(r.value) for rs in results if not isinstance(rs, BaseException) for r in rs)
    return ok, len(batch) * len(metrics)


async def ragas_experiment(batch: list[Sample], llm: Any) -> tuple[int, int]:
    """(b) The ``@experiment`` API: one row scores its six metrics at once."""
    from ragas import experiment
    from ragas.dataset import Dataset

    metrics = collections_metrics(llm)
    by_id = {s.question_id: s for s in batch}

    @experiment()
    async def score(row: dict[str, Any]) -> dict[str, Any]:
        s = by_id[row["question_id"]]
        values = await asyncio.gather(*(m.ascore(**inputs(n, s)) for n, m in metrics.items()))
        return {
            "question_id": s.question_id,
            **{n: v.value for n, v in zip(metrics, values, strict=True)},
        }

    dataset = Dataset("bench", "inmemory", data=[{"question_id": s.question_id} for s in batch])
    # arun prints a warning line per failed row; the ok count below says it.
    with contextlib.redirect_stdout(io.StringIO()):
        out = await score.arun(dataset, name="bench", backend="inmemory")
    ok = sum(ok_value(row[n]) for row in out for n in metrics)
    return ok, len(batch) * len(metrics)


def legacy_embeddings() -> Any:
    """The legacy embeddings interface the deprecated answer relevancy needs, on litellm."""
    import litellm
    from ragas.embeddings import BaseRagasEmbeddings

    class LiteLLMLegacyEmbeddings(BaseRagasEmbeddings):
        def embed_query(self, text: str) -> list[float]:
            return self.embed_documents([text])[0]

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            r = litellm.embedding(model=EMBEDDER, input=list(texts))
            return [d["embedding"] for d in r.data]

        async def aembed_query(self, text: str) -> list[float]:
            return (await self.aembed_documents([text]))[0]

        async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
            r = await litellm.aembedding(model=EMBEDDER, input=list(texts))
            return [d["embedding"] for d in r.data]

    return LiteLLMLegacyEmbeddings()


async def ragas_legacy(batch: list[Sample], llm: Any, concurrency: int) -> tuple[int, int]:
    """(c) Legacy ``aevaluate()`` with the deprecated metric objects (failures become NaN)."""
    from ragas import EvaluationDataset, SingleTurnSample
    from ragas import metrics as legacy
    from ragas.evaluation import aevaluate
    from ragas.run_config import RunConfig

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        metrics = [
            legacy.Faithfulness(),
            legacy.AnswerRelevancy(strictness=STRICTNESS),
            legacy.LLMContextPrecisionWithReference(),
            legacy.LLMContextRecall(),
            legacy.FactualCorrectness(),
            legacy.NoiseSensitivity(),
        ]
    dataset = EvaluationDataset(
        [
            SingleTurnSample(
                user_input=s.question,
                response=s.response,
                reference=s.reference,
                retrieved_contexts=s.contexts,
            )
            for s in batch
        ]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        result = await aevaluate(
            dataset,
            metrics=metrics,
            llm=llm,
            embeddings=legacy_embeddings(),
            run_config=RunConfig(max_workers=4 * concurrency),
            show_progress=False,
            raise_exceptions=False,
        )
    ok = sum(ok_value(v) for row in result.scores for v in row.values())
    return ok, len(batch) * len(metrics)


# -- the run ------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> tuple[list[Result], Expectation]:
    providers.register_all()
    # ragas logs every failed job with its full instructor trace; the ok counts say it.
    logging.getLogger("ragas").setLevel(logging.CRITICAL)
    batch = samples(args.rows, args.k)
    clean = f"fake/judge?latency={args.latency}"
    faulty = f"{clean}&errors=0.2&malformed=0.1&seed={args.seed}"
    c = args.concurrency
    out: list[Result] = []

    async def measure(tool: str, path: str, condition: str, fn: Callable) -> Result:
        wall, cpu, calls, ok, cells = await timed(fn)
        r = Result(tool, path, condition, wall, cpu, calls, ok, cells)
        out.append(r)
        print("  " + "  ".join(map(str, r.line())), flush=True)
        return r

    paths = {
        "collections + abatch_score": lambda judge, cache=None, rows=batch: (
            lambda: ragas_collections(rows, ragas_llm(judge, c, ragas_cache(cache)))
        ),
        "@experiment": lambda judge, cache=None, rows=batch: (
            lambda: ragas_experiment(rows, ragas_llm(judge, c, ragas_cache(cache)))
        ),
        "legacy evaluate()": lambda judge, cache=None, rows=batch: (
            lambda: ragas_legacy(rows, ragas_llm(judge, c, ragas_cache(cache)), c)
        ),
    }
    # Every path once on a few rows first, untimed: the first run of a path in a process pays
    # for what is set up on first use (litellm imports parts of itself on its first call;
    # prompts, schemas and clients are built once), which the path measured first would
    # otherwise pay alone.
    warm = batch[: min(len(batch), 16)]
    await ours(warm, clean, scratch("vs-ragas-warm") / "memo", c)
    for path, make in paths.items():
        if path not in args.skip:
            await make(clean, rows=warm)()
    memo = scratch("vs-ragas") / "memo"
    for condition, judge in (("clean", clean), ("faults", faulty)):
        dest = memo if condition == "clean" else scratch("vs-ragas") / "memo"
        await measure("ours", "score_rows", condition, lambda j=judge, d=dest: ours(batch, j, d, c))
        if condition == "faults":
            more = DEFAULTS.max_repairs + 1
            await measure(
                "ours",
                f"score_rows, {more} repairs (<= {more + 1} calls/answer)",
                condition,
                lambda j=judge, r=more: ours(batch, j, scratch("vs-ragas") / "memo", c, repairs=r),
            )
        for path, make in paths.items():
            if path in args.skip:
                continue
            await measure("ragas", path, condition, make(judge))
    by_metric = await requests_per_cell(batch, clean)
    per_cell = [d for ds in by_metric.values() for d in ds]
    _, opts = FakeOptions.parse(faulty)
    repairs = (DEFAULTS.max_repairs, DEFAULTS.max_repairs + 1)
    expected = Expectation(
        by_metric=by_metric,
        answer={
            r: answer_chance(opts.errors, opts.malformed, DEFAULTS.max_retries, r) for r in repairs
        },
        shares={r: expected_share(per_cell, faulty, r) for r in repairs},
    )
    cache = scratch("vs-ragas-cache")
    await measure(
        "ragas",
        "collections, cache filled",
        "re-score",
        paths["collections + abatch_score"](clean, cache),
    )

    async def rescore() -> tuple[int, int]:
        # What this process counted for the same prompts before is not what a re-run in a
        # new process has: start from none.
        score.forget_counts()
        return await ours(batch, clean, memo, c)

    for _ in range(args.repeats):
        await measure("ours", "score_rows (memo)", "re-score", rescore)
        for path in ("collections + abatch_score", "@experiment"):
            if path not in args.skip:
                await measure("ragas", f"{path} (cache)", "re-score", paths[path](clean, cache))
    return out, expected


def verdicts(results: list[Result], expected: Expectation) -> list[str]:
    """The three targets, measured (and what the faults condition should give)."""

    def pick(condition: str, tool: str, cached: bool | None = None) -> list[Result]:
        return [
            r
            for r in results
            if r.condition == condition
            and r.tool == tool
            and "filled" not in r.path
            and (cached is None or ("(cache)" in r.path) == cached)
        ]

    lines = []
    ours_clean = pick("clean", "ours")[0]
    best = min(pick("clean", "ragas"), key=lambda r: r.wall, default=None)
    if best:
        ratio = ours_clean.wall / best.wall
        lines.append(
            f"clean: ours {ours_clean.wall:.1f} s / ragas's best ({best.path}) {best.wall:.1f} s "
            f"= {ratio:.2f}  (target <= 0.80: {'met' if ratio <= 0.8 else 'NOT met'})"
        )
    requests = ", ".join(
        f"{name} {sum(ds) / len(ds):.2f}" for name, ds in expected.by_metric.items()
    )
    lines.append(f"faults: distinct judge requests per cell: {requests}")
    for (repairs, share_expected), measured in zip(
        expected.shares.items(), pick("faults", "ours"), strict=True
    ):
        share = measured.ok / measured.cells
        label = "default bound, " if repairs == DEFAULTS.max_repairs else ""
        lines.append(
            f"faults, ours with {label}{repairs} repair{'s' * (repairs != 1)} per judge answer "
            f"(at most {repairs + 1} calls per answer): {measured.ok} of {measured.cells} cells "
            f"ok = {share:.1%}, expected {share_expected:.1%} (an answer obtained with chance "
            f"{expected.answer[repairs]:.4f})  (target >= 99%: "
            f"{'met' if share >= 0.99 else 'NOT met'})"
        )
    if pick("faults", "ragas"):
        lines.append(
            "faults, ragas (as configured by ragas): "
            + ", ".join(f"{r.path} {r.ok}" for r in pick("faults", "ragas"))
        )
    ours_memo = pick("re-score", "ours")
    ours_best = min(ours_memo, key=lambda r: r.wall)
    cached = pick("re-score", "ragas", cached=True)
    best_cached = min(cached, key=lambda r: r.wall, default=None)
    if best_cached:
        ok = ours_best.wall <= best_cached.wall

        def walls(rs: list[Result]) -> str:
            return ", ".join(f"{r.wall:.2f}" for r in rs)

        lines.append(
            f"re-score: ours {ours_best.wall:.2f} s (best of {walls(ours_memo)}; "
            f"{ours_best.calls} judge calls, cpu {ours_best.cpu:.2f} s) vs ragas's best cached "
            f"re-run ({best_cached.path}) {best_cached.wall:.2f} s (best of "
            f"{walls([r for r in cached if r.path == best_cached.path])}; cpu "
            f"{best_cached.cpu:.2f} s) = {ours_best.wall / best_cached.wall:.2f}  "
            f"(target ours <= ragas: {'met' if ok else 'NOT met'})"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--repeats", type=int, default=3, help="re-score runs of each side, taking turns"
    )
    parser.add_argument(
        "--skip", action="append", default=[], help="a ragas path to leave out (by its name)"
    )
    args = parser.parse_args()
    print(
        f"ours vs ragas 0.4.3: {args.rows} rows x {len(OURS)} metrics, fake judge at "
        f"{args.latency * 1000:.0f} ms, {args.concurrency} calls in flight (one run)",
        flush=True,
    )
    results, expected = asyncio.run(run(args))
    print()
    print(
        table(
            [r.line() for r in results],
            ("condition", "tool", "path", "wall s", "cpu s", "judge calls", "ok cells"),
        )
    )
    for line in verdicts(results, expected):
        print(line)


if __name__ == "__main__":
    main()
