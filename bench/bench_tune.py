"""``ragaudit tune`` against planted relevance: what pooling pays, and whether its verdict is right.

A synthetic question set on the embedded ``local`` backend: every question has its own
collection of documents with a planted gold grade (0-3), written so that the variants differ
in truth: grade-3 documents hold most of the question's words, grade 2 half, grade 1 one or two,
decoys (grade 1) one word said many times (which a bag-of-words vector loves and BM25's term
saturation does not), grade 0 none. The judge is scripted: it gives the planted grade, off by one
15 % of the time (deterministic per question and document). Twelve variants: BM25, vector and
hybrid fusions of several weights and k, and shallow ``top_n`` cuts; the baseline is the even
hybrid.

Printed, each with its goal met or not:

- judge calls of the first tune = its pool size, 0 re-judged; a second tune of the same
  questions with 4 new variants pays only for documents no earlier variant showed;
- judge prompt tokens of the tune against ``ragaudit run`` once per variant, side by side: a
  run grades every candidate of its ``top_n`` (the sort stage's grading only, counted as the
  gateway counts them; a run also orders the head, writes references and scores metrics, so this
  is the least a run costs);
- Kendall τ between the variants ranked by the tune (pooled judge grades) and by the planted
  gold; the recommended variant's gold NDCG@depth against the best variant's;
- with every variant equal in truth (each variant's top-k drawn from one distribution per
  question, graded by the same noisy judge, decided by the tune's own statistics), how often
  the tune keeps the baseline over ``--seeds`` seeds.

Run from the repository root: ``python bench/bench_tune.py [--questions 60] [--seeds 100]``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import time
from pathlib import Path
from typing import Any

import _util  # noqa: F401  (offline environment first)
import numpy as np
from scipy import stats

from ragaudit.cache import hold_gateway
from ragaudit.cache._fake import FAKE  # the scripted provider: benches and tests only
from ragaudit.config import load_config
from ragaudit.judging import Judge, grade_candidates, prompt_tokens
from ragaudit.tuning import (
    BASELINE,
    question_metrics,
    recommend,
    retrieve,
    run_tune,
    split_questions,
)

NOISE = 0.15
DEPTH = 10
# Documents per question by planted grade (decoys are grade 1): 200, the candidates a run's
# sort stage grades per question at the default collect.top_n.
MIX = {3: 2, 2: 4, 1: 4, "decoy": 3, 0: 187}
FILLER = [f"fill{i}" for i in range(400)]

VARIANTS: dict[str, dict[str, Any]] = {
    "bm25": {"mode": "bm25"},
    "bm25-top5": {"mode": "bm25", "top_n": 5},
    "bm25-top3": {"mode": "bm25", "top_n": 3},
    "vector": {"mode": "vector"},
    "vector-top5": {"mode": "vector", "top_n": 5},
    "hybrid-w0.1": {"vector_weight": 0.1},
    "hybrid-w0.3": {"vector_weight": 0.3},
    "hybrid-w0.7": {"vector_weight": 0.7},
    "hybrid-w0.9": {"vector_weight": 0.9},
    "hybrid-k1": {"rrf_k": 1},
    "hybrid-k300": {"rrf_k": 300},
}
# Searching without the collection filter brings documents of other questions' collections
# into the pool (planted grade 0 for this question): documents no first-tune variant showed.
NEW_VARIANTS: dict[str, dict[str, Any]] = {
    "bm25-unfiltered": {"mode": "bm25", "filter_field": None},
    "vector-unfiltered": {"mode": "vector", "filter_field": None},
    "hybrid-unfiltered": {"filter_field": None},
    "hybrid-w0.8": {"vector_weight": 0.8},
}


def _unit(*parts: Any) -> float:
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def noisy(grade: int, *key: Any) -> int:
    """The planted grade, off by one with probability NOISE (a fixed draw per key)."""
    if _unit("noise", *key) >= NOISE:
        return grade
    step = 1 if grade == 0 else -1 if grade == 3 else (1 if _unit("dir", *key) < 0.5 else -1)
    return grade + step


def synthetic(n_questions: int, seed: int = 0) -> tuple[list[dict], list[dict], dict]:
    """Questions, a corpus, and (question text, document text) → planted grade."""
    rng = random.Random(seed)
    questions, corpus, gold = [], [], {}
    for qi in range(n_questions):
        words = [f"q{qi}w{j}" for j in range(6)]
        question = " ".join(words)
        coll = f"c{qi}"
        questions.append(
            {"question_id": f"q{qi}", "question": question, "filters": {"collection": coll}}
        )
        n = 0
        for kind, count in MIX.items():
            for _ in range(count):
                filler = rng.sample(FILLER, 12)
                if kind == 3:
                    said = rng.sample(words, 5)
                elif kind == 2:
                    said = rng.sample(words, 3)
                elif kind == 1:
                    said = rng.sample(words, rng.choice([1, 2]))
                elif kind == "decoy":
                    said = [rng.choice(words)] * 8
                else:
                    said = []
                text = " ".join(rng.sample(said + filler, len(said) + len(filler)))
                text = f"doc {qi}-{n}: {text}"
                grade = 1 if kind == "decoy" else int(kind)
                corpus.append({"id": f"d{qi}-{n}", "text": text, "metadata": {"collection": coll}})
                gold[(question, text)] = grade
                n += 1
    return questions, corpus, gold


def scripted_judge(gold: dict) -> Any:
    def respond(req: Any) -> dict | None:
        if req.title != "RelevanceGrade":
            return None
        p = req.payload
        # Another question's document (an unfiltered search) is not relevant to this one.
        grade = gold.get((p["question"], p["context"]), 0)
        return {"grade": noisy(grade, p["question"], p["context"]), "reason": "planted"}

    return respond


def config_for(root: Path, name: str, variants: dict[str, dict[str, Any]], **extra: Any) -> Any:
    data = {
        "questions": str(root / "questions.jsonl"),
        "runs_root": str(root / "runs"),
        "cache_dir": str(root / f"cache-{name}"),
        "models": {"judge": "fake/judge", "embedder": "fake/embed", "backoff_s": 0.0},
        "collect": {
            "backend": "local",
            "index_path": str(root / "index"),
            "corpus": str(root / "corpus.jsonl"),
            "mode": "hybrid",
            "top_n": 200,
        },
        "report": {"compare_resamples": 1999, "bootstrap_samples": 500},
        "tune": {"name": name, "depth": DEPTH, "variants": variants, **extra},
    }
    return load_config(None, data, environ={})


def gold_ndcg(out: Any, gold: dict) -> dict[str, float]:
    """Each variant's mean NDCG@depth over every question, graded with the planted gold."""
    means = {}
    for run in out.runs:
        if run.status != "ok":
            continue
        xs = []
        for qid, got in run.questions.items():
            q = out.questions[qid]
            grades = {
                cid: g
                for (qt, text), g in gold.items()
                if qt == q.question
                for cid in [text.split(":", 1)[0].replace("doc ", "d")]
            }
            v, _ = question_metrics(got.ids, grades, DEPTH, 2, ["ndcg"])
            xs.append(v["ndcg"])
        means[run.variant.name] = float(np.nanmean(xs))
    return means


