"""Judging a turn in its conversation: right grades, keys that never cross histories, a bound.

A simulated conversational set, English and Chinese (``--conversations`` of them, half each,
6 turns each): the first turn names a product (``Varnel-017``, ``星澜017型``) and asks about it;
turns 2–6 ask about one of its aspects without naming it ("How much does it cost?", "它多少
钱？"), and the assistant's answers never name it either. The corpus holds one passage per
(product, aspect). Each turn is graded on 6 candidates: the passage of its product and aspect
(planted grade 3), two of its product's other aspects (1), and the asked aspect of three other
products (0), drawn from a few popular products, so one follow-up's words meet one passage
under many histories. The judge is scripted (the fake provider's responder): it finds the
products named anywhere in the question it is shown; a passage of a named product gets 3 for
the asked aspect and 1 otherwise, a passage of a product not named 0, and with no product
named at all it can only guess from the aspect (3, else 0). It is off by one grade on 3 % of
pairs (a fixed draw per prompt and passage). So it can grade a follow-up right only when the
first turn is in its prompt.

Every pair goes through the real path: the question as the judge is shown it
(``conversation.in_context``), ``judging.grade_through_store`` with a judgment store and the
memo behind the gateway, three ways: in context (``conversation.max_history_turns`` 8, the
default), bounded (2) and alone (0).

Printed, each goal met or not:

- agreement with the planted grades, side by side (goal: in context ≥ 95 %, alone below);
- grades reused across different histories: store keys per (utterance, document) under
  distinct histories (goal: 0 in context);
- judge prompt tokens per judged pair by turn, turn 6 against turn 1 (goal: with
  ``max_history_turns`` 2 no growth past turn 3, and no prompt shows more than 2 exchanges);
- ≥ 90 % of the ``rewrite`` pool's grades from the ``last`` pool's judgments where the turn
  and the document coincide: each form searched through the local backend as a tune searches
  it (``collect.query_form``), the ``last`` pool graded first, then the ``rewrite`` pool,
  through one judgment store; where each of its grades came from (store, memo, paid).

Run from the repository root: ``python bench/bench_conversations.py [--conversations 300]``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _util
import numpy as np

from ragaudit.cache import hold_gateway
from ragaudit.cache._fake import FAKE  # the scripted provider: benches and tests only
from ragaudit.config import RunConfig, load_config
from ragaudit.conversation import exchanges, in_context, kept_history, turn_band
from ragaudit.dataset import Question, load_questions
from ragaudit.judging import (
    Judge,
    JudgmentStore,
    StoreGrading,
    grade_through_store,
    pair_key,
    prompt_tokens,
)
from ragaudit.query_forms import search_queries
from ragaudit.tuning import Variant, retrieve

TURNS = 6
CANDIDATES = {"right": 1, "same product": 2, "other product": 3}
NOISE = 0.03
POPULAR = 8
"""Products whose passages stand as the other products' candidates (so they recur)."""
SETTINGS = {"in context": 8, "bounded": 2, "alone": 0}
BOUND = "bounded"

