"""The viewer's path parameters: a run id names a folder directly under the runs root.

A run id is whatever ``runlock.check_run_id`` accepts (``测试运行``, ``nightly 01``, ``a+b``),
so it is percent-encoded whole on the way out (:func:`run_url`) and decoded once on the way
in: the server decodes the path before routing (Starlette matches ``{run_id}`` against the
decoded path, whose ``[^/]+`` keeps an encoded ``/`` out of it), and :func:`run_path` takes
the decoded id as it is.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote, urlencode

from fastapi import HTTPException

from ragaudit.errors import ConfigError
from ragaudit.runlock import check_run_id


def run_path(runs_root: Path, run_id: str) -> Path:
    """The folder of ``run_id`` under ``runs_root``, or a 404 for anything that could leave it.

    Args:
        runs_root: The root the viewer serves.
        run_id: The run id taken from the URL (decoded once, by the server).

    Returns:
        The resolved run folder (it exists and is a directory).

    Raises:
        HTTPException: 404 when the id is not a run id (``check_run_id``: a path, ``..``, a
            hidden folder, control characters), resolves outside the root (a symlink out of
            it) or names no folder.
    """
    try:
        check_run_id(run_id)
    except ConfigError:
        raise HTTPException(status_code=404, detail="no such run") from None
    root = runs_root.resolve()
    path = (root / run_id).resolve()
    if path.parent != root or not path.is_dir():
        raise HTTPException(status_code=404, detail="no such run")
    return path


def run_url(run_id: str, *parts: str, **query: str) -> str:
    """The viewer's address of a run's page (``parts`` below it), every piece percent-encoded.

    ``run_url("nightly 01", "label", annotator="Ana Lee")`` is
    ``/runs/nightly%2001/label?annotator=Ana%20Lee``: encoded once, so the server's one decoding
    gives back the id and the name as they were.
    """
    path = "/".join(quote(p, safe="") for p in ("runs", run_id, *parts))
    args = urlencode(query, quote_via=quote) if query else ""
    return f"/{path}" + (f"?{args}" if args else "")


_PLAIN = re.compile(r"[^A-Za-z0-9._-]")


def attachment(filename: str) -> str:
    """A ``Content-Disposition`` naming ``filename`` whatever its characters (RFC 6266).

    A header is Latin-1: a run id in Chinese would fail to encode, and a quote in it would end
    the name early. Browsers take the UTF-8 ``filename*``; the plain one is for the others.
    """
    plain = _PLAIN.sub("_", filename)
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(filename, safe='')}"


__all__ = ["attachment", "run_path", "run_url"]
