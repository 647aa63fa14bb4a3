"""Judged relevance at TREC cost: the ordering modes side by side, and what a second night pays.

Questions x 200 candidates (50, then 200 of them relevant), judged through the real gateway by
the fake provider at 200 ms a call, concurrency 16. A scripted judge knows the truth: every
candidate has a true quality (the relevant ones above the rest) and a true grade (the best
quarter of the relevant ones 3, the others 2; the irrelevant ones 1 or 0). Its grades are off
by one grade 15 % of the time (per candidate, so a re-ask gives the same grade); its pairwise,
setwise and listwise answers are wrong 10 % of the time, and the passage shown first is
preferred 10 % more often (drawn per request). The engine's order is the true order blurred by
noise (as in ``bench_sort.py``).

Grading is the same prompts in every mode, so it is asked once per setting and its cost added
to every mode; the ordering of each mode starts from a fresh memo (nothing free).

Printed per mode (``full`` pairwise sample sort, ``head`` with each method, ``none``): judge
calls and prompt tokens per question (grading + ordering), the ordering's wall time, Kendall's
tau-b of the judge's order against the truth over the truth's top 10, and the error of the
engine's NDCG@10 measured with the judge's grades (mean |estimate - true| over questions, true
from the true grades). Then the goals, met or not with the reason. Then a second night: 10 % of
each question's candidates replaced by new ones and the engine's order drawn again; what each
mode pays then against the first night, both nights counted as the prompt tokens that reached
the provider (memo hits are free; the fake provider counts words, so these are not the
gateway's token counts of the table above).

With ``--batch N`` the grading is also asked N candidates a call and its agreement with one
per call printed. The scripted judge draws a batch's errors per request, independently of the
one-per-call grades, so that agreement measures the noise of this judge, not the effect of
neighbours in a real judge's prompt.

    python bench/bench_judging.py                  # 200 candidates, 200 ms a call, all modes
    python bench/bench_judging.py --questions 4 --full-questions 2   # quicker
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import random
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _util import scratch, table
from scipy.stats import kendalltau

import ragaudit  # noqa: F401  (offline environment first)
from ragaudit.cache import Gateway, context_window
from ragaudit.cache._fake import FAKE, FakeRequest, count_prompt_tokens
from ragaudit.dataset import Question
from ragaudit.judging import (
    Judge,
    OrderOptions,
    PairwiseJudge,
    PreviousHead,
    by_grade,
    grade_candidates,
    head_pool,
    order_questions,
)
from ragaudit.ranking import average_ranks, ndcg_at_k

LATENCY_S = 0.2
CONCURRENCY = 16
GRADE_OFF = 0.15
WRONG = 0.10
BIAS = 0.10
CANDIDATES_N = 200
REPLACED = 0.10
ENGINE_NOISE = 0.56
SEED = 0
K = 10
MODEL = f"fake/judge?latency={LATENCY_S}"

MODES: dict[str, OrderOptions] = {
    "full": OrderOptions(order="full", strategy="sample"),
    "head:window": OrderOptions(order="head", head_method="window"),
    "head:setwise": OrderOptions(order="head", head_method="setwise"),
    "none": OrderOptions(order="none"),
}

_FILLER = (
    "The port grew around its harbour, its warehouses and the trade in grain, timber and salt; "
    "the records of the harbour master list the ships, their cargo and the dues they paid. "
)


def _unit(*parts: Any) -> float:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass
class World:
    """One night's questions: texts, true quality and grade, the engine's order."""

    questions: dict[str, Question] = field(default_factory=dict)
    texts: dict[str, dict[str, str]] = field(default_factory=dict)
    quality: dict[str, dict[str, float]] = field(default_factory=dict)
    grade: dict[str, dict[str, int]] = field(default_factory=dict)
    engine: dict[str, list[str]] = field(default_factory=dict)

    def candidates(self) -> dict[str, list[dict[str, Any]]]:
        return {
            qid: [{"context_id": c, "text": self.texts[qid][c]} for c in order]
            for qid, order in self.engine.items()
        }

    def truth(self, qid: str) -> list[str]:
        return sorted(self.quality[qid], key=lambda c: -self.quality[qid][c])


def _candidate(world: World, qid: str, cid: str, q: float, relevant: bool, rel_rank: float):
    world.texts[qid][cid] = f"[{qid}/{cid}] " + _FILLER * 2
    world.quality[qid][cid] = q
    if relevant:
        world.grade[qid][cid] = 3 if rel_rank < 0.25 else 2
    else:
        world.grade[qid][cid] = 1 if q > -0.5 else 0


def make_world(
    n_questions: int, n_relevant: int, seed: int = SEED, n_candidates: int = CANDIDATES_N
) -> World:
    world = World()
    for qi in range(n_questions):
        rng = random.Random(f"{seed}-{qi}")
        qid = f"q{qi:02d}"
        world.questions[qid] = Question(question_id=qid, question=f"History of port {qi}?")
        world.texts[qid], world.quality[qid], world.grade[qid] = {}, {}, {}
        for i in range(n_candidates):
            cid = f"c{i:03d}"
            relevant = i < n_relevant
            rank = i / max(1, n_relevant - 1) if relevant else 0.0
            q = 1 - rank if relevant else -rng.random()
            _candidate(world, qid, cid, q, relevant, rank)
        world.engine[qid] = _engine_order(world, qid, rng)
    return world


def _engine_order(world: World, qid: str, rng: random.Random) -> list[str]:
    score = {c: q + rng.gauss(0, ENGINE_NOISE) for c, q in world.quality[qid].items()}
    return sorted(score, key=lambda c: -score[c])


def next_night(world: World, seed: int = SEED + 1) -> World:
    """10 % of each question's candidates replaced by new ones; the engine order drawn again."""
    night = World(questions=world.questions)
    for qid in world.questions:
        rng = random.Random(f"night2-{seed}-{qid}")
        night.texts[qid] = dict(world.texts[qid])
        night.quality[qid] = dict(world.quality[qid])
        night.grade[qid] = dict(world.grade[qid])
        # 10 % on average whatever the pool: 20 of 200; 2 or 3 of 25 (3 with probability 0.5).
        share = len(world.texts[qid]) * REPLACED
        n_gone = int(share) + (rng.random() < share - int(share))
        gone = rng.sample(sorted(world.texts[qid]), n_gone)
        for j, old in enumerate(gone):
            q, g = night.quality[qid].pop(old), night.grade[qid].pop(old)
            del night.texts[qid][old]
            # A new candidate of the same standing (so the relevant count stays as set).
            new = f"n{j:03d}"
            night.texts[qid][new] = f"[{qid}/{new}] " + _FILLER * 2
            night.quality[qid][new] = q + 1e-6 * rng.random()
            night.grade[qid][new] = g
        night.engine[qid] = _engine_order(night, qid, rng)
    return night