# Aspect → (follow-up question, passage, answer), per language; {e} the product, {n} a number.
ASPECTS: dict[str, dict[str, tuple[str, str, str]]] = {
    "en": {
        "about": (
            "Tell me about the {e} e-bike.",
            "The {e} is an electric bike built for commuting in the city.",
            "It is an electric bike built for commuting in the city.",
        ),
        "price": (
            "How much does it cost?",
            "The {e} costs {n}0 dollars at launch.",
            "It costs {n}0 dollars.",
        ),
        "battery": (
            "How long does its battery last?",
            "The battery of the {e} lasts {n} hours on one charge.",
            "About {n} hours on one charge.",
        ),
        "weight": (
            "How heavy is it?",
            "The {e} weighs {n} kilograms with its battery.",
            "It weighs {n} kilograms.",
        ),
        "warranty": (
            "What warranty does it come with?",
            "The {e} comes with a {n}-year warranty on frame and motor.",
            "A {n}-year warranty on frame and motor.",
        ),
        "charging": (
            "How long does it take to charge?",
            "Charging the {e} from empty takes {n} hours.",
            "About {n} hours from empty.",
        ),
        "range": (
            "How far can it go?",
            "The {e} travels {n}0 kilometres per charge.",
            "About {n}0 kilometres per charge.",
        ),
        "speed": (
            "How fast can it ride?",
            "The top speed of the {e} is {n}5 kilometres per hour.",
            "Up to {n}5 kilometres per hour.",
        ),
        "maker": (
            "Who makes it?",
            "The {e} is made by workshop number {n} in Lyon.",
            "Workshop number {n} in Lyon.",
        ),
    },
    "zh": {
        "about": (
            "请介绍一下{e}电动自行车。",
            "{e}是一款为城市通勤设计的电动自行车。",
            "这是一款为城市通勤设计的电动自行车。",
        ),
        "price": ("它多少钱？", "{e}的首发价格是{n}00元。", "价格是{n}00元。"),
        "battery": (
            "电池能用多久？",
            "{e}的电池充满一次可以用{n}个小时。",
            "充满一次能用{n}个小时。",
        ),
        "weight": ("它有多重？", "{e}连同电池重{n}公斤。", "重{n}公斤。"),
        "warranty": ("保修多久？", "{e}的车架和电机保修{n}年。", "车架和电机保修{n}年。"),
        "charging": ("充电要多长时间？", "{e}从没电到充满需要{n}个小时。", "大约{n}个小时。"),
        "range": ("充一次电能骑多远？", "{e}充一次电能骑{n}0公里。", "大约{n}0公里。"),
        "speed": ("最高速度是多少？", "{e}的最高时速是{n}5公里。", "最高时速{n}5公里。"),
        "maker": ("是哪家公司生产的？", "{e}由杭州第{n}工坊生产。", "杭州第{n}工坊。"),
    },
}
PRODUCT = {"en": "Varnel-{i:03d}", "zh": "星澜{i:03d}型"}
PRODUCT_PATTERN = re.compile(r"Varnel-\d{3}|星澜\d{3}型")


@dataclass(frozen=True)
class Passage:
    """A corpus passage: its product and aspect."""

    id: str
    text: str
    product: str
    aspect: str