async def tokens_of_runs(out: Any, judge: Judge, embed: Any) -> dict[str, int]:
    """Per variant, the prompt tokens a run's sort stage sends grading its top_n candidates.

    The candidates are what the variant's search returns at its own ``top_n`` (as the collect
    stage fetches them), each counted as the gateway counts its grading prompt.
    """
    questions = list(out.questions.values())
    texts: dict[tuple[str, str], str] = {}
    runs = await retrieve([r.variant for r in out.runs], questions, 10_000, embed, texts)
    counted: dict[tuple[str, str], int] = {}
    tokens = {}
    for run in runs:
        if run.status != "ok":
            continue
        total = 0
        for qid, got in run.questions.items():
            for cid in got.ids[: run.variant.config.collect.top_n]:
                if (qid, cid) not in counted:
                    counted[(qid, cid)] = prompt_tokens(
                        judge, out.questions[qid], texts[(qid, cid)]
                    )
                total += counted[(qid, cid)]
        tokens[run.variant.name] = total
    return tokens


def equal_truth(seeds: int, n_questions: int, variants: int = 12) -> float:
    """Share of seeds on which the tune's statistics keep the baseline, every variant equal."""
    kept = 0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        values: dict[str, dict[str, dict[str, float]]] = {}
        names = [BASELINE] + [f"v{i}" for i in range(1, variants)]
        per_q_docs = {}
        for qi in range(n_questions):
            grades = [3] * 2 + [2] * 4 + [1] * 7 + [0] * 7
            per_q_docs[f"q{qi}"] = {f"d{j}": g for j, g in enumerate(grades)}
        for name in names:
            values[name] = {"ndcg": {}}
        for qid, docs in per_q_docs.items():
            judged = {d: noisy(g, seed, qid, d) for d, g in docs.items()}
            ids = list(docs)
            for name in names:
                # One distribution for every variant: a relevance-biased draw without replacement.
                weights = np.array([1.0 + docs[d] for d in ids])
                top = list(rng.choice(ids, size=DEPTH, replace=False, p=weights / weights.sum()))
                pooled = {d: judged[d] for d in ids}
                v, _ = question_metrics(top, pooled, DEPTH, 2, ["ndcg"])
                values[name]["ndcg"][qid] = v["ndcg"]
        splits = split_questions(list(per_q_docs), 0.3, seed)
        d = recommend(values, BASELINE, ["ndcg"], splits, resamples=1999, bootstrap_samples=0)
        kept += d.recommended == BASELINE
    return kept / seeds


