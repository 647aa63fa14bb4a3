"""The two memos side by side: diskcache (one machine) and Redis (many), per-hit and per-set cost.

A real ``redis-server`` on loopback (started here, nothing persisted) against a diskcache
folder, with the values the gateway stores: a completion (``ModelResponse.model_dump``) and a
384-float embedding. Then the same through the gateway (a memoised completion, an embedding
batch answered from the memo), and the serialisations considered for Redis values. Loopback
is the cheapest network Redis will ever have: across machines add the round trip.
"""

from __future__ import annotations

import asyncio
import pickle
import statistics
import time
from collections.abc import Callable
from typing import Any

import msgpack
import orjson
from _util import scratch, table

import ragaudit  # noqa: F401
from ragaudit.cache import DiskMemo, Gateway, Memo, RedisMemo, RedisTarget

N = 2000
DIM = 384


def per_op_ms(fn: Callable[[int], Any], n: int = N) -> float:
    """Median of 5 rounds of ``n`` calls, in ms per call."""
    rounds = []
    for _ in range(5):
        t = time.perf_counter()
        for i in range(n):
            fn(i)
        rounds.append((time.perf_counter() - t) / n)
    return statistics.median(rounds) * 1e3


async def completion_value() -> dict[str, Any]:
    gateway = Gateway(scratch("memo-value") / "cache", backoff_s=0.0)
    question = [{"role": "user", "content": "Is the claim supported by the context? " * 20}]
    response = await gateway.acompletion(model="fake/judge", messages=question)
    gateway.close()
    return response.model_dump(mode="json")


def memo_rows(memos: dict[str, Memo], values: dict[str, Any]) -> list[tuple]:
    rows = []
    for kind, value in values.items():
        cells = {}
        for name, memo in memos.items():
            keys = [f"k1:{kind}:{i}" for i in range(N)]
            set_ms = per_op_ms(lambda i, m=memo, k=keys, v=value: m.set(k[i], v))
            get_ms = per_op_ms(lambda i, m=memo, k=keys: m.get(k[i]))
            cells[name] = (set_ms, get_ms)
        (d_set, d_get), (r_set, r_get) = cells["disk"], cells["redis"]
        rows.append((f"{kind} set", f"{d_set:.3f}", f"{r_set:.3f}", f"{r_set / d_set:.1f}x"))
        rows.append((f"{kind} get (hit)", f"{d_get:.3f}", f"{r_get:.3f}", f"{r_get / d_get:.1f}x"))
    return rows


async def gateway_rows(url: str) -> list[tuple]:
    out: dict[str, tuple[float, float]] = {}
    questions = [[{"role": "user", "content": f"question {i}?"}] for i in range(300)]
    texts = [f"sentence number {i}" for i in range(300)]
    for name, location in (
        ("disk", scratch("memo-gw") / "cache"),
        ("redis", RedisTarget(url, prefix="bench:gw")),
    ):
        gateway = Gateway(location, backoff_s=0.0)
        for q in questions:
            await gateway.acompletion(model="fake/judge", messages=q)
        await gateway.aembed(texts, model="fake/embed")
        hits = []
        for q in questions:
            t = time.perf_counter()
            await gateway.acompletion(model="fake/judge", messages=q)
            hits.append(time.perf_counter() - t)
        t = time.perf_counter()
        await gateway.aembed(texts, model="fake/embed")
        per_text = (time.perf_counter() - t) / len(texts)
        out[name] = (statistics.median(hits) * 1e3, per_text * 1e3)
        gateway.close()
    (d_c, d_e), (r_c, r_e) = out["disk"], out["redis"]
    return [
        ("gateway completion hit", f"{d_c:.3f}", f"{r_c:.3f}", f"{r_c / d_c:.1f}x"),
        (
            "gateway embedding hit, per text (batch 300)",
            f"{d_e:.4f}",
            f"{r_e:.4f}",
            f"{r_e / d_e:.1f}x",
        ),
    ]


def codec_rows(values: dict[str, Any]) -> list[tuple]:
    codecs: dict[str, tuple[Callable[[Any], bytes], Callable[[bytes], Any]]] = {
        "msgpack (used)": (msgpack.packb, msgpack.unpackb),
        "orjson": (orjson.dumps, orjson.loads),
        "pickle (diskcache)": (
            lambda v: pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL),
            pickle.loads,
        ),
    }
    rows = []
    for kind, value in values.items():
        for name, (enc, dec) in codecs.items():
            blob = enc(value)
            assert dec(blob) == value
            ms = per_op_ms(lambda _i, e=enc, d=dec, v=value: d(e(v)), n=500)
            rows.append((kind, name, len(blob), f"{ms:.4f}"))
    return rows


def main() -> None:
    # The tests' runner: importable once _util has put tests/ on the path.
    from _redis_server import redis_server

    values = {
        "completion": asyncio.run(completion_value()),
        "embedding": [((i * 7919) % 1000) / 997.0 for i in range(DIM)],
    }
    folder = scratch("memo")
    with redis_server(folder) as url:
        memos: dict[str, Memo] = {
            "disk": DiskMemo(folder / "disk"),
            "redis": RedisMemo(url, prefix="bench"),
        }
        rows = memo_rows(memos, values)
        for memo in memos.values():
            memo.close()
        rows += asyncio.run(gateway_rows(url))
    print(f"Memo cost per operation (median ms, {N} keys x 5 rounds; Redis on loopback)")
    print(table(rows, ("operation", "DiskMemo ms", "RedisMemo ms", "redis / disk")))
    print()
    print("Serialisation of one value (encode + decode)")
    print(table(codec_rows(values), ("value", "codec", "bytes", "ms")))


if __name__ == "__main__":
    main()
