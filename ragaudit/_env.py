"""Process environment the stack needs to run offline, set before any heavy import.

Every value here is a measured fix: each stops a library from calling the
network (analytics, price lists, tokenizer and model downloads) or raises a timeout that is
too tight on a 2-core machine. A value the user has already set is never overridden.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any


def _litellm_tokenizer_dir() -> str | None:
    """Return litellm's bundled tiktoken encodings folder without importing litellm."""
    import importlib.util

    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    return str(path) if path.is_dir() else None


def project_home() -> Path:
    """Folder for ragaudit's own state (Prefect home, caches): ``$RAGAUDIT_HOME`` or ``./data``."""
    return Path(os.environ.get("RAGAUDIT_HOME", "data")).resolve()


_PREFECT_HOME_OURS = False
"""Whether ``PREFECT_HOME`` is this module's default (neither it nor ``RAGAUDIT_HOME`` given)."""


def follow_runs_root(runs_root: Path) -> None:
    """Keep Prefect's database beside the runs root: ``<runs_root>/../prefect``.

    Only where neither ``PREFECT_HOME`` nor ``RAGAUDIT_HOME`` was given, and only before Prefect
    is imported (it reads its settings once, at import). The default runs root, ``data/runs``,
    keeps ``data/prefect``; without this a run under ``--runs-root /srv/evals/runs`` put its
    flow-run database in ``./data/prefect`` of whatever folder the command ran from.
    """
    import sys

    global _PREFECT_HOME_OURS
    if not _PREFECT_HOME_OURS or "prefect" in sys.modules:
        return
    home = Path(runs_root).expanduser().resolve().parent / "prefect"
    home.mkdir(parents=True, exist_ok=True)
    os.environ["PREFECT_HOME"] = str(home)


def apply_defaults() -> None:
    """Set the offline environment, leaving any variable the user set untouched."""
    global _PREFECT_HOME_OURS
    _PREFECT_HOME_OURS = "PREFECT_HOME" not in os.environ and "RAGAUDIT_HOME" not in os.environ
    defaults = {
        # ragas posts analytics on every LLM call, blocking the event loop for up to 1 s.
        "RAGAS_DO_NOT_TRACK": "true",
        # litellm fetches a model price list at import unless told to use its bundled copy.
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_LOG": "ERROR",
        # Hugging Face look-ups (token counters, sentence-transformers) retry the hub for many
        # seconds before giving up offline.
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "TOKENIZERS_PARALLELISM": "false",
        # Model loading draws tqdm bars into the CLI's own progress display.
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "TRANSFORMERS_VERBOSITY": "error",
        "TQDM_DISABLE": "1",
        # Prefect: no telemetry, a startup timeout that survives a loaded 2-core machine.
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        "PREFECT_HOME": str(project_home() / "prefect"),
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_UI_ENABLED": "false",
    }
    tokenizers = _litellm_tokenizer_dir()
    if tokenizers:
        # tiktoken downloads encodings on first use; litellm ships the ones we need.
        defaults["TIKTOKEN_CACHE_DIR"] = tokenizers
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    # Prefect creates its home without parents and then cannot open its database.
    Path(os.environ["PREFECT_HOME"]).expanduser().mkdir(parents=True, exist_ok=True)


# The GIL switch interval under load. litellm hands every call to a worker thread and back
# before the provider is even asked, all inside the gateway's concurrency limit; at Python's
# default 5 ms, a thread waiting for the GIL behind the event loop holds the call slot longer,
# and a shorter interval brings a scoring run's wall time closer to its ideal
# (bench/bench_score.py prints the ratio).
SWITCH_INTERVAL_S = 0.001
_tuned = False


def tune_for_concurrency() -> None:
    """Tune the process once for thousands of concurrent judge calls (process-wide, kept).

    Freezes what the imports made (litellm, ragas, pydantic: ~560k objects) out of the garbage
    collector: each full collection walked them all and stalled every call in flight. Frozen
    objects are still freed by reference counting; only cycles among them stay.
    And shortens the GIL switch interval (see ``SWITCH_INTERVAL_S``).
    """
    global _tuned
    if _tuned:
        return
    import gc
    import sys

    gc.freeze()
    sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
    _tuned = True


class _CurrentStderr:
    """A stream that is whatever ``sys.stderr`` is at the moment it is used.

    Closing it closes nothing: the stream behind it is the process's, not the handler's.
    """

    def __getattr__(self, name: str) -> Any:
        import sys

        return getattr(sys.stderr, name)

    def close(self) -> None:
        """Nothing to close."""


def log_to_current_stderr(*handlers: logging.Handler) -> None:
    """Point stream handlers a library built at import at the current ``sys.stderr``.

    litellm's loggers and absl's (rouge-score's) build their handlers at import, each holding
    the ``sys.stderr`` of that moment. Imported while something had replaced it (a test's
    capture, a CLI runner's buffer), they later wrote to a closed file, and the interpreter
    lost its own stderr ("lost sys.stderr") and the session with it.
    """
    for handler in handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(
            handler.stream, _CurrentStderr
        ):
            handler.setStream(_CurrentStderr())
