"""Nuggets from 200 contexts a question: our map-reduce against a sequential refinement chain.

Per language (en, zh) one question with 200 synthetic contexts (filler of 40-700 tokens,
seeded) and 30 planted facts, each stated in 1-5 contexts and in another wording each time
(five wordings a fact). The judge window is 8,192 tokens, the fake judge answers in 200 ms
with gateway concurrency 16. The simulated judge (:class:`BenchJudge`, below) reads perfectly:
it lists the planted facts it is shown, merges wordings of one fact, stops at ``max_tokens``
like a real model (the fake provider cuts the reply) and, like a provider, rejects a prompt
whose tokens plus ``max_tokens`` exceed the window, counting it as an overflow.

Schemes:
- ours: the ground_truth stage's extraction (``ragaudit.nuggets``): window-filling groups
  asked in parallel, then merge rounds, cap 30;
- chain: castorini's nuggetizer scheme, 10 contexts a call in sequence, each call given the
  nuggets so far and asked for the updated list (at most 30), no source ids.

A fact counts as recovered when exactly one nugget states it; for ours the nugget must also
name at least one context that holds the fact (the chain names none).

Measured 2026-11-25 (one run, a loaded 2-core machine; prompt and answer tokens counted with
cl100k on what the provider received):

    lang scheme calls (map+merge) prompt tok answer tok over window wall s facts
    en   ours   14 (13+1)          84,902      3,395      0           2.60   30/30
    en   chain  20 (sequential)    86,889      5,493      0           5.60   30/30
    zh   ours   17 (16+1)         110,334      3,754      0           1.06   30/30
    zh   chain  20 (sequential)   111,301      6,280      0           5.06   30/30

Context tokens: en 78,930, zh 102,325.

The judge reads perfectly, so both schemes recover every fact; what differs is the source ids
(the chain has none), the wall time (the chain cannot run its calls at once) and the answer
tokens (each chain step writes the whole list again).
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from typing import Any

from _util import scratch, table  # first: the offline environment
from conftest import make_config
from pydantic import BaseModel

from ragaudit.cache import count_tokens
from ragaudit.cache._fake import FAKE, FakeRequest
from ragaudit.judging import Judge
from ragaudit.nuggets import NuggetResult, PlantedFact, PlantedTruth, extract_nuggets
from ragaudit.prompts._base import Prompt
from ragaudit.tasks._common import gateway_for

N_CONTEXTS = 200
N_FACTS = 30
WINDOW = 8192
LATENCY_S = 0.2
CONCURRENCY = 16
CHAIN_STEP = 10
MAX_NUGGETS = 30

QUESTIONS = {
    "en": "When was each unit of the plant put into service?",
    "zh": "电厂的各个机组分别是哪一年投入使用的？",
}
WORDINGS = {
    "en": [
        "unit {i} was commissioned in {y}",
        "the commissioning year of unit {i} is {y}",
        "unit {i} entered service in {y}",
        "in {y}, unit {i} was put into operation",
        "unit {i} has been operating since {y}",
    ],
    "zh": [
        "{i}号机组于{y}年投入使用",
        "{i}号机组的投用年份是{y}年",
        "{i}号机组在{y}年开始运行",
        "{y}年，{i}号机组投入运行",
        "{i}号机组自{y}年起运行",
    ],
}
FILLER = {
    "en": [
        *[
            "the",
            "plant",
            "reports",
            "output",
            "maintenance",
            "staff",
            "budget",
            "grid",
            "demand",
            "coal",
            "gas",
            "water",
        ],
        *[
            "turbine",
            "boiler",
            "inspection",
            "schedule",
            "safety",
            "training",
            "contract",
            "supplier",
        ],
    ],
    "zh": list(
        "电厂报告显示发电量维护人员预算电网需求燃料水源涡轮锅炉检查计划安全培训合同供应地区天气季节"
    ),
}


class ChainInput(BaseModel):
    """The chain's step: the nuggets so far and the next contexts."""

    question: str
    nuggets: list[str]
    contexts: list[str]


