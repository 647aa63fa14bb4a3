"""Build the embedder comparison set from ../shared/data (DuReader, WikiEval, HaluEval).

Run from the repository root: ``python data/embedders/make_pairs.py [SHARED_DATA_DIR]``. The
output (pairs.jsonl) is committed, so ``bench/bench_embedders.py`` never needs the shared
folder. Texts are copied as they are, only cut to ``MAX_CHARS`` (an embedder sees a sentence
or a paragraph, and the offline ones stop at a few hundred tokens anyway).

One line per question: ``lang``, ``source``, ``id``, ``question`` and, where the source has
them, ``answer`` (a human answer to that question), ``passage`` (the paragraph that answers
it) and ``bad_answer`` (an answer humans judged less relevant to it).
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "pairs.jsonl"
MAX_CHARS = 400
HALUEVAL_ITEMS = 100


def _cut(text: str) -> str:
    return " ".join(text.split())[:MAX_CHARS]


def dureader(src: Path) -> list[dict]:
    """Chinese search questions, a human answer and the most related paragraph of each."""
    rows = []
    raw = (src / "dureader" / "search.dev.jsonl").read_text(encoding="utf-8")
    for line in filter(str.strip, raw.split("\n")):
        item = json.loads(line)
        selected = [d for d in item["documents"] if d["is_selected"]]
        if not item["answers"] or not selected:
            continue
        doc = selected[0]
        rows.append(
            {
                "lang": "zh",
                "source": "dureader",
                "id": f"dr{item['question_id']}",
                "question": item["question"],
                "answer": _cut(item["answers"][0]),
                "passage": _cut(doc["paragraphs"][doc["most_related_para"]]),
            }
        )
    return rows


def wikieval(src: Path) -> list[dict]:
    """English questions, each with the answer humans judged relevant and the one they did not."""
    by_question: dict[str, dict[int, str]] = {}
    with (src / "wikieval" / "ar.csv").open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            by_question.setdefault(row["question"], {})[int(row["label"])] = row["answer"]
    return [
        {
            "lang": "en",
            "source": "wikieval",
            "id": f"we{i:02d}",
            "question": question,
            "answer": _cut(answers[1]),
            "bad_answer": _cut(answers[0]),
        }
        for i, (question, answers) in enumerate(by_question.items())
        if set(answers) == {0, 1}
    ]


def halueval(src: Path) -> list[dict]:
    """English multi-hop questions with the knowledge paragraph that answers each."""
    # JSON lines despite the file's name.
    raw = (src / "halueval" / "qa_samples.json").read_text(encoding="utf-8")
    items = [json.loads(line) for line in filter(str.strip, raw.split("\n"))]
    return [
        {
            "lang": "en",
            "source": "halueval",
            "id": f"he{i:03d}",
            "question": item["question"],
            "passage": _cut(item["knowledge"]),
        }
        for i, item in enumerate(items[:HALUEVAL_ITEMS])
    ]


def main() -> None:
    """Write pairs.jsonl from the shared data folder given (default ../shared/data)."""
    src = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data")
    rows = dureader(src) + wikieval(src) + halueval(src)
    OUT.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    print(f"{len(rows)} questions -> {OUT}")


if __name__ == "__main__":
    main()