class Scripted:
    """The scripted judge over a world; counts the prompt tokens that reach the provider."""

    def __init__(self, world: World, noise: int = 0) -> None:
        self.world = world
        # Another seed draws the ordering answers' errors afresh (a second, independent judge
        # pass over the same prompts); 0 keeps the draws of the table above.
        self.noise = noise
        self.by_text = {
            text: (qid, cid) for qid, texts in world.texts.items() for cid, text in texts.items()
        }
        self.sent_tokens = 0
        self.sent_calls = 0

    def _grade(self, qid: str, cid: str, salt: str = "") -> int:
        true = self.world.grade[qid][cid]
        if _unit("grade", qid, cid, salt, SEED) >= GRADE_OFF:
            return true
        step = 1 if _unit("dir", qid, cid, salt) < 0.5 else -1
        return true + step if 0 <= true + step <= 3 else true - step

    def _better(self, qid: str, a: str, b: str) -> bool:
        return self.world.quality[qid][a] > self.world.quality[qid][b]

    def __call__(self, req: FakeRequest) -> dict[str, Any] | None:
        self.sent_calls += 1
        self.sent_tokens += count_prompt_tokens(req.messages)
        p, digest = req.payload, req.digest()
        if self.noise:
            digest = f"{digest}|{self.noise}"
        if req.title == "RelevanceGrade":
            qid, cid = self.by_text[p["context"]]
            return {"grade": self._grade(qid, cid), "reason": "scripted"}
        if req.title == "BatchRelevanceGrades":
            out = []
            for x in p["passages"]:
                qid, cid = self.by_text[x["text"]]
                out.append({"id": x["id"], "grade": self._grade(qid, cid, digest), "reason": "s"})
            return {"grades": out}
        if req.title == "PairwisePreference":
            (qid, a), (_, b) = self.by_text[p["context_1"]], self.by_text[p["context_2"]]
            better = 1 if self._better(qid, a, b) else 2
            if _unit("wrong", digest) < WRONG:
                better = 3 - better
            if _unit("bias", digest) < BIAS:
                better = 1
            return {"better": better, "reason": "scripted"}
        if req.title in ("SetwiseChoice", "ListwiseRanking"):
            shown = [self.by_text[x["text"]][1] for x in p["passages"]]
            qid = self.by_text[p["passages"][0]["text"]][0]
            quality = self.world.quality[qid]
            ranked = sorted(range(len(shown)), key=lambda i: -quality[shown[i]])
            if req.title == "SetwiseChoice":
                best = ranked[0]
                if _unit("wrong", digest) < WRONG and len(shown) > 1:
                    others = ranked[1:]
                    best = others[int(_unit("which", digest) * len(others))]
                if _unit("bias", digest) < BIAS:
                    best = 0
                return {"best": best + 1, "reason": "scripted"}
            # Listwise: each neighbouring pair of the true order swapped with probability WRONG.
            for i in range(len(ranked) - 1):
                if _unit("wrong", digest, i) < WRONG:
                    ranked[i], ranked[i + 1] = ranked[i + 1], ranked[i]
            if _unit("bias", digest) < BIAS:
                ranked.remove(0)
                ranked.insert(0, 0)
            return {"ranking": [i + 1 for i in ranked], "reason": "scripted"}
        return None


