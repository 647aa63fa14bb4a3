"""Days of a travel assistant's chat traffic in the request log layout of ``audit_logs.py``.

A chat is a ``session_id`` whose requests follow up on the first: only the first names the city
("which museum should I see in Lisbon"), the next ask "how much is a ticket there". The same
follow-up words come in several chats, each after another city, and each is served the same
document, so a grade of one history reused under another would show. One chat begins at 23:50
on the first day and goes on after midnight; requests without a session stand alone (the only
traffic of the eve, the day before the first: a day that holds none of the chats). Each
day's rows are written in an order other than their times' (the log is not sorted), so the
audit must order a session's requests by time.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.audit_logs import audit_yaml

EVE = "2026-11-24"
FIRST_DAY = "2026-11-25"
DAY = "2026-11-26"
COLLECTION = "travel"

# The follow-ups: never naming the city, each served the same documents in every chat.
FOLLOW_UPS = (
    ("how much is a ticket there", "tickets cost 15 euros for adults and 8 for children"),
    ("is it open on mondays", "closed on mondays, open tuesday to sunday from ten"),
    ("can I get there by tram", "tram lines stop two minutes from the entrance"),
    ("is there a cafe inside", "a cafe with a garden terrace serves lunch"),
    ("do they have audio guides", "audio guides in eight languages at the desk"),
    ("can I take photos", "photos without flash are allowed in every room"),
)


@dataclass(frozen=True)
class Chat:
    """One session: its city, its id, when each of its turns was asked."""

    session: str
    city: str
    museum: str
    times: tuple[str, ...]
    """ISO times of its turns in order: the first asks about the city, the rest follow up."""

    def turn(self, n: int) -> tuple[str, list[tuple[str, str]], str]:
        """Turn ``n`` (from 1): its query, served documents (id, text) and the answer."""
        if n == 1:
            query = f"which museum should I see in {self.city}"
            docs = [
                (
                    f"{self.city.lower()}-museum",
                    f"the {self.museum} is the best museum in "
                    f"{self.city}, with paintings and tiles",
                ),
                ("travel-general", "museums in europe often offer reduced tickets"),
            ]
            return query, docs, f"See the {self.museum} in {self.city} [1]."
        query, text = FOLLOW_UPS[(n - 2) % len(FOLLOW_UPS)]
        docs = [
            (f"faq-{(n - 2) % len(FOLLOW_UPS)}", text),
            ("travel-general", "museums in europe often offer reduced tickets"),
        ]
        return query, docs, f"{text.capitalize()} [1]."


CHATS = (
    Chat(
        "chat-lisbon",
        "Lisbon",
        "Gulbenkian Museum",
        (
            f"{DAY}T10:00:00Z",
            f"{DAY}T10:02:00Z",
            f"{DAY}T10:04:00Z",
        ),
    ),
    Chat(
        "chat-kyoto",
        "Kyoto",
        "Kyoto National Museum",
        (
            f"{FIRST_DAY}T23:50:00Z",
            f"{FIRST_DAY}T23:55:00Z",
            f"{DAY}T00:05:00Z",
            f"{DAY}T00:10:00Z",
        ),
    ),
    Chat(
        "chat-berlin",
        "Berlin",
        "Pergamon Museum",
        tuple(f"{DAY}T09:{m:02d}:00Z" for m in range(0, 14, 2)),
    ),
    Chat("chat-oslo", "Oslo", "Munch Museum", (f"{FIRST_DAY}T12:00:00Z", f"{FIRST_DAY}T12:03:00Z")),
)
STANDALONE = (
    (f"{DAY}T11:00:00Z", "which museum should I see in Lisbon"),
    (f"{DAY}T11:30:00Z", "best time to visit museums in europe"),
    (f"{EVE}T15:00:00Z", "best time to visit museums in europe"),
)


_LISBON = [
    (
        "lisbon-museum",
        "the Gulbenkian Museum is the best museum in Lisbon, with paintings and tiles",
    ),
    ("travel-general", "museums in europe often offer reduced tickets"),
]


def _row(rid: str, ts: str, session: str | None, query: str, docs, answer: str) -> dict:
    row = {
        "id": rid,
        "ts": ts,
        "request": {"q": query, "filters": {"collection": COLLECTION}},
        "retrieval": {
            "hits": [
                {"_id": i, "_source": {"content": text}, "_score": 2.0 - r}
                for r, (i, text) in enumerate(docs)
            ]
        },
        "response": {"text": answer, "citations": [docs[0][0]]},
        "feedback": {"thumb": "up"},
    }
    if session is not None:
        row["session_id"] = session
    return row


def request_id(chat: Chat, n: int) -> str:
    """The request id of ``chat``'s turn ``n``."""
    return f"{chat.session}-t{n}"


def chat_rows(day: str) -> list[dict]:
    """``day``'s requests, newest first (not the order of their times)."""
    rows = []
    for chat in CHATS:
        for n, ts in enumerate(chat.times, start=1):
            if ts.startswith(day):
                query, docs, answer = chat.turn(n)
                rows.append(_row(request_id(chat, n), ts, chat.session, query, docs, answer))
    for i, (ts, query) in enumerate(STANDALONE):
        if ts.startswith(day):
            rows.append(_row(f"alone-{i}", ts, None, query, _LISBON, "See the Gulbenkian [1]."))
    return sorted(rows, key=lambda r: r["ts"], reverse=True)


def write_chat_logs(folder: Path, days: tuple[str, ...] = (EVE, FIRST_DAY, DAY)) -> None:
    """Each of ``days``' request logs under ``folder/logs/<day>/``."""
    for day in days:
        dt.date.fromisoformat(day)
        target = folder / "logs" / day
        target.mkdir(parents=True, exist_ok=True)
        lines = "\n".join(json.dumps(r) for r in chat_rows(day))
        (target / "part-0.jsonl").write_text(lines + "\n", encoding="utf-8")


def chat_yaml(tmp: Path, **audit: Any) -> Path:
    """An audit of the chats that grades every request (a census), without probe or check."""
    options: dict[str, Any] = {
        "name": "travel-chat",
        "segment": None,
        "sample": 500,
        "k": 2,
        "probe": 0,
        "judge_check_days": 0,
    }
    return audit_yaml(tmp, **{**options, **audit})
