"""Human-labelled calibration data: WikiEval pairs, HaluEval items and a team's own labels file.

Every item becomes a :class:`Labelled`: a metric :class:`~ragaudit.metrics.Sample` and the human
label for one metric. WikiEval and HaluEval items come in pairs (a good and a bad variant of one
question, RAGAS's protocol): ``pair`` names the pair.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragaudit import labels as labels_store
from ragaudit.dataset import read_jsonl
from ragaudit.errors import InputError
from ragaudit.lang import detect_language
from ragaudit.metrics import METRICS, Sample

# WikiEval file → the metric its human label is about.
WIKIEVAL_FILES = {
    "ff.csv": "faithfulness",
    "ar.csv": "answer_relevancy",
    "cr.csv": "context_relevance",
}


@dataclass(frozen=True)
class Labelled:
    """A sample and its human label for one metric (1 good, 0 bad; or a grade in [0, 1])."""

    dataset: str
    metric: str
    sample: Sample
    label: float
    pair: str | None = None


def make_sample(
    qid: str,
    question: str,
    *,
    response: str | None = None,
    contexts: list[str] | None = None,
    reference: str | None = None,
    reference_contexts: list[str] | None = None,
) -> Sample:
    """A metric sample with the ids a calibration item needs."""
    contexts = contexts or []
    return Sample(
        question_id=qid,
        question=question,
        language=detect_language(question),
        response=response,
        reference=reference,
        contexts=contexts,
        context_ids=[f"{qid}-c{i}" for i in range(len(contexts))],
        reference_contexts=reference_contexts,
        reference_context_ids=None,
    )


def _csv_rows(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            return list(csv.DictReader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None


def load_wikieval(folder: Path | str, limit: int | None = None) -> list[Labelled]:
    """WikiEval's three files (``ff.csv``, ``ar.csv``, ``cr.csv``); ``limit`` pairs per file."""
    folder = Path(folder)
    out: list[Labelled] = []
    for name, metric in WIKIEVAL_FILES.items():
        path = folder / name
        if not path.is_file():
            raise InputError(f"{path}: WikiEval file not found")
        rows = _csv_rows(path)
        by_question: dict[str, list[tuple[int, dict[str, str]]]] = {}
        for line, row in enumerate(rows, start=2):
            missing = [c for c in ("question", "label") if c not in row]
            if missing:
                raise InputError(f"{path}, line {line}: no column {missing[0]!r}")
            by_question.setdefault(row["question"], []).append((line, row))
        pairs = [
            q for q, rows_ in by_question.items() if {r["label"] for _, r in rows_} == {"0", "1"}
        ]
        for p, question in enumerate(pairs[:limit] if limit else pairs):
            for _line, row in by_question[question]:
                qid = f"wikieval-{metric}-{p}-{row['label']}"
                sample = make_sample(
                    qid,
                    question,
                    response=row.get("answer") or None,
                    contexts=[row["context"]] if row.get("context") else [],
                )
                out.append(
                    Labelled("wikieval", metric, sample, float(row["label"]), f"{metric}-{p}")
                )
    return out


def load_halueval(path: Path | str, limit: int | None = None) -> list[Labelled]:
    """HaluEval QA items: the right and the hallucinated answer on the same knowledge.

    The label is 1 for the right answer: faithfulness is scored as a detector of it.
    """
    path = Path(path)
    out: list[Labelled] = []
    items = read_jsonl(path)
    for i, (n, item) in enumerate(items[:limit] if limit else items):
        try:
            knowledge, question = item["knowledge"], item["question"]
            answers = {1: item["right_answer"], 0: item["hallucinated_answer"]}
        except (KeyError, TypeError) as exc:
            raise InputError(f"{path}, line {n}: not a HaluEval QA item ({exc})") from None
        for label, answer in answers.items():
            sample = make_sample(
                f"halueval-{i}-{label}", question, response=answer, contexts=[knowledge]
            )
            out.append(Labelled("halueval", "faithfulness", sample, float(label), f"halueval-{i}"))
    return out


