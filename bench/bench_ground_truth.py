"""Reference answers from 200 contexts: our window-exact scheme against the naive one, side by side.

200 synthetic contexts of 50-3,000 tokens (seeded), each holding one unique fact token, an
8,192-token judge window, the fake judge at 200 ms latency with gateway concurrency 16. The
judge lists the facts it was shown (``FactJudge`` of tests/support), stops at ``max_tokens`` like a
real model, and — like a real provider — rejects a prompt whose tokens plus ``max_tokens``
exceed the window (counted on the messages it receives, with litellm's tokenizer).

Schemes:
- seed: shuffle, fixed groups of 20 contexts, one answer per group, one merge of the answers
  (``gen_gt.py``'s fast version);
- ours, fast: first-fit-decreasing groups that fill the window, lossless merge rounds;
- ours, slow: one answer per context, unknowns dropped, the same merge rounds.

The map-step bound is 1.1 x ceil(total context tokens / usable tokens per prompt), where the
usable tokens are the window minus the answer budget and the rendered empty prompt.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from typing import Any

from _util import scratch, table  # first: the offline environment
from support.fact_judge import FACT, FactJudge
from support.runs import make_config

from ragaudit.cache import count_tokens
from ragaudit.cache._fake import FAKE, FakeRequest
from ragaudit.prompts import ANSWER_GROUP, MERGE, GroupAnswerInput, MergeInput
from ragaudit.runfolder import RunFolder
from ragaudit.tasks._common import StageContext, gateway_for
from ragaudit.tasks.ground_truth import reference_answer, writer_for

N = 200
WINDOW = 8192
LATENCY_S = 0.2
CONCURRENCY = 16
SEED_GROUP = 20
QUESTION = "What did the company report about its business this year?"
_VOCAB = (
    "company revenue cloud storage network services region growth cost hardware staff year "
    "customer product market share profit margin quarter contract partner platform security "
    "data centre energy supply chain risk investment research development policy government"
)
VOCAB = _VOCAB.split()


class WindowedJudge(FactJudge):
    """The tests' fact-listing judge that also rejects over-window prompts, as a provider does.

    With ``enforce=False`` it counts them (as ``FactJudge`` does) but answers anyway, as if its
    window were larger: the naive scheme then runs to the end, and its answer budget shows.
    """

    def __init__(self, enforce: bool = True) -> None:
        super().__init__()
        self.enforce = enforce

    def __call__(self, req: FakeRequest) -> str | None:
        import litellm  # after ragaudit (via _util): its import reads the offline environment

        if self.enforce and req.title in {"GroupAnswer", "MergedAnswer"}:
            prompt = litellm.token_counter(model="gpt-4", messages=req.messages)
            if prompt + req.params["max_tokens"] > req.options.window:
                self.overflows.append(prompt + req.params["max_tokens"])
                self.calls += 1
                raise litellm.ContextWindowExceededError(
                    message=f"{prompt} + {req.params['max_tokens']} tokens > {req.options.window}",
                    model=req.model,
                    llm_provider="fake",
                )
        return super().__call__(req)


def make_contexts(n: int = N, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` contexts of 50-3,000 tokens (uniform), one unique fact each at a random place."""
    import litellm

    rng = random.Random(seed)
    out = []
    for i in range(n):
        target = rng.randint(50, 3000)
        words = []
        for k in range(int(target * 1.2)):
            words.append(rng.choice(VOCAB) + ("." if k % 17 == 16 else ""))
            if k % 120 == 119:
                words.append("\n")
        tokens = litellm.encode(model="gpt-4", text=" ".join(words))[: target - 6]
        text = litellm.decode(model="gpt-4", tokens=tokens)
        cut = rng.randint(0, len(text))
        out.append((f"c{i:03d}", f"{text[:cut]} FACT-{i:04d} {text[cut:]}"))
    return out


def stage(name: str, mode: str = "fast") -> StageContext:
    config = make_config(
        scratch(f"gt-{name}"),
        judge=f"fake/judge?latency={LATENCY_S}&window={WINDOW}",
        models__concurrency=CONCURRENCY,
        ground_truth__mode=mode,
    )
    return StageContext(
        config=config,
        run=RunFolder(config.runs_root, "bench"),
        gateway=gateway_for(config),
    )