@dataclass
class World:
    """The simulated set: questions, their candidates, passages and planted grades."""

    questions: list[Question] = field(default_factory=list)
    candidates: dict[str, list[Passage]] = field(default_factory=dict)
    asked: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Question id → (its product, its aspect)."""
    passages: dict[str, Passage] = field(default_factory=dict)
    """By text: what the scripted judge looks up."""
    utterances: dict[str, str] = field(default_factory=dict)
    """A turn's words → its aspect (the judge's reading of the asked aspect)."""

    def planted(self, qid: str, passage: Passage) -> int:
        """The planted grade of ``passage`` for question ``qid``."""
        product, aspect = self.asked[qid]
        if passage.product != product:
            return 0
        return 3 if passage.aspect == aspect else 1


def _unit(*parts: Any) -> float:
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def simulate(conversations: int, root: Path, seed: int = 0) -> World:
    """Write the set as conversation turns (``history``, ``rewrite``) and load it back."""
    rng = random.Random(seed)
    world = World()
    rows: list[dict[str, Any]] = []
    corpus: list[dict[str, Any]] = []
    per_language = {"en": (conversations + 1) // 2, "zh": conversations // 2}
    for lang, count in per_language.items():
        aspects = ASPECTS[lang]
        by_product: dict[str, dict[str, Passage]] = {}
        for i in range(count):
            product = PRODUCT[lang].format(i=i)
            by_product[product] = {}
            for aspect, (utterance, passage, _) in aspects.items():
                text = passage.format(e=product, n=1 + (i * 7 + len(aspect)) % 9)
                p = Passage(f"{lang}-{i:03d}-{aspect}", text, product, aspect)
                by_product[product][aspect] = p
                world.passages[text] = p
                world.utterances[utterance.format(e=product)] = aspect
                corpus.append({"id": p.id, "text": text, "metadata": {"collection": lang}})
        popular = list(by_product)[:POPULAR]
        for i, product in enumerate(by_product):
            conversation = f"{lang}-{i:03d}"
            follow_ups = rng.sample([a for a in aspects if a != "about"], TURNS - 1)
            history: list[dict[str, str]] = []
            for turn, aspect in enumerate(["about", *follow_ups], start=1):
                utterance, _, answer = aspects[aspect]
                qid = f"{conversation}::{turn}"
                words = utterance.format(e=product)
                rows.append(
                    {
                        "question_id": qid,
                        "question": words,
                        "language": lang,
                        "conversation_id": conversation,
                        "turn": turn,
                        "history": list(history),
                        "rewrite": REWRITES[lang][aspect].format(e=product) if turn > 1 else None,
                        "filters": {"collection": lang},
                    }
                )
                n = 1 + (i * 7 + len(aspect)) % 9
                history += [
                    {"role": "user", "text": words},
                    {"role": "assistant", "text": answer.format(n=n)},
                ]
                own = [a for a in by_product[product] if a != aspect]
                others = rng.sample(
                    [p for p in popular if p != product], CANDIDATES["other product"]
                )
                world.asked[qid] = (product, aspect)
                world.candidates[qid] = [
                    by_product[product][aspect],
                    *(by_product[product][a] for a in rng.sample(own, CANDIDATES["same product"])),
                    *(by_product[p][aspect] for p in others),
                ]
    path = root / "conversations.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in corpus), "utf-8"
    )
    world.questions = load_questions(path)
    return world


REWRITES = {
    "en": {
        "about": "Tell me about the {e} e-bike.",
        "price": "How much does the {e} cost?",
        "battery": "How long does the battery of the {e} last?",
        "weight": "How heavy is the {e}?",
        "warranty": "What warranty does the {e} come with?",
        "charging": "How long does it take to charge the {e}?",
        "range": "How far can the {e} go?",
        "speed": "How fast can the {e} ride?",
        "maker": "Who makes the {e}?",
    },
    "zh": {
        "about": "请介绍一下{e}电动自行车。",
        "price": "{e}多少钱？",
        "battery": "{e}的电池能用多久？",
        "weight": "{e}有多重？",
        "warranty": "{e}保修多久？",
        "charging": "{e}充电要多长时间？",
        "range": "{e}充一次电能骑多远？",
        "speed": "{e}的最高速度是多少？",
        "maker": "{e}是哪家公司生产的？",
    },
}
"""A follow-up made to stand alone: the product named in it (the given ``rewrite``)."""


def scripted_judge(world: World) -> Any:
    """The fake provider's responder: right only when the product is in the prompt."""

    def respond(req: Any) -> dict[str, Any] | None:
        if req.title != "RelevanceGrade":
            return None
        shown, context = req.payload["question"], req.payload["context"]
        passage = world.passages[context]
        # The turn is the prompt's last line (``conversation.render``), or the whole question.
        asked = world.utterances.get(shown.rsplit("\n", 1)[-1])
        named = set(PRODUCT_PATTERN.findall(shown))
        if passage.product in named:
            grade = 3 if passage.aspect == asked else 1
        elif not named:
            grade = 3 if passage.aspect == asked else 0  # a guess: which product is "it"?
        else:
            grade = 0
        if _unit("noise", shown, context) < NOISE:
            grade = grade + 1 if grade < 3 else 2
        return {"grade": grade, "reason": "scripted"}

    return respond


def config_for(root: Path, name: str, history: int) -> RunConfig:
    """A run's config for one setting: its own memo and the fake judge."""
    data = {
        "questions": str(root / "conversations.jsonl"),
        "runs_root": str(root / f"runs-{name}"),
        "cache_dir": str(root / f"cache-{name}"),
        "models": {"judge": "fake/judge", "embedder": "fake/embed", "backoff_s": 0.0},
        "conversation": {"max_history_turns": history},
    }
    return load_config(None, data, environ={})


