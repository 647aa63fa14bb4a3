"""Helpers shared by the benchmarks: the offline environment, a scratch folder, a table printer.

Import this module before anything else that is heavy: ``import ragaudit`` sets the offline
environment (no price-list fetch, no analytics, no hub look-ups) that litellm, ragas and
prefect read once, at their own import. A bench that imported one of them first would touch
the network and time it; that is refused here rather than measured.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("RAGAUDIT_HOME", str(REPO / "data" / "bench-home"))

_EARLY = sorted(m for m in ("litellm", "ragas", "prefect") if m in sys.modules)
if _EARLY and "ragaudit" not in sys.modules:
    raise RuntimeError(
        f"bench imported {', '.join(_EARLY)} before ragaudit's offline environment: "
        "import _util (or ragaudit) first"
    )

import ragaudit  # noqa: E402,F401  (the offline environment, before any heavy import)


def load_average() -> str:
    """The 1, 5 and 15-minute load averages, as printed beside every timed figure."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def scratch(name: str) -> Path:
    """A fresh temporary folder for one benchmark."""
    return Path(tempfile.mkdtemp(prefix=f"ragaudit-bench-{name}-"))


def table(rows: list[tuple], headers: tuple[str, ...]) -> str:
    """Rows as an aligned text table."""
    cells = [tuple(str(c) for c in headers)] + [tuple(str(c) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
