"""A re-score from the memo reads valid structured answers without a litellm response, unchanged."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ragaudit.cache import Gateway
from ragaudit.metrics import METRICS, Deps, Sample
from ragaudit.tasks.score import score_rows

METRIC_NAMES = (
    "faithfulness",
    "answer_relevancy",
    "context_precision",
    "context_recall",
    "factual_correctness",
    "noise_sensitivity",
)


def samples() -> list[Sample]:
    out = []
    for n in range(4):
        zh = n % 2 == 1
        out.append(
            Sample(
                f"q{n}",
                f"第{n}个问题：北京是哪个国家的首都？"
                if zh
                else f"Question {n}: capital of France?",
                "zh" if zh else "en",
                f"北京是中国的首都（{n}）。" if zh else f"Paris is the capital of France ({n}).",
                f"北京是中华人民共和国的首都（{n}）。" if zh else f"The capital is Paris ({n}).",
                [
                    f"北京是首都。第{i}段。" if zh else f"Paris is the capital. Part {i}."
                    for i in range(2)
                ],
                ["c0", "c1"],
                None,
                None,
            )
        )
    return out


async def score_all(memo: Path, judge: str) -> tuple[list[dict[str, Any]], list[Any]]:
    gateway = Gateway(memo, concurrency=8, backoff_s=0.0)
    deps = Deps.of(
        gateway=gateway,
        judge=judge,
        embedder="fake/embed",
        options={"answer_relevancy_strictness": 3},
    )
    rows = []
    for name in METRIC_NAMES:
        rows += await score_rows(METRICS[name], samples(), deps, window=32_000, limit=8)
    gateway.close()
    return rows, [c for c in gateway.log.rows() if c.kind == "completion"]


def settled(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with the judge steps and replies of each in a fixed order.

    A row's concurrent judge calls (one per context, say) enter its trace as they finish: in
    any order on a first run, in the order asked when every answer comes from the memo.
    """

    def ordered(items: list[Any]) -> list[Any]:
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True, ensure_ascii=False))

    out = []
    for row in rows:
        reason = json.loads(row["reason"]) if row.get("reason") else None
        if isinstance(reason, dict):
            reason = {k: ordered(v) if isinstance(v, list) else v for k, v in reason.items()}
        out.append({**row, "reason": reason})
    return out


@pytest.mark.parametrize(
    "judge", ["fake/judge", "fake/judge?malformed=0.3&seed=3"], ids=["clean", "malformed"]
)
async def test_rescore_from_the_memo_builds_no_response_and_changes_nothing(
    fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, judge: str
) -> None:
    first, first_calls = await score_all(tmp_path / "memo", judge)
    assert fake.stats.calls > 0
    if "malformed" in judge:
        assert fake.stats.malformed > 0  # some replies were cut off and repaired
    asked = fake.stats.calls

    through_responses: list[Any] = []
    original = Gateway._complete  # where a response is built, from the memo or the provider

    async def counted(self: Gateway, found: Any) -> Any:
        through_responses.append(found.key)
        return await original(self, found)

    monkeypatch.setattr(Gateway, "_complete", counted)
    again, again_calls = await score_all(tmp_path / "memo", judge)

    assert fake.stats.calls == asked  # nothing new reached the provider
    # Statuses, values, errors, reasons (every judge step and reply), k and args.
    assert settled(again) == settled(first)
    # One call-log row per call as before, every one a memo hit with the same key; but answer
    # relevancy's samples, asked as one request with three choices, are read one by one.
    first_keys = Counter(c.key_hash for c in first_calls)
    again_keys = Counter(c.key_hash for c in again_calls)
    together = first_keys - again_keys
    assert sum(together.values()) == len(samples())  # one request per row for its samples
    assert first_keys - together <= again_keys
    assert (again_keys - first_keys).total() == 3 * together.total()
    assert all(c.cache_hit for c in again_calls)
    if "malformed" in judge:
        # A stored reply that does not parse is read as a response and repaired, as the first
        # time (from the memo).
        assert 0 < len(through_responses) < len(again_calls)
    else:
        assert through_responses == []  # every answer was read from the memo directly


async def test_a_memo_miss_or_a_rejected_reply_records_nothing(fake, tmp_path: Path) -> None:
    # The fast path peeks at the memo: only an answer ``parse`` accepts is recorded.
    gateway = Gateway(tmp_path / "memo", backoff_s=0.0)
    ask = {"model": "fake/judge", "messages": [{"role": "user", "content": "x"}]}
    parse_calls = []
    assert gateway.memo_hit(parse_calls.append, **ask) is None  # a miss: parse never called
    await gateway.acompletion(**ask)

    def rejected(stored: dict[str, Any]) -> Any:
        raise ValueError("not the schema")

    assert gateway.memo_hit(rejected, **ask) is None
    hit = gateway.memo_hit(lambda stored: stored["choices"][0]["message"]["content"], **ask)
    assert hit is not None and hit.startswith("Fake answer")
    gateway.close()
    assert parse_calls == []
    assert [r.cache_hit for r in gateway.log.rows()] == [False, True]