@dataclass
class Setting:
    """What one way of judging gave."""

    name: str
    history: int
    agree: dict[str, list[bool]] = field(default_factory=lambda: defaultdict(list))
    """By slice (``all``, a language, a turn band) → whether each pair's grade was planted."""
    tokens: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    """Turn → prompt tokens of each judged pair."""
    keys: dict[str, set[tuple[str, ...]]] = field(default_factory=lambda: defaultdict(set))
    """Store key → the histories of the pairs it graded."""
    groups: dict[tuple[str, str], set[str]] = field(default_factory=lambda: defaultdict(set))
    """(utterance, document) → the store keys it was graded under."""
    histories: dict[tuple[str, str], set[tuple[str, ...]]] = field(
        default_factory=lambda: defaultdict(set)
    )
    shown: dict[tuple[str, str], set[str]] = field(default_factory=lambda: defaultdict(set))
    """(utterance, document) → the question texts the judge was shown with it."""
    most_exchanges: int = 0
    paid: int = 0
    stored: int = 0
    wall: float = 0.0

    def share(self, part: str) -> float:
        xs = self.agree.get(part, [])
        return float(np.mean(xs)) if xs else float("nan")

    @property
    def reused(self) -> int:
        """Pairs graded under a key made for another history."""
        return sum(len(h) - 1 for h in self.keys.values() if len(h) > 1)

    @property
    def shared_keys(self) -> int:
        return sum(len(h) > 1 for h in self.keys.values())


async def judge_setting(world: World, root: Path, name: str, history: int) -> Setting:
    """Grade every (turn, candidate) pair as ``name`` judges it, through the store."""
    cfg = config_for(root, name, history)
    out = Setting(name, history)
    started = time.perf_counter()
    with hold_gateway(cfg) as gw:
        judge = Judge.from_config(cfg.models, gw, 64)
        shown = {
            q.question_id: in_context(q, cfg.conversation, judge.model, judge.budget)
            for q in world.questions
        }
        candidates = {
            qid: [{"context_id": p.id, "text": p.text} for p in ps]
            for qid, ps in world.candidates.items()
        }
        store = JudgmentStore(root / f"store-{name}")
        done = await grade_through_store(judge, shown, candidates, store, source=f"bench:{name}")
        out.paid, out.stored = done.paid, done.added
        for q in world.questions:
            qid, said = q.question_id, tuple(t.text for t in q.history or [])
            kept, _ = kept_history(q, cfg.conversation, judge.model, judge.budget)
            out.most_exchanges = max(out.most_exchanges, len(exchanges(kept)))
            grades = {r["context_id"]: r["grade"] for r in done.graded[qid].rows}
            for p in world.candidates[qid]:
                ok = grades.get(p.id) == world.planted(qid, p)
                for part in ("all", q.language, f"turn {turn_band(q.turn)}"):
                    out.agree[part].append(ok)
                key = pair_key(judge, shown[qid], p.text)
                out.keys[key].add(said)
                out.groups[(q.question, p.text)].add(key)
                out.histories[(q.question, p.text)].add(said)
                out.shown[(q.question, p.text)].add(shown[qid].question)
                out.tokens[q.turn or 1].append(prompt_tokens(judge, shown[qid], p.text))
    out.wall = time.perf_counter() - started
    return out


@dataclass
class Reuse:
    """Where the ``rewrite`` pool's grades came from, after the ``last`` pool was graded."""

    pool: dict[str, int]
    """The rewrite pool's pairs by source (``store``, ``memo``, ``paid``)."""
    coinciding: dict[str, int]
    """The same, of its pairs the ``last`` pool holds too (same turn, same document)."""
    sources: dict[str, dict[str, int]]
    """Per form, where each searched text came from (``query_forms.SOURCES``)."""
    last_size: int
    """Pairs of the ``last`` pool."""
    last_paid: int
    rewrite_paid: int

    @property
    def share(self) -> float:
        """Of the coinciding pairs, the share graded from the store or the memo."""
        n = sum(self.coinciding.values())
        reused = self.coinciding.get("store", 0) + self.coinciding.get("memo", 0)
        return reused / n if n else float("nan")


