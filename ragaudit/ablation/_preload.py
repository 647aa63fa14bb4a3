"""Imported by the point workers' fork server (:mod:`ragaudit.ablation._workers`), once.

Importing this module does the work a point would otherwise pay for in every fresh worker:
the imports (litellm, ragas, prefect, lancedb, the stages and metrics), jieba's dictionary,
tiktoken's encodings, the stages' code digests (their cache keys parse every module they
import) and the package versions of the manifest. Every worker is a fork of the server after
this, so it starts with all of it in memory. Measured in a fresh process on a loaded machine:
the first point took 38 s (lancedb's import alone 9.7 s, the code digests 4 s), the next 2.9 s.

Nothing here opens a connection or runs an event loop. The imports start threads a fork does
not copy, each harmless in a worker: lancedb restarts its background loop after a fork, ragas's
analytics batcher is never fed with tracking off (``RAGAS_DO_NOT_TRACK``), and polars'
allocator (jemalloc) re-initialises itself in the child.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

import ragaudit  # noqa: F401  (the offline environment before any library import)
import ragaudit.flows.ablate  # noqa: F401
import ragaudit.flows.evaluate  # noqa: F401
import ragaudit.metrics  # noqa: F401
from ragaudit.cache import count_tokens
from ragaudit.flows._stages import STAGES, code_digest
from ragaudit.manifest import package_versions
from ragaudit.search._local import analyze

# lancedb restarts its background event loop in a forked child and warns that something might
# have been mid-operation at the fork: nothing is, the server forks from an idle state.
warnings.filterwarnings("ignore", message="lancedb fork support", category=RuntimeWarning)

import lancedb  # noqa: E402,F401  (lazily imported by the local backend: 2-10 s)


def _warm() -> None:
    import prefect.plugins
    import prefect.task_engine  # noqa: F401  (what a worker runs its task with)

    # A warm-up that fails only leaves its cost to each worker; the fork server must live.
    steps: list[tuple[Any, tuple[Any, ...]]] = [(analyze, ("预热",))]
    # cl100k_base (the fake and local models' counter) and o200k_base.
    steps += [(count_tokens, (model, "warm")) for model in ("fake/judge", "gpt-4o-mini")]
    steps += [(code_digest, (stage,)) for stage in STAGES]
    steps.append((package_versions, ()))
    # Prefect imports its installed collections (prefect-dask, prefect-ray: ~2 s) the first time
    # a worker rebuilds the flow run's context.
    steps.append((prefect.plugins.load_prefect_collections, ()))
    for fn, args in steps:
        with contextlib.suppress(Exception):
            fn(*args)


_warm()