def judge_for(root: Path, name: str, model: str = MODEL) -> tuple[Judge, Gateway]:
    gateway = Gateway(root / f"cache-{name}", concurrency=CONCURRENCY, backoff_s=0.0)
    judge = Judge(
        gateway=gateway,
        model=model,
        window=context_window(model),
        max_tokens=1024,
        in_flight=4 * CONCURRENCY,
    )
    return judge, gateway


async def grade(world: World, judge: Judge, per_call: int = 1):
    started = time.perf_counter()
    graded = await grade_candidates(
        judge, world.questions, world.candidates(), relevant_grade=2, per_call=per_call
    )
    return graded, time.perf_counter() - started


async def order(
    world: World,
    judge: Judge,
    graded,
    options: OrderOptions,
    qids: list[str],
    previous: dict[str, PreviousHead] | None = None,
):
    started = time.perf_counter()
    cands = {q: c for q, c in world.candidates().items() if q in qids}
    results = await order_questions(
        judge, {q: world.questions[q] for q in qids}, cands, graded, options, previous
    )
    return results, time.perf_counter() - started


def figures(world: World, graded, results) -> dict[str, float]:
    taus, errors, calls, tokens = [], [], [], []
    per_question: dict[str, float] = {}
    for res in results:
        qid = res.question_id
        g = graded[qid]
        # The irrelevant ones after the ordered relevant ones, in grade groups.
        irrelevant = g.irrelevant + g.unjudged
        ranks_groups = list(res.groups)
        base = max(ranks_groups, default=-1) + 1
        levels = [base + (3 - g.grades.get(c, 0)) for c in irrelevant]
        ranks = average_ranks([*res.ordered, *irrelevant], [*ranks_groups, *levels])
        top = world.truth(qid)[:K]
        tau = kendalltau(range(len(top)), [ranks[c] for c in top]).statistic
        # Undefined when the judge ties the whole top 10 (grades alone): no order, 0.
        taus.append(0.0 if math.isnan(tau) else tau)
        engine = world.engine[qid]
        est = ndcg_at_k(engine, {c: float(v) for c, v in g.grades.items() if v > 0}, K)
        true = ndcg_at_k(engine, {c: float(v) for c, v in world.grade[qid].items() if v > 0}, K)
        errors.append(abs(est - true))
        per_question[qid] = abs(est - true)
        calls.append(res.spend.calls)
        tokens.append(res.spend.prompt_tokens)
    n = len(results)
    return {
        "tau": sum(taus) / n,
        "ndcg_err": sum(errors) / n,
        "order_calls": sum(calls) / n,
        "order_tokens": sum(tokens) / n,
        "ndcg_err_by_q": per_question,
    }