async def rewrite_reuse(world: World, root: Path) -> Reuse:
    """The ``last`` pool's grades serving the ``rewrite`` pool, as a tune over the forms pools.

    Each form searched through the local backend as the tune searches it: the form's text per
    turn (``query_forms.search_queries``, a rewrite the set gives taken without a call), then
    ``tuning.retrieve`` with the variant's ``collect.query_form``; its top 5 graded in context
    through one judgment store (``judging.grade_through_store``), ``last`` first. A pair of the
    ``rewrite`` pool whose turn and document the ``last`` pool holds has the same key (the judge
    is shown the turn with its history whatever was searched), so its grade should come from
    the store, not be paid again.
    """
    data: dict[str, Any] = {
        "questions": str(root / "conversations.jsonl"),
        "runs_root": str(root / "runs-forms"),
        "cache_dir": str(root / "cache-forms"),
        "models": {"judge": "fake/judge", "embedder": "fake/embed", "backoff_s": 0.0},
        "collect": {
            "backend": "local",
            "index_path": str(root / "index"),
            "corpus": str(root / "corpus.jsonl"),
            "mode": "bm25",
            "top_n": 5,
            "filter_field": "collection",
        },
    }
    pools: dict[str, dict[str, list[dict[str, str]]]] = {}
    done: dict[str, StoreGrading] = {}
    sources: dict[str, dict[str, int]] = {}
    store = JudgmentStore(root / "store-forms")
    for form in ("last", "rewrite"):
        cfg = load_config(
            None, {**data, "collect": {**data["collect"], "query_form": form}}, environ={}
        )
        with hold_gateway(cfg) as gw:

            async def embed(texts: list[str], gw: Any = gw, cfg: RunConfig = cfg) -> Any:
                return await gw.aembed(texts, model=cfg.models.embedder_model)

            judge = Judge.from_config(cfg.models, gw, 64)
            queries = await search_queries(world.questions, form, cfg.conversation, judge)
            sources[form] = dict(Counter(s.source for s in queries.values()))
            texts: dict[tuple[str, str], str] = {}
            (run,) = await retrieve(
                [Variant(form, cfg)], world.questions, 5, embed, texts, {form: queries}
            )
            if run.status != "ok":
                raise RuntimeError(f"the {form} form's search failed: {run.error}")
            pools[form] = {
                qid: [{"context_id": c, "text": texts[(qid, c)]} for c in got.ids]
                for qid, got in run.questions.items()
            }
            shown = {
                q.question_id: in_context(q, cfg.conversation, judge.model, judge.budget)
                for q in world.questions
            }
            done[form] = await grade_through_store(
                judge, shown, pools[form], store, source=f"bench:{form}"
            )
    how = done["rewrite"].how
    last = {(q, c["context_id"]) for q, cs in pools["last"].items() for c in cs}
    pairs = [(q, c["context_id"]) for q, cs in pools["rewrite"].items() for c in cs]
    return Reuse(
        pool=dict(Counter(how[p] for p in pairs)),
        coinciding=dict(Counter(how[p] for p in pairs if p in last)),
        sources=sources,
        last_size=len(last),
        last_paid=done["last"].paid,
        rewrite_paid=done["rewrite"].paid,
    )


def line(goal: str, ok: bool, why: str = "") -> str:
    return f"  goal {goal}: " + ("met" if ok else f"not met: {why}")


