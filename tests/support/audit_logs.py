"""A day of a support bot's request log and the audit config over it (the audit's tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

DAY = "2026-11-26"
PLANTED = "<script>alert('x')</script>"
# The JMESPath map of the service log these tests and benches write: one layout, one map.
FIELDS = {
    "request_id": "id",
    "time": "ts",
    "session": "session_id",
    "query": "request.q",
    "filters": "request.filters",
    "docs": "retrieval.hits[*].{id: _id, text: _source.content, score: _score}",
    "answer": "response.text",
    "citations": "response.citations",
    "feedback": "feedback.thumb",
}

TOPICS = {
    "billing": [
        ("how do I get a refund for a damaged parcel", "refund damaged parcel"),
        ("where can I download an invoice as pdf", "download invoice pdf"),
        ("how to apply a coupon code at checkout", "apply coupon code checkout"),
    ],
    "account": [
        ("how can I reset a forgotten password", "reset forgotten password"),
        ("how do I close my account for good", "close account good"),
        (f"is my data deleted {PLANTED}", "data deleted"),
    ],
}


def write_log(folder: Path) -> Path:
    """A day of a service's request log: repeated queries (a head), one-off ones (a tail)."""
    rows = []
    n = 0
    for collection, queries in TOPICS.items():
        for qi, (query, words) in enumerate(queries):
            # The first query of each collection is asked often, the others once or twice.
            for repeat in range(6 if qi == 0 else 1 + qi % 2):
                n += 1
                hits = [
                    {
                        "_id": f"{collection}-{qi}-{d}",
                        "_source": {
                            "content": f"note {d}: {words if d == 0 else 'other matters'} "
                            + (PLANTED if qi == 2 and d == 1 else "")
                        },
                        "_score": 3.0 - d,
                    }
                    for d in range(3)
                ]
                rows.append(
                    {
                        "id": f"r{n}",
                        "ts": f"{DAY}T10:{n:02d}:00Z",
                        # One request a session: a support bot's questions stand alone (chat
                        # traffic, judged turn by turn, is audit_chats.py's).
                        "session_id": f"s{n}",
                        "request": {
                            "q": query if repeat % 2 == 0 else query.upper(),
                            "filters": {"collection": collection},
                        },
                        "retrieval": {"hits": hits},
                        "response": {
                            "text": f"You can {words} [1].",
                            "citations": [hits[0]["_id"]],
                        },
                        "feedback": {"thumb": "up" if repeat % 3 else "down"},
                    }
                )
    day = folder / "logs" / DAY
    day.mkdir(parents=True)
    path = day / "part-0.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def audit_yaml(tmp: Path, **audit: Any) -> Path:
    """An audit config over ``tmp``'s log, the fake judge and embedder."""
    config = {
        "runs_root": str(tmp / "runs"),
        "cache_dir": str(tmp / "cache"),
        "models": {"judge": "fake/judge", "embedder": "fake/embed", "backoff_s": 0.0},
        "audit": {
            "name": "support-bot",
            "source": {
                "format": "jsonl",
                "path": str(tmp / "logs" / "{day}" / "*.jsonl"),
                "fields": dict(FIELDS),
            },
            "segment": "filters.collection",
            "sample": 8,
            "k": 3,
            "metrics": ["faithfulness", "answer_relevancy"],
            **audit,
        },
    }
    path = tmp / "audit.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path
