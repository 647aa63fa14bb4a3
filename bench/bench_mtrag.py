"""MTRAG's human data: its retrieval tasks searched by query form, beside its own table.

MTRAG (IBM, TACL 2025) releases its retrieval tasks in three query forms and BEIR qrels, but its
corpora are archives that a fetched snapshot does not carry. So the corpus here is the passages
the release does carry: the 350 documents of the human-evaluated subset
(``mtrag-human/evaluations/reference_subset_with_human_evaluations.json``: every passage its
159 tasks cite, the gold of its 150 retrieval tasks), plus, as distractors of our choosing, the
reference passages of the MTRAG-UN generation tasks (``mtragun-human/generation_tasks/
reference.jsonl``: other conversations' passages of the same four corpora), each in its
domain. Every file is read by ``ragaudit.dataset.load_questions`` as released.

The subset's retrieval tasks (those with qrels) are searched through the embedded ``local``
backend (BM25, the tune's ``retrieve``, one variant per query form, filtered to the task's
domain as MTRAG's per-domain indices are) and scored against MTRAG's qrels: recall@5 and
nDCG@5 per form with bootstrap intervals, beside the MTRAG README's table. The corpus is a few
thousand passages, not MTRAG's 366,000, so the absolute figures are not comparable: the goal is
the direction and the ordering of the forms (``rewrite`` above ``last``, as the README has it
for BM25 and ELSER). A form runs when ``collect.query_form`` accepts it (``last`` alone until
then); the rewrite gain per turn position is a paired test per band. The answerability labels
of the subset wait for the refusal metric (a hook, "not run" until it exists).

Run from the repository root: ``python bench/bench_mtrag.py --mtrag PATH`` with ``PATH`` a
checkout of github.com/IBM/mt-rag-benchmark (or its git folder).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import typing
from collections import Counter
from pathlib import Path
from typing import Any

import _util
import numpy as np

from ragaudit.config import CollectConfig, load_config
from ragaudit.conversation import TURN_BANDS, turn_band
from ragaudit.dataset import Question, load_questions
from ragaudit.ranking import ndcg_at_k, recall_at_k
from ragaudit.registry import METRICS
from ragaudit.stats import bootstrap_ci, paired_test

K = 5
RESAMPLES = 1999
DOMAINS = ("clapnq", "cloud", "fiqa", "govt")
QUERIES = "mtrag-human/retrieval_tasks"
HUMAN = "mtrag-human/evaluations/reference_subset_with_human_evaluations.json"
DISTRACTORS = "mtragun-human/generation_tasks/reference.jsonl"
FORMS = ("last", "history", "rewrite")
"""ragaudit's query forms: the turn, the user turns joined, the turn rewritten to stand alone."""
README = {
    "last": {"BM25": (0.20, 0.18), "ELSER": (0.49, 0.45)},
    "rewrite": {"BM25": (0.25, 0.22), "ELSER": (0.52, 0.48)},
}
"""MTRAG README (mtrag-human/retrieval_tasks): R@5, nDCG@5 of its Last Turn and Query Rewrite."""
REFUSAL_METRIC = "refusal"
"""The refusal (I-don't-know) metric's registered name, once it exists."""


def domain(collection: str) -> str:
    """MTRAG's collection names (``mt-rag-ibmcloud-elser-…``, ``ibmcloud``) → the domain."""
    for name in ("clapnq", "fiqa", "govt"):
        if name in collection:
            return name
    if "cloud" in collection:
        return "cloud"
    raise ValueError(f"unknown MTRAG collection {collection!r}")