async def setting(args: argparse.Namespace, n_relevant: int, root: Path) -> dict[str, Any]:
    world = make_world(args.questions, n_relevant)
    qids = list(world.questions)
    out: dict[str, Any] = {"relevant": n_relevant, "modes": {}, "night2": {}}
    script = Scripted(world)
    with FAKE.script(script):
        gjudge, ggw = judge_for(root, f"grades-{n_relevant}")
        graded, gwall = await grade(world, gjudge)
        out["grading"] = {
            "calls": sum(g.spend.calls for g in graded.values()) / len(qids),
            "tokens": sum(g.spend.prompt_tokens for g in graded.values()) / len(qids),
            "wall": gwall,
            "sent_tokens": script.sent_tokens,
        }
        print(f"  graded @ {n_relevant}: {gwall:.1f} s", flush=True)
        if args.batch > 1:
            bjudge, bgw = judge_for(root, f"batch-{n_relevant}")
            batched, bwall = await grade(world, bjudge, args.batch)
            same = total = 0
            for qid in qids:
                for cid, v in graded[qid].grades.items():
                    if cid in batched[qid].grades:
                        total += 1
                        same += batched[qid].grades[cid] == v
            out["batch"] = {
                "per_call": args.batch,
                "agreement": same / max(1, total),
                "calls": sum(g.spend.calls for g in batched.values()) / len(qids),
                "tokens": sum(g.spend.prompt_tokens for g in batched.values()) / len(qids),
                "wall": bwall,
            }
            bgw.close()
        for name in args.modes:
            options = MODES[name]
            use = qids[: args.full_questions] if name == "full" else qids
            ojudge, ogw = judge_for(root, f"order-{name}-{n_relevant}")
            before = script.sent_tokens
            results, wall = await order(world, ojudge, graded, options, use)
            out["modes"][name] = {
                **figures(world, graded, results),
                "wall": wall,
                "n": len(use),
                "order_sent": script.sent_tokens - before,
            }
            print(f"  {name} @ {n_relevant}: {wall:.1f} s", flush=True)
            ogw.close()
    if not args.night2:
        ggw.close()
        return out
    # Night 2: the same memos (grading and each mode's ordering), the new candidates.
    night = next_night(world)
    script2 = Scripted(night)
    with FAKE.script(script2):
        before = script2.sent_tokens
        graded2, _ = await grade(night, gjudge)
        grading_paid = script2.sent_tokens - before
        for name in args.modes:
            use = qids[: args.full_questions] if name == "full" else qids
            ojudge, ogw = judge_for(root, f"order-{name}-{n_relevant}")
            before = script2.sent_tokens
            await order(night, ojudge, graded2, MODES[name], use)
            ordering_paid = script2.sent_tokens - before
            ogw.close()
            m = out["modes"][name]
            # Both nights counted alike: the prompt tokens that reached the provider.
            share_of_grading = len(use) / len(qids)
            night1 = out["grading"]["sent_tokens"] * share_of_grading + m["order_sent"]
            paid = grading_paid * share_of_grading + ordering_paid
            out["night2"][name] = {
                "paid_tokens": paid / len(use),
                "night1_tokens": night1 / len(use),
                "share": paid / night1,
            }
    ggw.close()
    return out