class ChainNuggets(BaseModel):
    """The chain's updated nugget list."""

    nuggets: list[str]


CHAIN = Prompt(
    name="bench_nugget_chain",
    version="1",
    input_model=ChainInput,
    output_model=ChainNuggets,
    instruction={
        "en": "Update the list of nuggets (at most 30) with the facts of the new contexts.",
        "zh": "用新文档中的事实更新要点列表（最多 30 个）。",
    },
)


class BenchJudge(PlantedTruth):
    """The planted-truth judge, a provider's window check, and the chain's update step."""

    def __init__(self, facts: list[PlantedFact]) -> None:
        super().__init__(facts)
        self.calls = 0
        self.overflows: list[int] = []
        self.tokens_in = 0
        self.tokens_out = 0

    def __call__(self, req: FakeRequest) -> Any:
        import litellm  # after ragaudit (via _util): its import reads the offline environment

        self.calls += 1
        prompt = litellm.token_counter(model="gpt-4", messages=req.messages)
        if prompt + req.params.get("max_tokens", 0) > req.options.window:
            self.overflows.append(prompt + req.params["max_tokens"])
            raise litellm.ContextWindowExceededError(
                message=f"{prompt} + {req.params['max_tokens']} tokens > {req.options.window}",
                model=req.model,
                llm_provider="fake",
            )
        self.tokens_in += prompt
        reply = self._reply(req)
        if reply is not None:
            self.tokens_out += len(litellm.encode(model="gpt-4", text=reply))
        return reply

    def _reply(self, req: FakeRequest) -> str | None:
        if req.title == "ChainNuggets":
            p = req.payload
            kept = list(p.get("nuggets", []))
            known = {f.key for f in map(self.fact_of, kept) if f is not None}
            for ctx in p.get("contexts", []):
                for key, level in self.stated(ctx).items():
                    if level == "full" and key not in known and len(kept) < MAX_NUGGETS:
                        fact = next(f for f in self.facts if f.key == key)
                        kept.append(next(x for x in fact.forms if x.lower() in ctx.lower()))
                        known.add(key)
            return json.dumps({"nuggets": kept}, ensure_ascii=False)
        out = super().__call__(req)
        return None if out is None else json.dumps(out, ensure_ascii=False)


def make_question(lang: str, seed: int) -> tuple[list[PlantedFact], list[tuple[str, str]], dict]:
    """200 contexts of filler with 30 facts planted in 1-5 contexts each, worded differently."""
    rng = random.Random(seed)
    facts = [
        PlantedFact(
            f"f{i}",
            "okay" if i % 3 == 0 else "vital",
            [w.format(i=i + 1, y=1900 + 3 * i) for w in WORDINGS[lang]],
        )
        for i in range(N_FACTS)
    ]
    sep = " " if lang == "en" else ""
    stop = ". " if lang == "en" else "。"
    texts = []
    for _ in range(N_CONTEXTS):
        words = [rng.choice(FILLER[lang]) for _ in range(rng.randint(40, 700))]
        texts.append(sep.join(words) + stop)
    truth: dict[str, set[str]] = {}
    for f in facts:
        places = rng.sample(range(N_CONTEXTS), rng.randint(1, 5))
        for k, c in enumerate(places):
            words = texts[c].split(sep) if sep else list(texts[c])
            at = rng.randint(0, len(words))
            words.insert(at, f"{stop}{f.forms[k]}{stop}")
            texts[c] = sep.join(words)
            truth.setdefault(f.key, set()).add(f"c{c:03d}")
    return facts, [(f"c{i:03d}", t) for i, t in enumerate(texts)], truth


