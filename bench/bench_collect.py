"""Collecting 200 candidates for each of 100 questions from OpenSearch, side by side in one run.

The engine is osmem-server (OpenSearch-compatible, in memory, on loopback), seeded with
``ragaudit index`` (2,500 documents in 10 collections of 250). Compared, in alternating
order over several rounds (median reported):

- a hand-written script: a plain sequential loop of single ``search`` calls with the sync
  opensearch-py client, the default bool query, ``size=200``;
- ragaudit's ``opensearch`` backend, one question at a time (its own overhead);
- ragaudit's ``opensearch`` backend as collect runs it: async client, 8 searches in flight;
- the same with ``page_size=50`` (four scroll pages per question: the cost of paging).

Each is run twice: straight to the engine on loopback, where the engine's own CPU is all
there is to wait for (and it shares the machine's 2 cores with the client), and through a
loopback proxy that holds every request for 20 ms, as a cluster across a network does (a
production engine is remote). Every variant must return the same candidates as the plain loop,
which is checked.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import threading
import time

from _util import scratch, table
from osmem_server import OsmemServer
from support.servers import ragaudit

import ragaudit as _ragaudit  # noqa: F401  (offline environment)
from ragaudit.search import make_backend

COLLECTIONS = 10
DOCS_PER_COLLECTION = 250
QUESTIONS = 100
TOP_N = 200
ROUNDS = 5
LATENCY_S = 0.020
WORDS = [
    "refund",
    "shipping",
    "warranty",
    "invoice",
    "delivery",
    "account",
    "password",
    "discount",
    "contract",
    "support",
    "battery",
    "screen",
    "order",
    "payment",
    "return",
    "upgrade",
]


def corpus(path):
    rows = []
    for c in range(COLLECTIONS):
        for i in range(DOCS_PER_COLLECTION):
            words = " ".join(WORDS[(i * k + c) % len(WORDS)] for k in range(1, 12))
            rows.append(
                {
                    "id": f"c{c}-{i}",
                    "text": f"note {i} of company {c}: {words}",
                    "metadata": {"collection": f"company-{c}"},
                }
            )
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    return path


def questions():
    return [
        (
            f"{WORDS[q % len(WORDS)]} {WORDS[(q * 7 + 3) % len(WORDS)]} policy",
            f"company-{q % COLLECTIONS}",
        )
        for q in range(QUESTIONS)
    ]


def seed_body(question, company):
    return {
        "query": {
            "bool": {
                "must": [{"match_phrase": {"metadata.collection": company}}],
                "should": [{"match": {"text": {"query": question, "boost": 8}}}],
            }
        }
    }


def plain_loop(url, qs):
    from opensearchpy import OpenSearch

    client = OpenSearch(hosts=[url])
    out = []
    for question, company in qs:
        resp = client.search(
            index="bench",
            body=seed_body(question, company),
            size=TOP_N,
            params={"_source_excludes": "*_embedding"},
        )
        out.append([h["_id"] for h in resp["hits"]["hits"]])
    client.close()
    return out


def ragaudit_run(url, qs, concurrency, page_size=1000):
    backend = make_backend(
        "opensearch",
        hosts=[url],
        index="bench",
        concurrency=concurrency,
        page_size=page_size,
        source_excludes=("*_embedding",),
    )

    async def go():
        try:
            results = await asyncio.gather(
                *(backend.search(q, filters={"collection": c}, top_n=TOP_N) for q, c in qs)
            )
        finally:
            await backend.aclose()
        return [[h.id for h in hits] for hits in results]

    return asyncio.run(go())


class DelayProxy:
    """A loopback TCP proxy that holds each request for ``delay`` seconds (a network hop)."""

    def __init__(self, target_port, delay):
        self.target_port, self.delay = target_port, delay
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        threading.Thread(target=self._run, args=(started,), daemon=True).start()
        started.wait()

    def _run(self, started):
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(
            asyncio.start_server(self._client, "127.0.0.1", 0)
        )
        self.port = self.server.sockets[0].getsockname()[1]
        started.set()
        self.loop.run_forever()

    async def _client(self, c_reader, c_writer):
        s_reader, s_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        idle = [True]  # a request starts when the client writes after the last answer

        async def upstream():
            while data := await c_reader.read(65536):
                if idle[0]:
                    idle[0] = False
                    await asyncio.sleep(self.delay)
                s_writer.write(data)
                await s_writer.drain()
            s_writer.close()

        async def downstream():
            while data := await s_reader.read(65536):
                idle[0] = True
                c_writer.write(data)
                await c_writer.drain()
            c_writer.close()

        await asyncio.gather(upstream(), downstream(), return_exceptions=True)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"


def measure(url, qs, expected):
    variants = {
        "plain sequential loop (seed script)": lambda: plain_loop(url, qs),
        "ragaudit opensearch, 1 in flight": lambda: ragaudit_run(url, qs, 1),
        "ragaudit opensearch, 8 in flight": lambda: ragaudit_run(url, qs, 8),
        "ragaudit opensearch, 8 in flight, 4 scroll pages": lambda: ragaudit_run(url, qs, 8, 50),
    }
    times = {name: [] for name in variants}
    for r in range(ROUNDS):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        for name in order:
            t = time.perf_counter()
            got = variants[name]()
            times[name].append(time.perf_counter() - t)
            assert got == expected, f"{name}: candidates differ from the plain loop"
    return {name: statistics.median(ts) for name, ts in times.items()}


def main():
    work = scratch("collect")
    qs = questions()
    with OsmemServer.start(addr="127.0.0.1:0") as server:
        ragaudit(
            "index",
            str(corpus(work / "corpus.jsonl")),
            "--backend",
            "opensearch",
            "--index",
            "bench",
            "--set",
            f"collect.opensearch.hosts=[{server.url}]",
        )
        expected = plain_loop(server.url, qs)  # also warms the engine and the imports
        assert all(len(ids) == TOP_N for ids in expected), "every question must have 200 candidates"
        proxy = DelayProxy(int(server.url.rsplit(":", 1)[1]), LATENCY_S)
        results = {
            "loopback": measure(server.url, qs, expected),
            f"+{LATENCY_S * 1e3:.0f} ms per request": measure(proxy.url, qs, expected),
        }
    rows = []
    for where, medians in results.items():
        base = medians["plain sequential loop (seed script)"]
        for name, med in medians.items():
            rows.append(
                (where, name, f"{med:.2f}", f"{med / QUESTIONS * 1e3:.1f}", f"{base / med:.2f}x")
            )
    print(
        f"Collect: {TOP_N} candidates x {QUESTIONS} questions from osmem-server "
        f"({COLLECTIONS * DOCS_PER_COLLECTION} docs), median of {ROUNDS} alternating rounds, "
        "same candidates in every variant"
    )
    print(table(rows, ("network", "variant", "seconds", "ms / question", "speed-up vs plain loop")))


if __name__ == "__main__":
    main()