def report(results: list[dict[str, Any]]) -> None:
    print(
        f"\nJudging, {CANDIDATES_N} candidates a question, fake judge {LATENCY_S * 1000:.0f} ms a "
        f"call, concurrency {CONCURRENCY}; grades off by one {GRADE_OFF:.0%}, ordering answers "
        f"wrong {WRONG:.0%}, first shown preferred {BIAS:.0%} more often"
    )
    rows = []
    for s in results:
        g = s["grading"]
        for name, m in s["modes"].items():
            rows.append(
                (
                    name,
                    s["relevant"],
                    m["n"],
                    f"{g['calls'] + m['order_calls']:.0f}",
                    f"{m['order_calls']:.0f}",
                    f"{g['tokens'] + m['order_tokens']:,.0f}",
                    f"{m['order_tokens']:,.0f}",
                    f"{m['wall']:.1f}",
                    f"{m['tau']:.3f}",
                    f"{m['ndcg_err']:.4f}",
                )
            )
    print(
        table(
            rows,
            (
                "mode",
                "relevant",
                "questions",
                "calls/q",
                "of which order",
                "tokens/q",
                "of which order",
                "order wall s",
                f"top-{K} tau",
                f"NDCG@{K} err",
            ),
        )
    )
    for s in results:
        g = s["grading"]
        print(
            f"grading @ {s['relevant']}: {g['calls']:.0f} calls, {g['tokens']:,.0f} prompt tokens "
            f"a question, {g['wall']:.1f} s for all questions"
        )
        if "batch" in s:
            b = s["batch"]
            print(
                f"grading {b['per_call']} a call @ {s['relevant']}: {b['calls']:.0f} calls, "
                f"{b['tokens']:,.0f} tokens a question, {b['wall']:.1f} s; same grade as one a "
                f"call for {b['agreement']:.1%} of the candidates"
            )
    print("\nGoals:")
    for s in results:
        n, modes, g = s["relevant"], s["modes"], s["grading"]
        full = modes.get("full")
        if full is None:
            continue
        full_tokens = g["tokens"] + full["order_tokens"]
        cap = 1 / 3 if n <= 50 else 1 / 10
        for name in (m for m in modes if m.startswith("head")):
            h = modes[name]
            share = (g["tokens"] + h["order_tokens"]) / full_tokens
            # On the questions full ran (it may run fewer, for time).
            same = list(full["ndcg_err_by_q"])
            h_err = sum(h["ndcg_err_by_q"][q] for q in same) / len(same)
            checks = [
                (f"tokens <= {cap:.2f} of full's", share, share <= cap, ""),
                (
                    "NDCG@10 error within 0.01 of full's",
                    h_err - full["ndcg_err"],
                    h_err <= full["ndcg_err"] + 0.01,
                    "every mode takes NDCG's gains from the same grades",
                ),
                (
                    "top-10 tau >= full's - 0.02",
                    h["tau"] - full["tau"],
                    h["tau"] >= full["tau"] - 0.02,
                    "",
                ),
            ]
            for label, value, ok, note in checks:
                why = "" if ok else f"  (not met: {value:+.3f} against the goal)"
                extra = f"  [{note}]" if note and ok else ""
                print(
                    f"  {n:>3} relevant  {name:<13} {label:<38} {value:+8.3f}  "
                    f"{'met' if ok else 'NOT MET'}{why}{extra}"
                )
    for s in results:
        for name, r in s["night2"].items():
            goal = name.startswith("head") or name == "none"
            ok = r["share"] <= 0.25
            verdict = ("met" if ok else "NOT MET") if goal else "(no goal: printed)"
            print(
                f"  {s['relevant']:>3} relevant  night 2 {name:<13} pays {r['paid_tokens']:,.0f} "
                f"of night 1's {r['night1_tokens']:,.0f} prompt tokens sent a question = "
                f"{r['share']:.1%} (goal <= 25 %)  {verdict}"
            )


# -- the incremental head order: night 2 with 10 % replaced, night 3 with nothing changed ------

INCREMENTAL = ((25, 20), (200, 50))
"""(candidates a question, of which relevant): a small pool the judge finds mostly relevant, and
the large pool of the table above."""
FAST = "fake/judge?latency=0"  # tokens and tau do not depend on the latency
HEAD = MODES["head:window"]


def previous_heads(world: World, graded, results) -> dict[str, PreviousHead]:
    """What a run leaves the next one: each question's judged head, texts and grades."""
    return {
        r.question_id: PreviousHead(
            head=tuple(r.ordered[: r.exact_k or 0]),
            ordered=tuple(r.ordered),
            texts=dict(world.texts[r.question_id]),
            grades=dict(graded[r.question_id].grades),
        )
        for r in results
    }


def top_tau(ordered: list[str], groups: list[int], reference: list[str]) -> float:
    """Kendall's tau-b of an order against ``reference`` over the reference's top 10."""
    ranks = average_ranks(ordered, groups)
    top = [c for c in reference[:K] if c in ranks]
    tau = kendalltau(range(len(top)), [ranks[c] for c in top]).statistic
    return 0.0 if math.isnan(tau) else float(tau)


