"""The viewer's path parameters: a run id names a folder directly under the runs root."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi import HTTPException

# A run id is a folder name: letters, digits, dot, dash, underscore; no separator, no leading
# dot (so neither ``..`` nor a hidden folder), bounded so a URL cannot hold a runaway name.
_RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")


def run_path(runs_root: Path, run_id: str) -> Path:
    """The folder of ``run_id`` under ``runs_root``, or a 404 for anything that could leave it.

    Args:
        runs_root: The root the viewer serves.
        run_id: The run id taken from the URL.

    Returns:
        The resolved run folder (it exists and is a directory).

    Raises:
        HTTPException: 404 when the id is not a plain folder name, resolves outside the root
            (a symlink out of it) or names no folder.
    """
    if not _RUN_ID.fullmatch(run_id):
        raise HTTPException(status_code=404, detail="no such run")
    root = runs_root.resolve()
    path = (root / run_id).resolve()
    if path.parent != root or not path.is_dir():
        raise HTTPException(status_code=404, detail="no such run")
    return path
