"""Build the bundled ablation demo from ../shared/data/dureader (Apache-2.0; see NOTICE.md).

Run from the repository root: ``python data/ablation/make_demo.py [SHARED_DATA_DIR]``. The output
(corpus.jsonl, questions.jsonl) is committed, so the demo never needs the shared folder.

The corpus is every document of DuReader's search dev set (453 web documents, about 850 KB of
text): one document per line, its paragraphs joined by blank lines, its page title kept. The
questions are the first few with a human answer and a selected document; the reference is the
first human answer, the reference contexts the selected documents' most related paragraphs, and
the reference context ids those documents (what a corpus subset keeps first).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent
QUESTIONS = 8
MAX_ANSWER_CHARS = 300


def main(shared: Path) -> None:
    """Write corpus.jsonl and questions.jsonl next to this file."""
    corpus, questions = [], []
    for line in (shared / "dureader" / "search.dev.jsonl").read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        qid = f"dr{item['question_id']}"
        ids = []
        for d, doc in enumerate(item["documents"]):
            doc_id = f"{qid}-{d}"
            ids.append(doc_id)
            corpus.append(
                {"id": doc_id, "title": doc["title"], "text": "\n\n".join(doc["paragraphs"])}
            )
        selected = [(ids[d], doc) for d, doc in enumerate(item["documents"]) if doc["is_selected"]]
        answers = [a for a in item["answers"] if a.strip()]
        if (
            len(questions) < QUESTIONS
            and answers
            and selected
            and len(answers[0]) <= MAX_ANSWER_CHARS
        ):
            questions.append(
                {
                    "question_id": qid,
                    "question": item["question"],
                    "reference": answers[0],
                    "reference_context_ids": [i for i, _ in selected],
                    "reference_contexts": [
                        doc["paragraphs"][doc["most_related_para"]] for _, doc in selected
                    ],
                    "metadata": {"source": "DuReader search.dev", "type": item["question_type"]},
                }
            )
    for name, rows in (("corpus.jsonl", corpus), ("questions.jsonl", questions)):
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        (OUT / name).write_text(text, encoding="utf-8")
    print(f"{len(corpus)} documents, {len(questions)} questions")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("../shared/data"))
