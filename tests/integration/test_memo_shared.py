"""The LLM memo shared by workers: one diskcache folder used by several processes at once, and
a real Redis (started on loopback by the ``redis_server`` fixture) behind the memo protocol."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from support.redis_server import free_port
from support.runs import REPO, make_config
from typer.testing import CliRunner

from ragaudit.cache import (
    DiskMemo,
    Gateway,
    Memo,
    RedisMemo,
    RedisTarget,
    live_gateways,
    memo_identity,
    open_gateway,
    open_memo,
    safe_url,
)
from ragaudit.cache._memo import DEFAULT_SIZE_LIMIT
from ragaudit.cli import app
from ragaudit.config import load_config
from ragaudit.errors import ConfigError
from ragaudit.tasks._common import hold_gateway, memo_location

PASSWORD = "s3cret-redis-pw-7731"


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), **extra}


def _start(script: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        env=env or _env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, errs = proc.communicate(timeout=180)
    assert proc.returncode == 0, errs[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _release(go: Path, procs: list[subprocess.Popen[str]], ready: list[Path]) -> None:
    """Let the processes race from the same moment: each waits for ``go`` after its imports."""
    deadline = time.monotonic() + 120
    while not all(r.exists() for r in ready):
        assert all(p.poll() is None for p in procs), [p.communicate()[1][-2000:] for p in procs]
        assert time.monotonic() < deadline, "workers never got ready"
        time.sleep(0.05)
    go.touch()


# -- diskcache: one folder, several processes -------------------------------------------------


# DiskMemo is a thin wrapper over diskcache.Cache: the writers open the folder the same way
# but import only diskcache, so that they start in milliseconds (importing ragaudit.cache
# pulls in litellm) and nothing is forked from this threaded test process.
_DISK_WRITER = """
import json, random, sys, time
from pathlib import Path
import diskcache

folder, writer, ready, go = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
memo = diskcache.Cache(folder, size_limit=int(sys.argv[5]))
ready.touch()
while not go.exists():
    time.sleep(0.002)
rng = random.Random(writer)
reads = torn = 0
for _ in range(600):
    i = rng.randrange(40)  # both writers hit the same 40 keys
    memo.set(f"k{i}", {"i": i, "writer": writer, "vec": [float(i) / 7.0] * 256})
    j = rng.randrange(40)
    got = memo.get(f"k{j}")
    if got is not None:
        reads += 1
        whole = got["i"] == j and got["vec"] == [float(j) / 7.0] * 256
        torn += not (whole and got["writer"] in (0, 1))
memo.close()
print(json.dumps({"reads": reads, "torn": torn}))
"""


def test_two_processes_write_and_read_one_diskcache_folder_at_once(tmp_path: Path) -> None:
    """diskcache's SQLite index takes concurrent writers and readers of the same keys."""
    folder, go = tmp_path / "memo", tmp_path / "go"
    ready = [tmp_path / f"ready{w}" for w in (0, 1)]
    procs = [
        _start(_DISK_WRITER, str(folder), str(w), str(ready[w]), str(go), str(DEFAULT_SIZE_LIMIT))
        for w in (0, 1)
    ]
    _release(go, procs, ready)  # both start writing at the same moment
    results = [_finish(p) for p in procs]
    assert all(r["torn"] == 0 for r in results), results  # every value read was whole
    assert all(r["reads"] > 0 for r in results)
    memo = DiskMemo(folder)
    assert len(memo) == 40
    assert all(memo.get(f"k{i}")["i"] == i for i in range(40))
    memo.close()


