"""Helpers shared by the benchmarks: a scratch folder and a compact table printer."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("RAGAUDIT_HOME", str(REPO / "data" / "bench-home"))


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
