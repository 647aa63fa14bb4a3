"""Shared fixtures: one Prefect test harness per session, the fake provider, small configs."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault(
    "RAGAUDIT_HOME", str(Path(__file__).resolve().parent.parent / "data" / "test-home")
)

import ragaudit  # noqa: E402,F401  (offline environment first)
from ragaudit.cache._fake import FAKE  # noqa: E402
from ragaudit.config import RunConfig, load_config  # noqa: E402
from ragaudit.dataset import jsonl_lines  # noqa: E402
from ragaudit.runfolder import RunFolder  # noqa: E402
from ragaudit.schemas import CANDIDATES, QUESTIONS, to_table  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``real_llm`` tests unless ``RAGAUDIT_REAL_LLM=1``: they cost money and need keys."""
    if os.environ.get("RAGAUDIT_REAL_LLM") == "1":
        return
    skip = pytest.mark.skip(reason="calls a real LLM API; set RAGAUDIT_REAL_LLM=1 to run")
    for item in items:
        if "real_llm" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """One Prefect test harness for the whole session (it takes ~10 s to start)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``redis-server`` on loopback for the session (no persistence); yields its URL.

    Skips where the binary is missing (``make system-deps`` installs the Debian package).
    """
    from _redis_server import redis_server as run

    try:
        server = run(tmp_path_factory.mktemp("redis"))
        url = server.__enter__()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    try:
        yield url
    finally:
        server.__exit__(None, None, None)


@pytest.fixture
def fake() -> Iterator[Any]:
    """The fake provider, reset before and after the test, recording requests."""
    FAKE.reset(keep_requests=True)
    yield FAKE
    FAKE.reset()


@pytest.fixture
def demo_files(tmp_path: Path) -> dict[str, Path]:
    """Copies of the bundled demo questions and corpus."""
    out = {}
    for name in ("questions.jsonl", "corpus.jsonl"):
        target = tmp_path / name
        target.write_bytes((REPO / "data" / "demo" / name).read_bytes())
        out[name.split(".")[0]] = target
    return out


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


@pytest.fixture
def config_factory(tmp_path: Path):
    """``config_factory(judge=..., score__top_k=5)`` → RunConfig under tmp_path."""

    def factory(**kw: Any) -> RunConfig:
        return make_config(tmp_path, **kw)

    return factory


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
