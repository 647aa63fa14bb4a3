"""Shared fixtures: one Prefect test harness per session, the fake provider, small configs."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Tests live in tests/unit and tests/integration; what they share is the package tests/support.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.paths import REPO_ROOT  # noqa: E402

os.environ.setdefault("RAGAUDIT_HOME", str(REPO_ROOT / "data" / "test-home"))
# The tests load the built-in units only, whatever plugins the environment has installed or
# a developer's shell allow-lists (ragaudit.registry).
os.environ.pop("RAGAUDIT_PLUGINS", None)

from support.runs import REPO, make_config  # noqa: E402

import ragaudit  # noqa: E402,F401  (offline environment first)
from ragaudit.cache import Gateway  # noqa: E402
from ragaudit.cache._fake import FAKE  # noqa: E402
from ragaudit.config import RunConfig  # noqa: E402


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
    from support.redis_server import redis_server as run

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


@pytest.fixture
def config_factory(tmp_path: Path):
    """``config_factory(judge=..., score__top_k=5)`` → RunConfig under tmp_path."""

    def factory(**kw: Any) -> RunConfig:
        return make_config(tmp_path, **kw)

    return factory


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    """A gateway on a fresh memo under tmp_path, 16 calls at once, no backoff."""
    gw = Gateway(tmp_path / "memo", concurrency=16, backoff_s=0.0, max_retries=1)
    yield gw
    gw.close()