def line(goal: str, ok: bool, why: str = "") -> str:
    return f"  goal {goal}: " + ("met" if ok else f"NOT MET{(': ' + why) if why else ''}")


async def main_async(args: argparse.Namespace) -> list[str]:
    root = _util.scratch("tune")
    questions, corpus, gold = synthetic(args.questions)
    (root / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in questions) + "\n")
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus) + "\n")
    corpus_by_q: dict[str, list[dict]] = {}
    for d in corpus:
        corpus_by_q.setdefault("q" + d["metadata"]["collection"][1:], []).append(d)
    out_lines = [
        f"bench_tune: {args.questions} questions × {sum(MIX.values())} documents, "
        f"depth {DEPTH}, judge off by one {NOISE:.0%} (scripted), local backend"
    ]
    FAKE.reset()
    with FAKE.script(scripted_judge(gold)):
        cfg = config_for(root, "first", VARIANTS)
        with hold_gateway(cfg) as gw:
            started = time.perf_counter()
            first = await run_tune(cfg, gw)
            wall = time.perf_counter() - started
            judge = Judge.from_config(cfg.models, gw, 64)
            # The counter the run-side figures use, held against what the gateway counted
            # for the same prompts: the baseline's grading of one question, asked for real.
            q0 = first.questions["q0"]
            spent = await grade_candidates(
                judge,
                {"q0": q0},
                {"q0": [{"context_id": d["id"], "text": d["text"]} for d in corpus_by_q["q0"]]},
            )
            counted = sum(prompt_tokens(judge, q0, d["text"]) for d in corpus_by_q["q0"])

            async def embed(texts: list[str]) -> list[list[float]]:
                return await gw.aembed(texts, model=cfg.models.embedder_model)

            run_tokens = await tokens_of_runs(first, judge, embed)
        calls = first.calls
        ok = [r for r in first.runs if r.status == "ok"]
        out_lines.append(
            f"first tune: {len(ok)}/{len(first.runs)} variants, pool {first.pool.size} documents,"
            f" {calls['provider_calls']} judge calls, {calls['cache_hits']} memo hits, "
            f"{first.grading.found_in_store} from the store ({wall:.1f} s)"
        )
        out_lines.append(
            line(
                "judge calls = pool size, 0 re-judged",
                calls["provider_calls"] == first.pool.size and calls["cache_hits"] == 0,
                f"{calls['provider_calls']} calls for {first.pool.size} pooled documents",
            )
        )
        first_pairs = {(q, c) for q, docs in first.pool.texts.items() for c in docs}
        cfg2 = config_for(root, "second", {**VARIANTS, **NEW_VARIANTS}, max_variants=50)
        with hold_gateway(cfg2) as gw:
            second = await run_tune(cfg2, gw)
        new_pairs = {(q, c) for q, docs in second.pool.texts.items() for c in docs} - first_pairs
        paid2 = second.calls["provider_calls"]
        out_lines.append(
            f"second tune (+4 variants, a fresh memo): pool {second.pool.size}, "
            f"{len(new_pairs)} documents no earlier variant showed, {paid2} judge calls, "
            f"{second.grading.found_in_store} grades from the store"
        )
        out_lines.append(
            line(
                "the second tune pays only for documents not graded before",
                paid2 == len(new_pairs),
                f"{paid2} calls for {len(new_pairs)} new documents",
            )
        )
    tune_tokens = sum(
        prompt_tokens(judge, first.questions[q], first.pool.texts[q][c])
        for q, docs in first.pool.texts.items()
        for c in docs
    )
    per_run = np.mean(list(run_tokens.values()))
    all_runs = sum(run_tokens.values())
    gateway_q0 = spent["q0"].spend.prompt_tokens
    ratio = tune_tokens / per_run
    out_lines.append(
        f"judge prompt tokens: the tune {tune_tokens:,} for {len(ok)} variants; one run per "
        f"variant {per_run:,.0f} on average ({sum(run_tokens.values()):,} for all); "
        f"tune / one run = {ratio:.3f}, tune / all runs = {tune_tokens / all_runs:.4f} "
        f"(counter check on q0: counted {counted:,}, the gateway {gateway_q0:,})"
    )
    out_lines.append(
        line("judge tokens ≤ 1/4 of one run per variant", ratio <= 0.25, f"{ratio:.3f} of one run")
    )
    truth = gold_ndcg(first, gold)
    judged = {n: float(np.nanmean(list(first.values[n]["ndcg"].values()))) for n in truth}
    names = sorted(truth)
    tau = stats.kendalltau([truth[n] for n in names], [judged[n] for n in names]).statistic
    rows = sorted(names, key=lambda n: -truth[n])
    out_lines.append("variant         gold NDCG@10  tune NDCG@10 (judge)")
    out_lines += [f"  {n:<14}{truth[n]:>10.3f}{judged[n]:>14.3f}" for n in rows]
    out_lines.append(f"Kendall τ (tune vs gold ranking of the {len(names)} variants): {tau:.3f}")
    out_lines.append(line("Kendall τ ≥ 0.85", tau >= 0.85, f"τ {tau:.3f}"))
    d = first.decision
    best = max(truth.values())
    out_lines.append(
        f"decision: winner {d.winner}, recommended {d.recommended} ({d.why}); gold NDCG of the "
        f"recommended {truth[d.recommended]:.3f}, of the best {best:.3f} ({rows[0]})"
    )
    out_lines.append(
        line(
            "the recommended variant's gold NDCG@10 within 0.01 of the best's",
            best - truth[d.recommended] <= 0.01,
            f"{best - truth[d.recommended]:.3f} below",
        )
    )
    started = time.perf_counter()
    share = equal_truth(args.seeds, args.questions)
    out_lines.append(
        f"equal truth: the baseline kept in {share:.0%} of {args.seeds} seeds "
        f"(12 variants, {args.questions} questions; {time.perf_counter() - started:.1f} s)"
    )
    out_lines.append(line("keep the baseline in ≥ 95 % of seeds", share >= 0.95, f"{share:.0%}"))
    return out_lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--seeds", type=int, default=100)
    args = parser.parse_args()
    for text in asyncio.run(main_async(args)):
        print(text)


if __name__ == "__main__":
    main()
