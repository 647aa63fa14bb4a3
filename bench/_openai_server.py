"""A tiny OpenAI-compatible server for benchmarks: chat completions and embeddings on loopback.

Run as its own process, so a benchmark can measure its client's CPU per call without the
answering side's work in the same process. Every chat answer is what the scripted ``fake``
provider would say (a schema-valid JSON instance when the request carries a schema, in
``response_format`` or in instructor's system message), after a fixed latency.

    python bench/_openai_server.py --port 0 --latency 0.05
    (prints ``PORT <n>`` once listening; ``GET /stats`` gives the calls answered)
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import time
import uuid

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ragaudit.cache._fake import (
    FAKE,
    FakeOptions,
    FakeRequest,
    _fake_vector,
    _schema_from_instructor,
)

STATS = {"chat": 0, "embeddings": 0}


def build(latency: float) -> Starlette:
    """The app answering after ``latency`` seconds."""

    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        STATS["chat"] += 1
        messages = body.get("messages", [])
        fmt = body.get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema") if isinstance(fmt, dict) else None
        if schema is None:
            system = next((m.get("content", "") for m in messages if m["role"] == "system"), "")
            schema = _schema_from_instructor(system if isinstance(system, str) else "")
        text = FAKE.answer(FakeRequest(body["model"], messages, schema, {}, FakeOptions()))
        await asyncio.sleep(latency)
        return JSONResponse(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": text},
                    }
                ],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            }
        )

    async def embeddings(request: Request) -> JSONResponse:
        body = await request.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        STATS["embeddings"] += 1
        await asyncio.sleep(latency)
        return JSONResponse(
            {
                "object": "list",
                "model": body["model"],
                "data": [
                    {"object": "embedding", "index": i, "embedding": _fake_vector(str(t))}
                    for i, t in enumerate(texts)
                ],
                "usage": {"prompt_tokens": 10, "total_tokens": 10},
            }
        )

    async def stats(request: Request) -> JSONResponse:
        return JSONResponse(STATS)

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/stats", stats, methods=["GET"]),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        build(args.latency), log_level="warning", access_log=False, backlog=2048
    )
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