async def pairwise_insertion(
    world: World, judge: Judge, graded, previous: dict[str, PreviousHead], qids: list[str]
) -> dict[str, tuple[list[str], list[int]]]:
    """The alternative measured against one listwise call: binary insertion of each new
    candidate into the kept head with the pairwise judge (both orders a comparison)."""

    async def one(qid: str) -> tuple[list[str], list[int]]:
        g, prev, texts = graded[qid], previous[qid], world.texts[qid]
        kept = prev.kept(texts, g.grades)
        head = [c for c in prev.head if c in kept and c in set(g.relevant)]
        new = [c for c in head_pool(g.relevant, g.grades, HEAD.head_k) if c not in kept]
        pj = PairwiseJudge(judge, world.questions[qid], texts)
        for x in new:
            lo, hi = 0, len(head)
            while lo < hi:
                mid = (lo + hi) // 2
                if await pj.compare(x, head[mid]) < 0:
                    hi = mid
                else:
                    lo = mid + 1
            head.insert(lo, x)
        head = head[: HEAD.head_k]
        rest, rest_groups = by_grade([c for c in g.relevant if c not in set(head)], g.grades)
        return head + rest, list(range(len(head))) + [len(head) + x for x in rest_groups]

    done = await asyncio.gather(*(one(q) for q in qids))
    return dict(zip(qids, done, strict=True))


async def incremental(n_questions: int, n_candidates: int, n_relevant: int, root: Path):
    """Night 1 fresh, night 2 (10 % replaced) built on it, night 3 with nothing changed."""
    name = f"{n_candidates}"
    world = make_world(n_questions, n_relevant, n_candidates=n_candidates)
    qids = list(world.questions)
    gjudge, ggw = judge_for(root, f"inc-grades-{name}", FAST)
    ojudge, ogw = judge_for(root, f"inc-order-{name}", FAST)
    script1 = Scripted(world)
    with FAKE.script(script1):
        graded1, _ = await grade(world, gjudge)
        night1, _ = await order(world, ojudge, graded1, HEAD, qids)
    night1_tokens = script1.sent_tokens
    heads1 = previous_heads(world, graded1, night1)
    ogw.close()
    # The memo as night 1 left it, for night 2 ordered afresh (what the memo alone saves).
    shutil.copytree(root / f"cache-inc-order-{name}", root / f"cache-inc-memo-{name}")
    ojudge, ogw = judge_for(root, f"inc-order-{name}", FAST)

    night = next_night(world)
    out: dict[str, Any] = {"pool": n_candidates, "relevant": n_relevant, "questions": n_questions}
    script2 = Scripted(night)
    with FAKE.script(script2):
        graded2, _ = await grade(night, gjudge)
        grading2 = script2.sent_tokens
        inc, _ = await order(night, ojudge, graded2, HEAD, qids, heads1)
    out["night2_share"] = script2.sent_tokens / night1_tokens
    out["night2_ordering_share"] = (script2.sent_tokens - grading2) / night1_tokens
    out["sources"] = dict(Counter(r.source for r in inc))
    inc_by = {r.question_id: r for r in inc}

    memo_script = Scripted(night)
    mjudge, mgw = judge_for(root, f"inc-memo-{name}", FAST)
    with FAKE.script(memo_script):
        await order(night, mjudge, graded2, HEAD, qids)
    mgw.close()
    out["memo_only_share"] = (grading2 + memo_script.sent_tokens) / night1_tokens

    pair_script = Scripted(night)
    pjudge, pgw = judge_for(root, f"inc-pairwise-{name}", FAST)
    with FAKE.script(pair_script):
        pairwise = await pairwise_insertion(night, pjudge, graded2, heads1, qids)
    pgw.close()
    out["pairwise_share"] = (grading2 + pair_script.sent_tokens) / night1_tokens

    # Two fresh orderings of night 2, each with its own draw of the judge's errors (and a
    # draw other than the nights'): the reference, and its own repeatability.
    fresh = []
    for noise in (2, 3):
        fjudge, fgw = judge_for(root, f"inc-fresh{noise}-{name}", FAST)
        with FAKE.script(Scripted(night, noise=noise)):
            res, _ = await order(night, fjudge, graded2, HEAD, qids)
        fgw.close()
        fresh.append({r.question_id: r for r in res})
    ref, again = fresh

    def mean_tau(orders: dict[str, tuple[list[str], list[int]]]) -> float:
        return sum(top_tau(*orders[q], ref[q].ordered) for q in qids) / len(qids)

    out["tau_repeat"] = mean_tau({q: (again[q].ordered, again[q].groups) for q in qids})
    out["tau_incremental"] = mean_tau({q: (inc_by[q].ordered, inc_by[q].groups) for q in qids})
    out["tau_pairwise"] = mean_tau(pairwise)

    # Night 3: the same candidates as night 2, built on night 2's heads.
    heads2 = previous_heads(night, graded2, inc)
    script3 = Scripted(night)
    with FAKE.script(script3):
        graded3, _ = await grade(night, gjudge)
        third, _ = await order(night, ojudge, graded3, HEAD, qids, heads2)
    out["night3_calls"] = sum(r.spend.calls for r in third)
    out["night3_sent"] = script3.sent_tokens
    out["night3_same"] = all(
        r.ordered == inc_by[r.question_id].ordered and r.groups == inc_by[r.question_id].groups
        for r in third
    )
    ggw.close()
    ogw.close()
    return out