def recovered(
    judge: PlantedTruth, texts: list[str], sources: list[list[str]] | None, truth: dict
) -> int:
    """Facts stated by exactly one nugget (with a correct source id, when sources are given)."""
    by_fact: dict[str, list[int]] = {}
    for k, text in enumerate(texts):
        fact = judge.fact_of(text)
        if fact is not None:
            by_fact.setdefault(fact.key, []).append(k)
    ok = 0
    for key, ks in by_fact.items():
        if len(ks) == 1 and (sources is None or set(sources[ks[0]]) & truth[key]):
            ok += 1
    return ok


async def chain(
    gateway: Any, judge_model: str, lang: str, contexts: list[tuple[str, str]]
) -> tuple[list[str], int, int, int]:
    """The sequential chain: (nuggets, calls, tokens in, tokens out)."""
    nuggets: list[str] = []
    calls = tokens_in = tokens_out = 0
    for i in range(0, len(contexts), CHAIN_STEP):
        inp = ChainInput(
            question=QUESTIONS[lang],
            nuggets=nuggets,
            contexts=[t for _, t in contexts[i : i + CHAIN_STEP]],
        )
        judged = await gateway.astructured(
            model=judge_model,
            messages=CHAIN.messages(inp, lang),
            schema=ChainNuggets,
            prompt_version=CHAIN.key,
            temperature=0.0,
            max_tokens=1024,
        )
        calls += judged.calls
        tokens_in += judged.tokens_in
        tokens_out += judged.tokens_out
        if judged.ok:
            nuggets = judged.value.nuggets
    return nuggets, calls, tokens_in, tokens_out


async def main() -> None:
    rows = []
    for n, lang in enumerate(("en", "zh")):
        facts, contexts, truth = make_question(lang, seed=n)
        total = sum(count_tokens("gpt-4", t) for _, t in contexts)
        for scheme in ("ours", "chain"):
            config = make_config(
                scratch(f"nuggets-{lang}-{scheme}"),
                judge=f"fake/judge?latency={LATENCY_S}&window={WINDOW}",
                models__concurrency=CONCURRENCY,
            )
            gateway = gateway_for(config)
            judge = BenchJudge(facts)
            FAKE.reset()
            started = time.perf_counter()
            with FAKE.script(judge):
                if scheme == "ours":
                    result: NuggetResult = await extract_nuggets(
                        Judge(gateway, config.models.judge_model, WINDOW, 1024),
                        QUESTIONS[lang],
                        lang,
                        contexts,
                        max_nuggets=MAX_NUGGETS,
                    )
                    texts = [x.text for x in result.nuggets]
                    found = recovered(judge, texts, [x.context_ids for x in result.nuggets], truth)
                    calls = result.calls
                    detail = f"{result.map_calls} map + {result.merge_calls} merge"
                else:
                    texts, calls, _, _ = await chain(
                        gateway, config.models.judge_model, lang, contexts
                    )
                    found = recovered(judge, texts, None, truth)
                    detail = "sequential"
            wall = time.perf_counter() - started
            rows.append(
                (
                    lang,
                    scheme,
                    f"{total:,}",
                    calls,
                    detail,
                    f"{judge.tokens_in:,}",
                    f"{judge.tokens_out:,}",
                    len(judge.overflows),
                    f"{wall:.2f}",
                    f"{found}/{N_FACTS} ({found / N_FACTS:.0%})",
                )
            )
    print(
        f"Nuggets from {N_CONTEXTS} contexts a question ({N_FACTS} facts in 1-5 contexts each, "
        f"worded differently), judge window {WINDOW:,}, fake judge {LATENCY_S * 1000:.0f} ms a "
        f"call, concurrency {CONCURRENCY}, cap {MAX_NUGGETS}; one run per row"
    )
    print(
        table(
            rows,
            (
                "lang",
                "scheme",
                "context tokens",
                "judge calls",
                "calls",
                "prompt tokens",
                "answer tokens",
                "over window",
                "wall s",
                "facts recovered",
            ),
        )
    )


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
