"""Small run configs and run folders the tests build."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from ragaudit.cache import Gateway
from ragaudit.config import RunConfig, load_config
from ragaudit.dataset import jsonl_lines
from ragaudit.runfolder import RunFolder
from ragaudit.schemas import CANDIDATES, QUESTIONS, to_table
from ragaudit.tasks._common import StageContext
from support.paths import REPO_ROOT

REPO = REPO_ROOT
SHARED_DATA = REPO.parent / "shared" / "data"


def make_config(tmp_path: Path, judge: str = "fake/judge", **overrides: Any) -> RunConfig:
    """A run config on the demo data, the fake judge and embedder, everything under tmp_path."""
    base: dict[str, Any] = {
        "questions": str(REPO / "data" / "demo" / "questions.jsonl"),
        "runs_root": str(tmp_path / "runs"),
        "cache_dir": str(tmp_path / "cache"),
        "collect": {
            "index_path": str(tmp_path / "index"),
            "corpus": str(REPO / "data" / "demo" / "corpus.jsonl"),
            "top_n": 6,
        },
        "models": {"judge": judge, "embedder": "fake/embed", "backoff_s": 0.0},
        "score": {"top_k": 3},
    }
    for dotted, value in overrides.items():
        node = base
        parts = dotted.split("__")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return load_config(None, base, environ={})


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file."""
    return [
        json.loads(line) for line in jsonl_lines(path.read_text(encoding="utf-8")) if line.strip()
    ]


def write_question(
    run: RunFolder, texts: dict[str, str], question: str = "Which passage answers best?"
) -> None:
    """One question ``q0`` whose candidates are ``texts`` in engine order."""
    run.write(
        "questions",
        to_table(
            [
                {
                    "run_id": run.run_id,
                    "question_id": "q0",
                    "question": question,
                    "language": "en",
                    "filters": "{}",
                    "metadata": "{}",
                }
            ],
            QUESTIONS,
        ),
    )
    run.write(
        "candidates",
        to_table(
            [
                {
                    "run_id": run.run_id,
                    "question_id": "q0",
                    "context_id": cid,
                    "text": text,
                    "engine_rank": i + 1,
                    "engine_score": float(len(texts) - i),
                    "gold_relevant": None,
                    "source": "{}",
                }
                for i, (cid, text) in enumerate(texts.items())
            ],
            CANDIDATES,
        ),
    )


def context(config: RunConfig, run_id: str = "t") -> StageContext:
    """A stage context on ``config``'s runs root with its own gateway (no Prefect)."""
    gateway = Gateway(config.cache_dir, concurrency=config.models.concurrency, backoff_s=0.0)
    return StageContext(config=config, run=RunFolder(config.runs_root, run_id), gateway=gateway)


def table(run: RunFolder, name: str) -> list[dict[str, Any]]:
    """A run folder table's rows."""
    return run.read(name).to_pylist()


def graded_set(tmp_path: Path, n: int = 12, seed: int = 7) -> tuple[Path, Path, dict]:
    """A question set whose candidates come with it, and a qrels file grading them 0-3.

    Some contexts are graded 0 (judged not relevant), some relevant ones are never retrieved,
    one question has only zero grades, and the engine's scores are all tied (NaN).
    """
    rng = random.Random(seed)
    rows, qrels, grades_of = [], [], {}
    for q in range(n):
        qid = f"q{q}"
        texts = [f"passage {q}-{i}" for i in range(rng.randint(6, 12))]
        rows.append({"question_id": qid, "question": f"question {q}?", "retrieved_contexts": texts})
        grades = {f"{qid}#{i}": rng.choice([0, 0, 1, 2, 3]) for i in range(len(texts))}
        grades[f"{qid}#unretrieved"] = rng.choice([0, 2])
        if q == 0:
            grades = dict.fromkeys(grades, 0)
        grades_of[qid] = grades
        qrels += [f"{qid} 0 {doc} {g}" for doc, g in grades.items()]
    questions = tmp_path / "graded.jsonl"
    questions.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    qrels_path = tmp_path / "graded.qrels"
    qrels_path.write_text("\n".join(qrels) + "\n", encoding="utf-8")
    return questions, qrels_path, grades_of