def materialise(src: Path, root: Path) -> Path:
    """The release's files this bench reads, from a checkout or copied out of its git folder."""
    if (src / HUMAN).is_file():
        return src
    paths = [HUMAN, DISTRACTORS]
    for d in DOMAINS:
        paths += [f"{QUERIES}/{d}/{d}_{f}.jsonl" for f in ("lastturn", "rewrite", "questions")]
        paths.append(f"{QUERIES}/{d}/qrels/dev.tsv")
    for path in paths:
        text = subprocess.run(
            ["git", "--git-dir", str(src), "show", f"HEAD:{path}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    return root


def corpus_and_tasks(release: Path, root: Path) -> tuple[list[Question], list[Question], dict]:
    """The searched tasks, the human subset's tasks, and what the corpus holds."""
    human = load_questions(release / HUMAN)
    docs: dict[str, dict[str, Any]] = {}
    for q in human:
        for cid, text in zip(
            q.reference_context_ids or [], q.reference_contexts or [], strict=True
        ):
            where = domain(q.metadata["collection"])
            docs[cid] = {"id": cid, "text": text, "metadata": {"collection": where}}
    gold = len(docs)
    for q in load_questions(release / DISTRACTORS):
        for cid, text in zip(
            q.reference_context_ids or [], q.reference_contexts or [], strict=True
        ):
            where = domain(q.metadata["collection"])
            docs.setdefault(cid, {"id": cid, "text": text, "metadata": {"collection": where}})
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs.values()), "utf-8"
    )
    subset = {q.question_id for q in human}
    tasks = []
    for d in DOMAINS:
        for q in load_questions(release / QUERIES / d / f"{d}_lastturn.jsonl"):
            if q.question_id in subset and q.reference_context_grades:
                tasks.append(q.model_copy(update={"filters": {"collection": d}}))
    missing = {c for q in tasks for c in q.reference_context_grades or {} if c not in docs}
    by_domain = Counter(d["metadata"]["collection"] for d in docs.values())
    return tasks, human, {"gold": gold, "all": len(docs), "domains": by_domain, "missing": missing}


def forms_available() -> list[str]:
    """The query forms the collect section accepts (``last`` alone before ``query_form``)."""
    found = CollectConfig.model_fields.get("query_form")
    if found is None:
        return ["last"]
    named = set(typing.get_args(found.annotation)) or set(FORMS)
    return [f for f in FORMS if f in named]


async def search(form: str, tasks: list[Question], root: Path) -> dict[str, list[str]]:
    """Each task's top K by the local backend's BM25, searched as ``form`` says."""
    from ragaudit.tuning import Variant, retrieve

    collect: dict[str, Any] = {
        "backend": "local",
        "index_path": str(root / "index"),
        "corpus": str(root / "corpus.jsonl"),
        "mode": "bm25",
        "top_n": K,
        "filter_field": "collection",
    }
    if form != "last":
        collect["query_form"] = form
    data = {"questions": str(root / "unused.jsonl"), "runs_root": str(root / "runs")}
    cfg = load_config(None, {**data, "collect": collect}, environ={})

    async def no_embedding(texts: list[str]) -> list[list[float]]:
        raise RuntimeError("BM25 embeds nothing")

    texts: dict[tuple[str, str], str] = {}
    (run,) = await retrieve([Variant(form, cfg)], tasks, K, no_embedding, texts)
    if run.status != "ok":
        raise RuntimeError(f"the {form} form's search failed: {run.error}")
    return {qid: got.ids for qid, got in run.questions.items()}


def scores(tasks: list[Question], found: dict[str, list[str]]) -> dict[str, np.ndarray]:
    """Recall@K and nDCG@K of each task (MTRAG's qrels: any grade above 0 is relevant)."""
    recall, ndcg = [], []
    for q in tasks:
        grades = q.reference_context_grades or {}
        relevant = {c for c, g in grades.items() if g > 0}
        recall.append(recall_at_k(found[q.question_id], relevant, K))
        ndcg.append(ndcg_at_k(found[q.question_id], {c: float(g) for c, g in grades.items()}, K))
    return {"recall": np.array(recall), "ndcg": np.array(ndcg)}


def with_ci(values: np.ndarray) -> str:
    low, high = bootstrap_ci(values, RESAMPLES, seed=0)
    return f"{values.mean():.3f} [{low:.3f}, {high:.3f}]"


def refusal_against_labels(human: list[Question]) -> list[str]:
    """The subset's answerability labels against the refusal metric (a hook until it exists)."""
    labels = Counter(q.answerability or "unlabelled" for q in human)
    models = sorted({m for q in human for m in q.metadata.get("responses", {})})
    out = [
        f"answerability of the human subset's {len(human)} tasks: "
        + ", ".join(f"{k} {v}" for k, v in labels.most_common())
        + f"; rated responses of {', '.join(models)}"
    ]
    if REFUSAL_METRIC not in METRICS.names():
        out.append(
            "  refusal metric against the answerability labels: not run: the refusal metric is "
            "not merged"
        )
    else:
        out.append(
            f"  refusal metric against the answerability labels: not run: '{REFUSAL_METRIC}' is "
            "registered but not wired into this bench yet"
        )
    return out


def line(goal: str, ok: bool, why: str = "") -> str:
    return f"  goal {goal}: " + ("met" if ok else f"not met: {why}")


