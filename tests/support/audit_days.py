"""Days of a support bot's request log for the audit's day-after-day tests.

Two collections of six queries each; each query's served top 3 puts the document that answers
first. On the last day the ``account`` collection's engine serves only documents about
something else (a regression the audit must flag in that segment alone).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import yaml

FIRST = dt.date(2026, 11, 1)
DAYS = 8
BROKEN = FIRST + dt.timedelta(days=DAYS - 1)

QUERIES = {
    "billing": [
        "refund for a damaged parcel",
        "download an invoice as pdf",
        "apply a coupon code at checkout",
        "change the billing address",
        "pay with a gift card",
        "cancel a pending order",
    ],
    "account": [
        "reset a forgotten password",
        "close my account for good",
        "change the email on my profile",
        "turn on two factor login",
        "export my personal data",
        "merge two duplicate accounts",
    ],
}


def served(collection: str, qi: int, query: str, broken: bool) -> list[dict[str, Any]]:
    """The served top 3: the document that answers first, then two others; on the broken day
    the account segment's engine serves only documents about something else."""
    answer = {"_id": f"{collection}-{qi}", "_source": {"content": f"How to {query}: step by step."}}
    others = [
        {"_id": f"{collection}-{qi}-x{d}", "_source": {"content": f"Opening hours of store {d}."}}
        for d in range(3)
    ]
    hits = others[:3] if broken and collection == "account" else [answer, *others[:2]]
    return [{**h, "_score": 3.0 - i} for i, h in enumerate(hits)]


def write_logs(tmp: Path) -> Path:
    corpus = []
    for day in range(DAYS):
        date = FIRST + dt.timedelta(days=day)
        rows, n = [], 0
        for collection, queries in QUERIES.items():
            for qi, query in enumerate(queries):
                for _ in range(1 + (qi % 3)):
                    n += 1
                    hits = served(collection, qi, query, date == BROKEN)
                    rows.append(
                        {
                            "id": f"q{n}on{day}",
                            "ts": f"{date}T10:{n % 60:02d}:00Z",
                            "request": {"q": query, "filters": {"collection": collection}},
                            "retrieval": {"hits": hits},
                            "response": {"text": hits[0]["_source"]["content"]},
                        }
                    )
        folder = tmp / "logs" / date.isoformat()
        folder.mkdir(parents=True)
        (folder / "part-0.jsonl").write_text(
            "\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8"
        )
    for collection, queries in QUERIES.items():
        for qi, query in enumerate(queries):
            for h in served(collection, qi, query, False):
                corpus.append(
                    {
                        "id": h["_id"],
                        "text": h["_source"]["content"],
                        "metadata": {"collection": collection},
                    }
                )
    path = tmp / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(c) for c in corpus) + "\n", encoding="utf-8")
    return path


def audit_config(tmp: Path, corpus: Path, **audit: Any) -> Path:
    config = {
        "runs_root": str(tmp / "runs"),
        "cache_dir": str(tmp / "cache"),
        "models": {"judge": "fake/judge", "embedder": "fake/embed", "backoff_s": 0.0},
        "collect": {"backend": "local", "corpus": str(corpus), "index_path": str(tmp / "index")},
        "audit": {
            "name": "bot",
            "source": {
                "format": "jsonl",
                "path": str(tmp / "logs" / "{day}" / "*.jsonl"),
                "fields": {
                    "request_id": "id",
                    "time": "ts",
                    "query": "request.q",
                    "filters": "request.filters",
                    "docs": "retrieval.hits[*].{id: _id, text: _source.content, score: _score}",
                    "answer": "response.text",
                },
            },
            "segment": "filters.collection",
            "sample": 100,
            "k": 3,
            "metrics": ["faithfulness"],
            "probe": 6,
            "judge_check_days": 3,
            "judge_check_size": 6,
            **audit,
        },
    }
    path = tmp / "audit.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path