def report_incremental(results: list[dict[str, Any]]) -> None:
    print(
        "\nIncremental head order (head:window), night 2 = 10 % of each pool replaced; prompt "
        "tokens sent to the provider, grading included, against night 1's"
    )
    rows = [
        (
            f"{r['pool']} ({r['relevant']} relevant)",
            r["questions"],
            f"{r['night2_share']:.1%}",
            f"{r['night2_ordering_share']:.1%}",
            f"{r['memo_only_share']:.1%}",
            f"{r['pairwise_share']:.1%}",
            ", ".join(f"{k} {v}" for k, v in sorted(r["sources"].items())),
            f"{r['tau_incremental']:.3f}",
            f"{r['tau_pairwise']:.3f}",
            f"{r['tau_repeat']:.3f}",
            r["night3_calls"],
        )
        for r in results
    ]
    print(
        table(
            rows,
            (
                "pool",
                "questions",
                "night 2 incremental",
                "of which order",
                "fresh, memo only",
                "pairwise insertion",
                "heads",
                "tau incr",
                "tau pairwise ins.",
                "tau fresh again",
                "night 3 order calls",
            ),
        )
    )
    print("Goals (incremental head order):")
    for r in results:
        where = f"  pool {r['pool']:>3} ({r['relevant']} relevant)"
        share = r["night2_share"]
        ok = share <= 0.15
        print(
            f"{where}  night 2 pays {share:.1%} of night 1's prompt tokens (goal <= 15 %)  "
            + ("met" if ok else f"NOT MET ({share - 0.15:+.1%} over)")
        )
        gap = r["tau_incremental"] - r["tau_repeat"]
        ok = gap >= -0.02
        print(
            f"{where}  top-{K} tau against a fresh ordering {r['tau_incremental']:.3f}, a fresh "
            f"ordering's own {r['tau_repeat']:.3f} (goal: within 0.02)  "
            + ("met" if ok else f"NOT MET ({gap:+.3f})")
        )
        ok = r["night3_calls"] == 0 and r["night3_same"]
        why = "" if ok else f" ({r['night3_calls']} calls, order same: {r['night3_same']})"
        print(
            f"{where}  night 3, nothing changed: {r['night3_calls']} ordering calls, "
            f"{r['night3_sent']} prompt tokens sent, order identical: {r['night3_same']}  "
            + ("met" if ok else "NOT MET" + why)
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument(
        "--full-questions", type=int, default=None, help="questions ordered by full (default all)"
    )
    parser.add_argument("--relevant", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--batch", type=int, default=10, help="candidates a call (1: skip)")
    parser.add_argument("--no-night2", dest="night2", action="store_false")
    parser.add_argument(
        "--incremental-questions", type=int, default=20, help="questions of the night 2/3 runs"
    )
    parser.add_argument(
        "--only-incremental", action="store_true", help="only the incremental head order"
    )
    args = parser.parse_args()
    if args.only_incremental:
        root = scratch("judging")
        inc = [
            asyncio.run(incremental(args.incremental_questions, n, rel, root))
            for n, rel in INCREMENTAL
        ]
        report_incremental(inc)
        print("\n" + json.dumps(inc, default=float))
        return
    if args.full_questions is None:
        args.full_questions = args.questions
    root = scratch("judging")
    results = [asyncio.run(setting(args, n, root)) for n in args.relevant]
    report(results)
    inc = []
    if args.night2:
        inc = [
            asyncio.run(incremental(args.incremental_questions, n, rel, root))
            for n, rel in INCREMENTAL
        ]
        report_incremental(inc)
    print("\n" + json.dumps({"modes": results, "incremental": inc}, default=float))


if __name__ == "__main__":
    main()
