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
for BM25 and ELSER), each form searched as a tune searches a ``collect.query_form`` variant;
the rewrite gain per turn position is a paired test per band.

The subset's rated responses (the reference's, gpt-4o's, llama-3.1-405b's) are scored by
``refusal_recall`` and ``refusal_precision`` against its answerability labels, through the
score stage's code with the offline fake judge (no LLM): the refusal check is its phrase
heuristic, whose verdicts are set beside those of MTRAG's own IDK judge (read from the
subset's ``conditional_idk``). What an LLM's refusal check would make of them is not measured.

Run from the repository root: ``python bench/bench_mtrag.py --mtrag PATH`` with ``PATH`` a
checkout of github.com/IBM/mt-rag-benchmark (or its git folder).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import _util
import numpy as np

from ragaudit.cache import hold_gateway
from ragaudit.cache._fake import FAKE  # the scripted provider: benches and tests only
from ragaudit.config import load_config
from ragaudit.conversation import TURN_BANDS, in_context, turn_band
from ragaudit.dataset import Question, load_questions
from ragaudit.judging import Judge
from ragaudit.metrics import Sample
from ragaudit.metrics._answerability_judge import check_answer
from ragaudit.query_forms import QUERY_FORMS, search_queries
from ragaudit.ranking import ndcg_at_k, recall_at_k
from ragaudit.registry import METRICS
from ragaudit.scoring import make_deps, score_rows
from ragaudit.stats import bootstrap_ci, paired_test, share
from ragaudit.tuning import Variant, retrieve

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
REFUSAL_METRICS = ("refusal_recall", "refusal_precision")
"""The refusal metrics' registered names (``ragaudit/metrics/_refusal.py``)."""


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


async def search(
    form: str, tasks: list[Question], root: Path
) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Each task's top K by the local backend's BM25, searched as ``form`` says.

    As a tune searches a query-form variant: the form's text per task
    (``query_forms.search_queries``: MTRAG's rewrite is the set's ``rewrite`` field, so no judge
    is asked), then ``tuning.retrieve`` with ``collect.query_form`` set on the variant. Also
    returned: where the searched texts came from (``query_forms.SOURCES``).
    """
    collect: dict[str, Any] = {
        "backend": "local",
        "index_path": str(root / "index"),
        "corpus": str(root / "corpus.jsonl"),
        "mode": "bm25",
        "top_n": K,
        "filter_field": "collection",
        "query_form": form,
    }
    data = {"questions": str(root / "unused.jsonl"), "runs_root": str(root / "runs")}
    cfg = load_config(None, {**data, "collect": collect}, environ={})
    queries = await search_queries(tasks, form, cfg.conversation, None)

    async def no_embedding(texts: list[str]) -> list[list[float]]:
        raise RuntimeError("BM25 embeds nothing")

    texts: dict[tuple[str, str], str] = {}
    (run,) = await retrieve([Variant(form, cfg)], tasks, K, no_embedding, texts, {form: queries})
    if run.status != "ok":
        raise RuntimeError(f"the {form} form's search failed: {run.error}")
    found = {qid: got.ids for qid, got in run.questions.items()}
    return found, dict(Counter(q.source for q in queries.values()))


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


COMPARABLE = frozenset({"answerable", "partial", "unanswerable"})
"""Labels on which MTRAG's conditioned IDK score says whether the response declined."""


def mtrag_declined(label: str, conditional_idk: float) -> bool:
    """Whether MTRAG's own IDK judge found a response declining, from its conditioned score.

    The subset records that judge only through ``conditional_idk``: by MTRAG's rule
    (``scripts/evaluation/judge_wrapper.py``, ``get_idk_score``) 1 on an unanswerable turn
    means the response declined, 0 on an answerable or partial turn means it declined (the
    penalty). On a conversational turn the score does not say (not in :data:`COMPARABLE`).
    """
    return conditional_idk == 1 if label == "unanswerable" else conditional_idk == 0