_GATEWAY_WORKER = """
import asyncio, hashlib, json, sys, time
from pathlib import Path
import ragaudit
from ragaudit.cache._fake import FAKE
from ragaudit.config import load_config
from ragaudit.tasks._common import hold_gateway

overrides, n, calls_dir = json.loads(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
ready, go = sys.argv[4], sys.argv[5]
config = load_config(None, overrides, environ={})

async def work(gateway):
    with gateway.scope("score", run_id="shared", calls_dir=calls_dir) as counts:
        answers = []
        for i in range(n):
            response = await gateway.acompletion(model="fake/judge", messages=[
                {"role": "user", "content": f"shared question {i}"}])
            answers.append(response.choices[0].message.content)
        vectors = await gateway.aembed([f"shared text {i}" for i in range(n)], model="fake/embed")
    return answers, vectors, counts

with hold_gateway(config) as gateway:
    if ready:
        Path(ready).touch()
        while not Path(go).exists():
            time.sleep(0.01)
    answers, vectors, counts = asyncio.run(work(gateway))
    stats = gateway.stats()
digest = hashlib.sha256(json.dumps(vectors).encode()).hexdigest()
print(json.dumps({"completions": FAKE.stats.calls, "embedded": FAKE.stats.embeddings,
                  "provider_calls": counts.provider_calls, "hits": counts.cache_hits,
                  "calls": counts.calls, "answers": answers, "vectors": digest, "stats": stats}))
"""