def _labels_records(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Each record of a labels file with where it is: its JSONL line or its CSV data row."""
    if path.suffix.lower() == ".csv":
        out = []
        for n, row in enumerate(_csv_rows(path), start=1):
            if None in row:  # csv.DictReader files the surplus of a too-long row under None
                raise InputError(f"{path}, row {n}: more fields than the header names")
            out.append((f"{path}, row {n}", dict(row)))
        return out
    return [(f"{path}, line {n}", record) for n, record in read_jsonl(path)]


def _a(value: object) -> str:
    """``value``'s JSON kind with its article: "a list", "an int"."""
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def text_field(rec: dict[str, Any], where: str, *names: str) -> str | None:
    """The first of ``names`` the record holds, which must be text (None: none is there)."""
    for name in names:
        value = rec.get(name)
        if value in (None, ""):
            continue
        if not isinstance(value, str):
            raise InputError(f"{where}: {name!r} is {_a(value)}, not text")
        return value
    return None


def _store_labels(run_dir: Path) -> list[Labelled]:
    """The yes/no labels of a run's labels store, each with the answer and contexts shown."""
    out = []
    for row in labels_store.labelled_items(run_dir, labels_store.ANSWER_KINDS):
        if row["question"] is None:
            raise InputError(
                f"{run_dir / labels_store.FILE}: item {row['item_id']!r} names a question "
                "the run does not have"
            )
        sample = make_sample(
            row["question_id"],
            row["question"],
            response=row["answer"],
            contexts=row.get("contexts"),
        )
        out.append(Labelled("labels", row["kind"], sample, float(row["label"])))
    if not out:
        raise InputError(
            f"{run_dir / labels_store.FILE}: no {' or '.join(labels_store.ANSWER_KINDS)} label"
        )
    return out


def load_labels(path: Path | str) -> list[Labelled]:
    """A team's own labels: question, answer, contexts, reference and a human label per metric.

    JSONL with ``labels: {metric: value}`` or ``label_<metric>`` fields, or CSV with
    ``label_<metric>`` columns and ``contexts`` as a JSON list. Labels lie in [0, 1]. A run
    folder or its labels store is read as it is: each person's latest yes/no label of
    an answer (skipped items left out).
    """
    path = Path(path)
    store = labels_store.store_dir(path)
    if store is not None:
        return _store_labels(store)
    if not path.is_file():
        raise InputError(f"{path}: labels file not found")
    out: list[Labelled] = []
    for n, (where, rec) in enumerate(_labels_records(path), start=1):
        given = rec.get("labels") or {}
        if not isinstance(given, dict):
            raise InputError(
                f"{where}: 'labels' is {_a(given)}; write an object {{\"metric\": label, ...}}"
            )
        labels = dict(given)
        labels.update({k[len("label_") :]: v for k, v in rec.items() if k.startswith("label_")})
        question = text_field(rec, where, "question", "user_input")
        if not question:
            raise InputError(f"{where}: no 'question'")
        if not labels:
            raise InputError(f"{where}: no human label ('labels' or 'label_<metric>')")
        unknown = sorted(str(m) for m in labels if m not in METRICS)
        if unknown:
            raise InputError(
                f"{where}: unknown metric {', '.join(map(repr, unknown))} "
                f"(known: {', '.join(sorted(METRICS))})"
            )
        contexts = rec.get("contexts", rec.get("retrieved_contexts")) or []
        if isinstance(contexts, str):
            try:
                contexts = json.loads(contexts) if contexts.strip().startswith("[") else [contexts]
            except json.JSONDecodeError:
                raise InputError(f"{where}: 'contexts' is not a JSON list") from None
        if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
            raise InputError(f"{where}: 'contexts' must be a list of texts")
        sample = make_sample(
            str(rec.get("question_id") or f"labels-{n}"),
            question,
            response=text_field(rec, where, "answer", "response"),
            contexts=contexts,
            reference=text_field(rec, where, "reference"),
        )
        for metric, value in labels.items():
            if value in (None, ""):
                continue
            try:
                label = float(value)
            except (TypeError, ValueError):
                raise InputError(f"{where}: label of {metric!r} is not a number") from None
            if not 0.0 <= label <= 1.0:
                raise InputError(f"{where}: label of {metric!r} is {label}, not in [0, 1]")
            out.append(Labelled("labels", metric, sample, label))
    return out


__all__ = [
    "WIKIEVAL_FILES",
    "Labelled",
    "load_halueval",
    "load_labels",
    "load_wikieval",
    "make_sample",
]