async def seed_scheme(
    ctx: StageContext, contexts: list[tuple[str, str]]
) -> tuple[str | None, int, int]:
    """The naive fast version: shuffle, groups of 20, one answer each, one merge of them all."""
    order = list(contexts)
    random.Random(0).shuffle(order)
    budget = ctx.config.ground_truth.answer_tokens

    async def ask(prompt: Any, inp: Any) -> Any:
        return await ctx.gateway.astructured(
            model=ctx.judge,
            messages=prompt.messages(inp, "en"),
            schema=prompt.output_model,
            prompt_version=prompt.key,
            temperature=0.0,
            max_tokens=budget,
        )

    groups = [order[i : i + SEED_GROUP] for i in range(0, len(order), SEED_GROUP)]
    answers = await asyncio.gather(
        *(
            ask(ANSWER_GROUP, GroupAnswerInput(question=QUESTION, contexts=[t for _, t in g]))
            for g in groups
        )
    )
    partial = [a.value.answer for a in answers if a.ok and a.value.answerable]
    if not partial:
        return None, len(groups), 0
    merged = await ask(MERGE, MergeInput(question=QUESTION, partial_answers=partial))
    return (merged.value.answer if merged.ok else None), len(groups), 1


async def run(
    name: str, contexts: list[tuple[str, str]], mode: str | None, enforce: bool = True
) -> dict[str, Any]:
    ctx = stage(name, mode or "fast")
    judge = WindowedJudge(enforce)
    FAKE.reset()
    started = time.perf_counter()
    with FAKE.script(judge):
        if mode is None:
            answer, map_calls, merge_calls = await seed_scheme(ctx, contexts)
        else:
            answer, _, _, writer = await reference_answer(ctx, QUESTION, "en", contexts)
            map_calls, merge_calls = writer.spent.map_calls, writer.spent.merge_calls
    wall = time.perf_counter() - started
    return {
        "prompts": judge.calls,
        "overflows": len(judge.overflows),
        "map": map_calls,
        "merge": merge_calls,
        "provider_calls": FAKE.stats.calls,
        "facts": len(set(FACT.findall(answer or ""))),
        "wall": wall,
    }


async def main() -> None:
    contexts = make_contexts()
    total = sum(count_tokens("gpt-4", t) for _, t in contexts)
    usable = writer_for(stage("size"), QUESTION, "en").usable
    lower = -(-total // usable)
    bound = 1.1 * lower
    rows = []
    schemes = (
        ("seed: shuffle, groups of 20", None, True, "n/a"),
        ("seed, over-window prompts answered anyway", None, False, "n/a"),
        ("ours: fast (FFD packing)", "fast", True, "bound"),
        ("ours: slow (per context)", "slow", True, f"n/a ({N}+ by design)"),
    )
    for k, (label, mode, enforce, limit) in enumerate(schemes):
        r = await run(f"s{k}", contexts, mode, enforce)
        if limit == "bound":
            limit = f"{bound:.1f} ({'met' if r['map'] <= bound else 'MISSED'})"
        rows.append(
            (
                label,
                r["prompts"],
                r["overflows"],
                r["map"],
                limit,
                r["merge"],
                r["provider_calls"],
                f"{r['facts']}/{N}",
                f"{r['wall']:.2f}",
            )
        )
    budget = stage("cfg").config.ground_truth.answer_tokens
    print(
        f"Reference answer from {N} contexts of 50-3,000 tokens ({total:,} tokens in all), "
        f"judge window {WINDOW:,}, answer budget {budget}, usable tokens per prompt {usable:,} "
        f"(volume lower bound {lower} map calls), fake judge {LATENCY_S * 1000:.0f} ms, "
        f"concurrency {CONCURRENCY}; one run, side by side"
    )
    print(
        table(
            rows,
            (
                "scheme",
                "prompts",
                "overflows",
                "map calls",
                "bound 1.1x",
                "merge calls",
                "provider calls",
                "facts kept",
                "wall s",
            ),
        )
    )


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
