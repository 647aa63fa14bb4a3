"""Build the bundled demo set from ../shared/data (DuReader and WikiEval; see NOTICE.md).

Run from the repository root: ``python data/demo/make_demo.py [SHARED_DATA_DIR]``. The output
(questions.jsonl, corpus.jsonl) is committed, so the demo never needs the shared folder.

The set is small on purpose: the offline judge runs on 2 CPU cores and the whole demo must
finish in a few minutes. Questions with short paragraphs are picked for the same reason.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent
DUREADER_QUESTIONS = 3
WIKIEVAL_QUESTIONS = 2
MAX_PARA_CHARS = 220


def dureader(src: Path) -> tuple[list[dict], list[dict]]:
    """Questions (human answers as references, a second human answer as the system's answer)
    and every paragraph of their five documents as candidates, gold = most related paragraphs."""
    questions, corpus = [], []
    # Split at "\n" only: splitlines() also breaks at U+2028/U+2029/U+0085 inside JSON strings.
    raw = (src / "dureader" / "search.dev.jsonl").read_text(encoding="utf-8")
    for line in filter(str.strip, raw.split("\n")):
        item = json.loads(line)
        docs = item["documents"]
        paras = [(d, p, text) for d, doc in enumerate(docs) for p, text in enumerate(doc["paragraphs"])]
        gold = {f"dr{item['question_id']}-{d}-{doc['most_related_para']}"
                for d, doc in enumerate(docs) if doc["is_selected"]}
        if (len(item["answers"]) < 2 or not gold or len(paras) < 4
                or any(len(t) > MAX_PARA_CHARS for _, _, t in paras)):
            continue
        qid = f"dr{item['question_id']}"
        questions.append({
            "question_id": qid,
            "question": item["question"],
            "filters": {"collection": qid},
            "reference": item["answers"][0],
            "response": item["answers"][1],
            "reference_context_ids": sorted(gold),
            "metadata": {"source": "DuReader search.dev", "question_type": item["question_type"],
                         "note": "response is a second human answer standing in for a system's answer"},
        })
        corpus += [{"id": f"{qid}-{d}-{p}", "text": text,
                    "metadata": {"collection": qid, "title": docs[d]["title"], "doc": d, "para": p}}
                   for d, p, text in paras]
        if len(questions) == DUREADER_QUESTIONS:
            break
    return questions, corpus


def chunk(text: str, size: int = 350) -> list[str]:
    """Sentence-aligned chunks of about ``size`` characters (WikiEval contexts are one block)."""
    out: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+", text.strip()):
        if out and len(out[-1]) + len(sentence) < size:
            out[-1] += " " + sentence
        else:
            out.append(sentence)
    return out


def wikieval(src: Path) -> tuple[list[dict], list[dict]]:
    """Questions with the faithful (label 1) answer as the system's answer, no reference (the
    ground_truth stage writes one), the Wikipedia context split into paragraphs as candidates."""
    rows = list(csv.DictReader((src / "wikieval" / "ff.csv").open(encoding="utf-8")))
    good = [r for r in rows if r["label"] == "1"]
    questions, corpus = [], []
    for n, row in enumerate(good):
        if len(row["context"]) > 2500:
            continue
        paras = chunk(row["context"])
        qid = f"we{n:03d}"
        questions.append({
            "question_id": qid,
            "question": row["question"],
            "filters": {"collection": qid},
            "response": row["answer"],
            "metadata": {"source": "WikiEval (ff.csv, label 1)"},
        })
        corpus += [{"id": f"{qid}-{i}", "text": p, "metadata": {"collection": qid, "para": i}}
                   for i, p in enumerate(paras)]
        if len(questions) == WIKIEVAL_QUESTIONS:
            break
    return questions, corpus


def main() -> None:
    """Write questions.jsonl and corpus.jsonl next to this script."""
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT.parents[2] / "shared" / "data"
    q1, c1 = dureader(src)
    q2, c2 = wikieval(src)
    for name, rows in (("questions.jsonl", q1 + q2), ("corpus.jsonl", c1 + c2)):
        (OUT / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"{len(q1) + len(q2)} questions, {len(c1) + len(c2)} corpus paragraphs")


if __name__ == "__main__":
    main()