def _worker(
    overrides: dict[str, Any],
    n: int,
    calls_dir: Path,
    ready: Path | None = None,
    go: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[str]:
    return _start(
        _GATEWAY_WORKER,
        json.dumps(overrides),
        str(n),
        str(calls_dir),
        str(ready or ""),
        str(go or ""),
        env=env,
    )


async def _ask(gateway: Gateway, n: int) -> list[str]:
    """What a worker asks: n prompts, then n texts to embed (as ``_GATEWAY_WORKER``)."""
    answers = []
    for i in range(n):
        response = await gateway.acompletion(
            model="fake/judge", messages=user(f"shared question {i}")
        )
        answers.append(response.choices[0].message.content)
    await gateway.aembed([f"shared text {i}" for i in range(n)], model="fake/embed")
    gateway.close()
    return answers


def test_two_processes_share_one_disk_memo_through_their_gateways(
    tmp_path: Path, fake: Any
) -> None:
    """Two workers on one machine (another process and this one) race on the same 15 prompts
    and 15 texts; a third afterwards pays for nothing."""
    n, go, ready = 15, tmp_path / "go", tmp_path / "ready"
    proc = _worker({"cache_dir": str(tmp_path / "memo")}, n, tmp_path / "calls", ready, go)
    _release(go, [proc], [ready])
    mine = asyncio.run(_ask(Gateway(tmp_path / "memo", backoff_s=0.0), n))
    other = _finish(proc)
    assert other["answers"] == mine
    # A prompt is paid once or, when both asked it before either stored it, twice: never more.
    assert n <= other["completions"] + fake.stats.calls <= 2 * n
    assert n <= other["embedded"] + fake.stats.embeddings <= 2 * n
    memo = DiskMemo(tmp_path / "memo")
    assert len(memo) == 2 * n  # 15 answers and 15 vectors, each stored once
    memo.close()
    fake.reset()
    asyncio.run(_ask(Gateway(tmp_path / "memo", backoff_s=0.0), n))
    assert (fake.stats.calls, fake.stats.embeddings) == (0, 0)


# -- Redis -----------------------------------------------------------------------------------


@pytest.fixture
def redis_url(redis_server: str) -> str:
    """The session server, emptied for this test."""
    client = redis.Redis.from_url(redis_server)
    client.flushdb()
    client.close()
    return redis_server


@pytest.fixture
def password_url(redis_url: str) -> str:
    """The same server through an ACL user with a password: ``redis://memo:<pw>@…``."""
    client = redis.Redis.from_url(redis_url)
    client.acl_setuser(
        "memo", enabled=True, passwords=[f"+{PASSWORD}"], keys=["*"], commands=["+@all"]
    )
    client.close()
    return redis_url.replace("redis://", f"redis://memo:{PASSWORD}@")


async def test_redis_memo_round_trips_a_completion_and_an_embedding(
    redis_url: str, fake: Any
) -> None:
    target = RedisTarget(redis_url, prefix="t:memo", ttl_s=3600)
    gateway = Gateway(target, backoff_s=0.0)
    assert isinstance(gateway.memo, RedisMemo) and isinstance(gateway.memo, Memo)
    first = await gateway.acompletion(model="fake/judge", messages=user("what is redis?"))
    vectors = await gateway.aembed(["alpha beta", "gamma delta"], model="fake/embed")
    assert (fake.stats.calls, fake.stats.embeddings) == (1, 2)
    # A second gateway on the same server: everything is a hit, and equal to what was paid for.
    gateway.close()
    other = Gateway(RedisTarget(redis_url, prefix="t:memo"), backoff_s=0.0)
    again = await other.acompletion(model="fake/judge", messages=user("what is redis?"))
    assert await other.aembed(["gamma delta", "alpha beta"], model="fake/embed") == vectors[::-1]
    assert (fake.stats.calls, fake.stats.embeddings) == (1, 2)
    assert again.model_dump(mode="json") == first.model_dump(mode="json")
    assert [r.cache_hit for r in other.log.rows()] == [True, True]
    stats = other.stats()
    assert stats["entries"] == 3 and stats["bytes"] > 0
    assert stats["path"] == f"{redis_url} t:memo"
    # Entries carry the key version under the prefix, and the TTL that was asked for.
    client = redis.Redis.from_url(redis_url)
    names = sorted(n.decode() for n in client.keys("*"))
    assert len(names) == 3 and all(n.startswith("t:memo:k1:") for n in names)
    assert all(0 < client.ttl(n) <= 3600 for n in names)
    # Values are exact, whatever numeric types a provider hands back.
    other.memo.set("k1:np", {"v": np.array([0.1, 1 / 3], dtype=np.float64), "f": np.float32(0.5)})
    assert other.memo.get("k1:np") == {"v": [0.1, 1 / 3], "f": 0.5}
    client.set("someone-else:key", b"1")
    # clear deletes the memo's keys only; close lets a later call connect again.
    assert other.memo.clear() == 4  # type: ignore[attr-defined]
    other.close()
    assert other.stats()["entries"] == 0
    assert client.get("someone-else:key") == b"1"
    client.close()


def test_gateways_are_keyed_by_memo_identity(redis_url: str, password_url: str) -> None:
    """One gateway per memo: the same Redis and prefix with or without a password is one."""
    with open_gateway(RedisTarget(password_url)) as first:
        with open_gateway(RedisTarget(password_url.replace(PASSWORD, "other-pw"))) as same:
            assert same is first
        with open_gateway(RedisTarget(password_url, prefix="other")) as other:
            assert other is not first
        keys = list(live_gateways())
        assert f"{safe_url(password_url)} ragaudit:memo" in keys
        assert not any(PASSWORD in k for k in keys)
    assert memo_identity(RedisTarget(password_url)).startswith("redis://memo@127.0.0.1:")


def test_a_second_process_pays_nothing_through_redis(
    tmp_path: Path, password_url: str, fake: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two worker processes, one Redis: the second makes 0 provider calls."""
    n = 12
    env = _env(MEMO_REDIS_URL=password_url)
    overrides = {
        "cache_dir": str(tmp_path / "unused"),
        "cache": {"backend": "redis", "redis_url_env": "MEMO_REDIS_URL"},
    }
    # The first worker is this process, through the config's gateway...
    monkeypatch.setenv("MEMO_REDIS_URL", password_url)
    with hold_gateway(load_config(None, overrides, environ={})) as gateway:
        answers = asyncio.run(_ask(gateway, n))
    assert (fake.stats.calls, fake.stats.embeddings) == (n, n)
    # ... the second another process: it pays for nothing.
    second = _finish(_worker(overrides, n, tmp_path / "calls", env=env))
    assert second["completions"] == second["embedded"] == second["provider_calls"] == 0
    assert second["hits"] == second["calls"] == n + 1
    assert second["answers"] == answers
    assert second["stats"]["entries"] == 2 * n
    assert not (tmp_path / "unused").exists()  # no diskcache was opened


def test_the_redis_password_is_never_shown(
    tmp_path: Path, password_url: str, fake: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMO_REDIS_URL", password_url)
    config = make_config(tmp_path, cache__backend="redis", cache__redis_url_env="MEMO_REDIS_URL")
    assert PASSWORD not in config.model_dump_json()  # the config holds only the variable name
    calls_dir = tmp_path / "runs" / "r" / "llm_calls"
    with hold_gateway(config) as gateway:
        with gateway.scope("score", run_id="r", calls_dir=calls_dir):
            asyncio.run(gateway.acompletion(model="fake/judge", messages=user("q")))
        stats = gateway.stats()
        assert PASSWORD not in repr(gateway.memo.__dict__) and PASSWORD not in repr(stats)
    assert stats["entries"] == 1
    for part in calls_dir.glob("*.parquet"):
        assert PASSWORD.encode() not in part.read_bytes()
    assert PASSWORD not in repr(memo_location(config))  # the target hides its URL

    # The CLI's stats and clear name the memo without the password.
    path = tmp_path / "config.yaml"
    path.write_text(
        json.dumps(
            {
                "cache_dir": str(tmp_path / "unused"),
                "runs_root": str(tmp_path / "runs"),
                "cache": {"backend": "redis", "redis_url_env": "MEMO_REDIS_URL"},
            }
        )
    )
    runner = CliRunner()
    shown = runner.invoke(app, ["cache", "stats", "--config", str(path)], env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    assert "1 entries" in shown.output and "redis://memo@127.0.0.1" in shown.output
    cleared = runner.invoke(app, ["cache", "clear", "--config", str(path), "--yes"])
    assert cleared.exit_code == 0 and "1 entries" in cleared.output
    assert PASSWORD not in shown.output + cleared.output

    # A refused password: the error names the field and the server, never the password.
    wrong = password_url.replace(PASSWORD, PASSWORD[:-1] + "X")
    monkeypatch.setenv("MEMO_REDIS_URL", wrong)
    with pytest.raises(ConfigError) as refused:
        open_memo(memo_location(config))
    message = str(refused.value)
    assert message.startswith("cache.redis_url_env (MEMO_REDIS_URL): cannot reach Redis")
    assert "AuthenticationError" in message
    assert PASSWORD not in message and PASSWORD[:-1] not in message


def test_an_unreachable_redis_is_one_clear_error(tmp_path: Path) -> None:
    port = free_port()  # nobody listens there
    url = f"redis://127.0.0.1:{port}/0"
    config = make_config(tmp_path, cache__backend="redis", cache__redis_url=url)
    # No wall-clock bound here: that it fails at once rather than retrying is the client's
    # one connection attempt, and a hang would stop the suite, not pass it. How fast the CLI
    # refuses it is measured in bench/bench_stop.py.
    with pytest.raises(ConfigError) as failed, hold_gateway(config):
        pass
    message = str(failed.value)
    assert message.startswith(f"cache.redis_url: cannot reach Redis at {url} (ConnectionError")
    assert "\n" not in message

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"cache": {"backend": "redis", "redis_url": url}}))
    shown = CliRunner().invoke(app, ["cache", "stats", "--config", str(path)])
    assert shown.exit_code == 2
    assert "cache.redis_url: cannot reach Redis" in shown.output
    assert "Traceback" not in shown.output


def test_redis_config_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cache: .*needs cache.redis_url or cache.redis_url_env"):
        make_config(tmp_path, cache__backend="redis")
    with pytest.raises(ConfigError, match="cache.redis_url: .*must not hold a password") as held:
        make_config(tmp_path, cache__redis_url=f"redis://:{PASSWORD}@127.0.0.1:6379/0")
    assert PASSWORD not in str(held.value)
    with pytest.raises(ConfigError, match="must not hold a password"):
        make_config(tmp_path, cache__redis_url=f"redis://127.0.0.1/0?password={PASSWORD}")
    with pytest.raises(ConfigError, match="cache.redis_url: .*redis://"):
        make_config(tmp_path, cache__redis_url="http://127.0.0.1:6379")
    # The environment override reaches the section like any other field.
    cfg = load_config(
        None,
        environ={
            "RAGAUDIT_CACHE__BACKEND": "redis",
            "RAGAUDIT_CACHE__REDIS_URL": "redis://127.0.0.1:6379/2",
        },
    )
    assert cfg.cache.backend == "redis" and cfg.cache.redis_url == "redis://127.0.0.1:6379/2"
    # Where the memo lives changes no answer: no stage's cache key depends on it.
    from ragaudit.flows.evaluate import STAGES, stage_key

    default = load_config(None, environ={})
    assert all(stage_key(cfg, s) == stage_key(default, s) for s in STAGES)
    assert safe_url(f"rediss://u:{PASSWORD}@h:1/0?password={PASSWORD}&ssl_cert_reqs=none") == (
        "rediss://u@h:1/0?ssl_cert_reqs=none"
    )
