"""Cut the MTRAG test fixtures from a copy of IBM/mt-rag-benchmark (see NOTICE.md).

Run from the repository root: ``python data/mtrag/make_mtrag.py MTRAG`` where ``MTRAG`` is a
checkout of the repository or its git folder (read with ``git show HEAD:<path>``). Records are
copied unchanged, in the repository's own layout, so a query file finds its siblings and
qrels beside it as in the release.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent
SEP = "<::>"
QUERIES = "mtrag-human/retrieval_tasks/govt"
CONVERSATION = "d44c3196b3d832f85160b5b4fbee1332"
"""A govt conversation whose tasks skip turn 4 (unanswerable turns have no retrieval task)."""
TASKS = "mtragun-human/generation_tasks/reference.jsonl"
TASK_IDS = (
    "c4a3e249f847fe15dad10646b9d3d139<::>2",  # answerable follow-up, two passages
    "b0e60da12bd060a0f404b7838d9ed540<::>2",  # unanswerable follow-up, no passage
    "19d468682f70a84007d46042d378361d<::>2",  # underspecified, standalone ("N/A")
)
RESPONSES = "scripts/evaluation/sample_data/responses-10.jsonl"
"""MTRAGEval's response file: tasks with a system's ``predictions`` (its first two kept)."""
HUMAN = "mtrag-human/evaluations/reference_subset_with_human_evaluations.json"
HUMAN_IDS = (
    "f0d2873b877409f61da7dbdddd22d279<::>1",
    "f0d2873b877409f61da7dbdddd22d279<::>2",
    "6af5334fbd010b919d7fa174823abd12<::>1",  # unanswerable
)


def read(src: Path, path: str) -> str:
    """A file of the repository, from a checkout or from its git folder."""
    if (src / path).is_file():
        return (src / path).read_text(encoding="utf-8")
    return subprocess.run(
        ["git", "--git-dir", str(src), "show", f"HEAD:{path}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def write(path: str, text: str) -> None:
    """Write one fixture under its path in the repository."""
    target = OUT / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def main(src: Path) -> None:
    """Write the fixtures."""
    for form in ("lastturn", "rewrite", "questions"):
        name = f"{QUERIES}/govt_{form}.jsonl"
        lines = read(src, name).splitlines()
        write(
            name, "".join(f"{x}\n" for x in lines if json.loads(x)["_id"].startswith(CONVERSATION))
        )
    qrels = read(src, f"{QUERIES}/qrels/dev.tsv").splitlines()
    write(
        f"{QUERIES}/qrels/dev.tsv",
        "".join(f"{x}\n" for x in qrels[:1] + [x for x in qrels if x.startswith(CONVERSATION)]),
    )
    tasks = {json.loads(x)["task_id"]: x for x in read(src, TASKS).splitlines() if x.strip()}
    write(TASKS, "".join(f"{tasks[t]}\n" for t in TASK_IDS))
    write(RESPONSES, "".join(f"{x}\n" for x in read(src, RESPONSES).splitlines()[:2]))
    human = json.loads(read(src, HUMAN))
    kept = [t for t in human["tasks"] if t["task_id"] in HUMAN_IDS]
    cited = {c["document_id"] for t in kept for c in t["contexts"]}
    human["tasks"] = kept
    human["documents"] = [d for d in human["documents"] if d["document_id"] in cited]
    human["evaluations"] = [e for e in human["evaluations"] if e["task_id"] in HUMAN_IDS]
    write(HUMAN, json.dumps(human, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