def idk_scores(path: Path) -> dict[tuple[str, str], float]:
    """(task, model) → ``conditional_idk`` of the subset's evaluations, read as released."""
    obj = json.loads(path.read_text(encoding="utf-8"))
    return {
        (e["task_id"], e["model_id"]): e["annotations"]["conditional_idk"]["composite"]["value"]
        for e in obj["evaluations"]
        if "conditional_idk" in e.get("annotations", {})
    }


async def refusal_against_labels(human: list[Question], root: Path, release: Path) -> list[str]:
    """The subset's rated responses scored by ``refusal_recall`` and ``refusal_precision``.

    Each response is a row as the score stage builds it: the turn as the judge is shown it
    (``conversation.in_context``), the response, the turn's answerability label as MTRAG gives
    it (source ``given``); scored by ``scoring.score_rows`` with the run's deps. The judge is
    the offline fake (no real LLM): its refusal check is the phrase heuristic registered with
    the prompt (``metrics/_answerability_judge.py``), so the figures are the metrics' on that
    detector's verdicts. How far those verdicts are from MTRAG's own IDK judge is printed
    beside them (:func:`mtrag_declined`).
    """
    labels = Counter(q.answerability or "unlabelled" for q in human)
    models = sorted({m for q in human for m in q.metadata.get("responses", {})})
    out = [
        f"answerability of the human subset's {len(human)} tasks: "
        + ", ".join(f"{k} {v}" for k, v in labels.most_common())
        + f"; rated responses of {', '.join(models)}"
    ]
    data = {
        "questions": str(root / "unused.jsonl"),
        "runs_root": str(root / "runs"),
        "cache_dir": str(root / "cache-refusal"),
        "models": {"judge": "fake/judge", "embedder": "fake/embed", "backoff_s": 0.0},
    }
    cfg = load_config(None, data, environ={})
    idk = idk_scores(release / HUMAN)
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
    # (model, MTRAG's IDK judge found it declining, the fake check's refusal) per response.
    verdicts: list[tuple[str, bool, str]] = []
    FAKE.reset()
    with hold_gateway(cfg) as gw:
        judge = Judge.from_config(cfg.models, gw, 64)
        deps = make_deps(cfg, judge)
        window = judge.window
        assert window is not None  # from_config always works one out
        for model in models:
            samples = []
            for q in human:
                response = q.metadata.get("responses", {}).get(model)
                if response is None:
                    continue
                shown = in_context(q, cfg.conversation, judge.model, judge.budget)
                samples.append(
                    Sample(
                        question_id=q.question_id,
                        question=shown.question,
                        language=q.language,
                        response=response,
                        reference=None,
                        contexts=[],
                        context_ids=[],
                        reference_contexts=None,
                        reference_context_ids=None,
                        answerability=q.answerability,
                        answerability_source="given" if q.answerability else None,
                    )
                )
            rows[model] = {
                name: await score_rows(METRICS.get(name), samples, deps, window=window)
                for name in REFUSAL_METRICS
            }
            by_id = {q.question_id: q for q in human}
            for sample in samples:
                q = by_id[sample.question_id]
                value = idk.get((q.question_id, model))
                if value is None or q.answerability not in COMPARABLE:
                    continue
                declined = mtrag_declined(q.answerability, value)
                # The check the metrics asked, asked again: the memo answers it.
                verdict = await check_answer(sample, deps)
                verdicts.append((model, declined, verdict.refusal))
    calls = FAKE.stats.calls
    table_rows = []
    for model in models:
        cells: list[str] = [model]
        for name in REFUSAL_METRICS:
            got = rows[model][name]
            ok = [r["value"] for r in got if r["status"] == "ok"]
            sh = share(int(sum(ok)), len(ok))
            cells.append(
                "—"
                if sh.share is None
                else f"{sh.share:.2f} [{sh.ci_low:.2f}, {sh.ci_high:.2f}] (n {sh.n})"
            )
            cells.append(str(Counter(r["status"] for r in got)["skipped"]))
        table_rows.append(tuple(cells))
    out.append(
        "refusal metrics on the rated responses against MTRAG's answerability labels "
        "(exact 95 % interval); refusal check: the offline fake judge's phrase heuristic, "
        f"not an LLM ({calls} fake calls)"
    )
    out.append(
        _util.table(
            table_rows,
            (
                "responses of",
                "refusal_recall",
                "skipped",
                "refusal_precision",
                "skipped",
            ),
        )
    )
    crossed = Counter(("declined" if d else "answered", r) for _, d, r in verdicts)
    declines = [r == "yes" for _, d, r in verdicts if d]
    answers = [r == "yes" for _, d, r in verdicts if not d]
    found, false = share(sum(declines), len(declines)), share(sum(answers), len(answers))
    out.append(
        "the fake check's refusal verdict against MTRAG's own IDK judge (read from the subset's "
        "conditional_idk) on answerable, partial and unanswerable turns: "
        + ", ".join(f"MTRAG {a} / fake {b} {n}" for (a, b), n in sorted(crossed.items()))
    )
    out.append(
        f"  MTRAG's declines the fake calls a decline: {found.k} of {found.n} "
        f"[{found.ci_low:.2f}, {found.ci_high:.2f}]; MTRAG's answers it calls a decline: "
        f"{false.k} of {false.n} [{false.ci_low:.3f}, {false.ci_high:.3f}] (a 'partial' "
        "decline is not one, as in the metrics)"
    )
    out.append(
        "  not scored: the refusal check as an LLM judge would give it (no real LLM here), so "
        "these are the metrics' figures on the fake heuristic's verdicts, not on the product's "
        "judge; MTRAG's conversational turns are skipped by refusal_precision by design and "
        "carry no IDK verdict to compare"
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
    ran = [f for f in FORMS if f in QUERY_FORMS]
    values: dict[str, dict[str, np.ndarray]] = {}
    found: dict[str, dict[str, list[str]]] = {}
    sources: dict[str, dict[str, int]] = {}
    for form in ran:
        found[form], sources[form] = await search(form, tasks, root)
        values[form] = scores(tasks, found[form])
        if form != "last" and found[form] == found["last"]:
            # The hook sets collect.query_form on the tune's variant: a form that changes no
            # list means the search did not read it.
            out.append(f"warning: the {form} form found exactly what last found, task by task")
    rows: list[tuple[str, ...]] = []
    for form in ran:
        ref = README.get(form, {})
        mtrag = "  ".join(f"{r} {a:.2f} / {b:.2f}" for r, (a, b) in ref.items()) or "—"
        v = values[form]
        rows.append((form, str(len(tasks)), with_ci(v["recall"]), with_ci(v["ndcg"]), mtrag))
    out.append(
        "searched texts by source (query_forms.SOURCES): "
        + "; ".join(
            f"{form} " + ", ".join(f"{k} {v}" for k, v in sorted(n.items()))
            for form, n in sources.items()
        )
    )
    changed = {
        form: sum(found[form][q] != found["last"][q] for q in found["last"])
        for form in ran
        if form != "last"
    }
    out.append(
        "tasks whose top 5 differs from last's: "
        + ", ".join(f"{form} {n} of {len(tasks)}" for form, n in changed.items())
    )
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
    gains = {m: values["rewrite"][m].mean() - values["last"][m].mean() for m in ("recall", "ndcg")}
    out.append(
        line(
            "rewrite above last on R@5 and nDCG@5 (the README's direction)",
            all(g > 0 for g in gains.values()),
            ", ".join(f"{m} {g:+.3f}" for m, g in gains.items()),
        )
    )
    out += await refusal_against_labels(human, root, release)
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