async def main_async(args: argparse.Namespace) -> list[str]:
    root = _util.scratch("mtrag")
    release = materialise(Path(args.mtrag), root)
    tasks, human, corpus = corpus_and_tasks(release, root)
    out = [
        f"bench_mtrag: {len(tasks)} retrieval tasks of MTRAG's human-evaluated subset (of "
        f"{len(human)} tasks), {len(set(q.conversation_id for q in tasks))} conversations; corpus "
        f"{corpus['all']:,} passages: the subset's {corpus['gold']} documents + "
        f"{corpus['all'] - corpus['gold']:,} distractors (MTRAG-UN reference passages of the same "
        f"corpora; ours, not MTRAG's corpus) by domain "
        + ", ".join(f"{d} {n}" for d, n in sorted(corpus["domains"].items()))
        + f"; gold passages missing from the corpus: {len(corpus['missing'])}; local backend "
        f"BM25 per domain; load average {_util.load_average()}"
    ]
    ran = forms_available()
    values: dict[str, dict[str, np.ndarray]] = {}
    found: dict[str, dict[str, list[str]]] = {}
    for form in ran:
        found[form] = await search(form, tasks, root)
        values[form] = scores(tasks, found[form])
        if form != "last" and found[form] == found["last"]:
            # The hook sets collect.query_form on the tune's variant: a form that changes no
            # list means the search did not read it.
            out.append(f"warning: the {form} form found exactly what last found, task by task")
    rows: list[tuple[str, ...]] = []
    for form in FORMS:
        ref = README.get(form, {})
        mtrag = "  ".join(f"{r} {a:.2f} / {b:.2f}" for r, (a, b) in ref.items()) or "—"
        if form in values:
            v = values[form]
            rows.append((form, str(len(tasks)), with_ci(v["recall"]), with_ci(v["ndcg"]), mtrag))
        else:
            rows.append((form, "not run", "query forms not merged", "", mtrag))
    out.append(f"recall@{K} and nDCG@{K}, mean [95 % bootstrap interval] over tasks")
    out.append(
        _util.table(
            rows,
            ("form", "tasks", f"R@{K}", f"nDCG@{K}", "MTRAG README R@5 / nDCG@5 (full corpus)"),
        )
    )
    bands = {b: [i for i, q in enumerate(tasks) if turn_band(q.turn) == b] for b in TURN_BANDS}
    rows = [
        (form, *(f"{values[form]['recall'][ix].mean():.3f} (n {len(ix)})" for ix in bands.values()))
        for form in ran
    ]
    out.append(f"R@{K} by turn position")
    out.append(_util.table(rows, ("form", *(f"turn {b}" for b in TURN_BANDS))))
    if "rewrite" in values:
        gain_rows: list[tuple[str, ...]] = []
        everything = list(range(len(tasks)))
        for b, ix in [("all", everything), *((f"turn {b}", ix) for b, ix in bands.items())]:
            t = paired_test(values["last"]["ndcg"][ix], values["rewrite"]["ndcg"][ix], RESAMPLES)
            ci = "—" if t.ci_low is None else f"[{t.ci_low:+.3f}, {t.ci_high:+.3f}]"
            p = "—" if t.p_value is None else f"{t.p_value:.3f}"
            gain = "—" if t.diff is None else f"{t.diff:+.3f}"
            gain_rows.append((b, str(t.n), gain, ci, p))
        out.append(f"rewrite gain in nDCG@{K} per turn position (paired, rewrite − last)")
        out.append(_util.table(gain_rows, ("turns", "tasks", "gain", "95 % interval", "p")))
        gains = {
            m: values["rewrite"][m].mean() - values["last"][m].mean() for m in ("recall", "ndcg")
        }
        out.append(
            line(
                "rewrite above last on R@5 and nDCG@5 (the README's direction)",
                all(g > 0 for g in gains.values()),
                ", ".join(f"{m} {g:+.3f}" for m, g in gains.items()),
            )
        )
    else:
        out.append(
            "  goal rewrite above last on R@5 and nDCG@5 (the README's direction): not run: "
            "query forms not merged (no collect.query_form)"
        )
    out += refusal_against_labels(human)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--mtrag",
        required=True,
        help="a checkout of github.com/IBM/mt-rag-benchmark, or its git folder",
    )
    args = parser.parse_args()
    for text in asyncio.run(main_async(args)):
        print(text)


if __name__ == "__main__":
    main()