async def main_async(args: argparse.Namespace) -> list[str]:
    root = _util.scratch("conversations")
    world = simulate(args.conversations, root)
    pairs = sum(len(c) for c in world.candidates.values())
    out = [
        f"bench_conversations: {args.conversations} conversations × {TURNS} turns (English "
        f"{sum(q.language == 'en' for q in world.questions) // TURNS}, Chinese "
        f"{sum(q.language == 'zh' for q in world.questions) // TURNS}), {pairs:,} (turn, passage) "
        f"pairs, {sum(CANDIDATES.values())} a turn; scripted judge off by one on "
        f"{NOISE:.0%}; load average {_util.load_average()}"
    ]
    FAKE.reset()
    settings: dict[str, Setting] = {}
    with FAKE.script(scripted_judge(world)):
        for name, history in SETTINGS.items():
            settings[name] = await judge_setting(world, root, name, history)
    names = list(SETTINGS)
    header = ("agreement with the planted grades", *(f"{n} ({SETTINGS[n]})" for n in names))
    parts = ["all", "en", "zh", "turn 1", "turn 2", "turn 3-5", "turn 6+"]
    rows = [
        (
            part,
            *(f"{settings[n].share(part):.1%} (n {len(settings[n].agree[part]):,})" for n in names),
        )
        for part in parts
    ]
    out.append("max_history_turns in brackets")
    out.append(_util.table(rows, header))
    inside, alone = settings["in context"].share("all"), settings["alone"].share("all")
    out.append(line("in context ≥ 95 %", inside >= 0.95, f"{inside:.1%}"))
    out.append(line("alone below 95 %", alone < 0.95, f"{alone:.1%}"))
    rows = []
    for n in names:
        s = settings[n]
        spread = [len(h) for h in s.histories.values() if len(h) > 1]
        keys = [len(s.groups[g]) for g, h in s.histories.items() if len(h) > 1]
        seen = [len(s.shown[g]) for g, h in s.histories.items() if len(h) > 1]
        rows.append(
            (
                n,
                f"{len(spread):,}",
                f"{sum(spread):,}",
                f"{sum(seen):,}",
                f"{sum(keys):,}",
                f"{s.shared_keys:,}",
                f"{s.reused:,}",
                f"{s.paid:,} / {s.stored:,}",
                f"{s.wall:.1f} s",
            )
        )
    out.append(
        "(utterance, document) pairs met under more than one history, and the store keys they "
        "were graded under"
    )
    out.append(
        _util.table(
            rows,
            (
                "setting",
                "such pairs",
                "their histories",
                "as shown",
                "their keys",
                "keys across histories",
                "grades reused across histories",
                "judged / stored",
                "wall",
            ),
        )
    )
    out.append(
        "A key is of what the judge is shown: where a bound leaves two conversations' last "
        "exchanges word for word the same, one grade serves both (as shown = keys)."
    )
    reused = settings["in context"].reused
    out.append(
        line("0 grades reused across different histories (in context)", reused == 0, f"{reused}")
    )
    out.append("judge prompt tokens per judged pair, by turn")
    rows = [
        (str(turn), *(f"{np.mean(settings[n].tokens[turn]):.1f}" for n in names))
        for turn in range(1, TURNS + 1)
    ]
    rows.append(
        (
            "turn 6 / turn 1",
            *(
                f"{np.mean(settings[n].tokens[TURNS]) / np.mean(settings[n].tokens[1]):.3f}"
                for n in names
            ),
        )
    )
    out.append(_util.table(rows, ("turn", *names)))
    bounded = settings[BOUND]
    k = bounded.history
    grow = float(
        max(np.mean(bounded.tokens[t]) for t in range(k + 1, TURNS + 1))
        / np.mean(bounded.tokens[k + 1])
    )
    out.append(
        line(
            f"no prompt shows more than {k} exchanges with max_history_turns {k}",
            bounded.most_exchanges <= k,
            f"{bounded.most_exchanges} exchanges shown",
        )
    )
    out.append(
        line(
            f"no growth past turn {k + 1} (max of turns {k + 1}–{TURNS} / turn {k + 1} ≤ 1.10)",
            grow <= 1.10,
            f"{grow:.3f}",
        )
    )
    with FAKE.script(scripted_judge(world)):
        reuse = await rewrite_reuse(world, root)
    said = "; ".join(
        f"{form}: " + ", ".join(f"{k} {v:,}" for k, v in sorted(n.items()))
        for form, n in reuse.sources.items()
    )
    out.append(f"searched texts by source (query_forms.SOURCES) — {said}")
    out.append(
        "the rewrite pool graded after the last pool, through one judgment store: "
        "where each grade came from"
    )
    rows = [
        (part, *(f"{n.get(k, 0):,}" for k in ("store", "memo", "paid")), f"{sum(n.values()):,}")
        for part, n in (
            ("coinciding with the last pool", reuse.coinciding),
            ("the whole rewrite pool", reuse.pool),
        )
    ]
    out.append(_util.table(rows, ("rewrite pool pairs", "store", "memo", "paid", "all")))
    out.append(
        f"judged: the last pool's {reuse.last_size:,} pairs, {reuse.last_paid:,} judged; then the "
        f"rewrite pool's {sum(reuse.pool.values()):,}, {reuse.rewrite_paid:,} judged (its pairs "
        "the last pool lacked)"
    )
    goal = "≥ 90 % of the rewrite pool's grades from the last pool's judgments"
    share = reuse.share
    out.append(
        f"rewrite pool from the last pool's judgments: {share:.1%} of "
        f"{sum(reuse.coinciding.values()):,} coinciding pairs (same turn and history, same "
        f"document)"
    )
    out.append(line(goal, share >= 0.90, f"{share:.1%}"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=300)
    args = parser.parse_args()
    for text in asyncio.run(main_async(args)):
        print(text)


if __name__ == "__main__":
    main()
