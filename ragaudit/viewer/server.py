"""``serve``: the viewer on uvicorn, bound before the address is printed."""

from __future__ import annotations

import ipaddress
import secrets
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

from ragaudit.errors import RagauditError

DEFAULT_PORT = 8765


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def open_in_browser(url: str) -> None:
    """Open ``url`` in the user's browser (an ``on_ready`` for :func:`serve`)."""
    import webbrowser

    webbrowser.open(url)


def serve(
    runs_root: Path,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    token: str | None = None,
    open_path: str = "/",
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the viewer of ``runs_root`` until interrupted; prints its address first.

    Off loopback a token is required (a random one when none is given) and is part of the
    printed address. The socket is bound and listening before the address is printed, so a
    browser opened on it (``on_ready``) is answered as soon as the server runs; ``port=0``
    takes a free port.

    Args:
        runs_root: The folder whose sub-folders are the runs.
        host: The address to bind (loopback by default).
        port: The port (0: any free one).
        token: The secret every request must carry (None: loopback only, or a random one).
        open_path: The page the printed address points at, percent-encoded
            (``viewer._paths.run_url``).
        on_ready: Called with the address once the socket listens (opens a browser).
    """
    import uvicorn

    from ragaudit.viewer.app import LOOPBACK_NAMES, create_app

    if token is None and not is_loopback(host):
        token = secrets.token_urlsafe(24)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise RagauditError(f"view: cannot listen on {host}:{port} ({exc.strerror})") from None
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    # ``open_path`` comes encoded (``_paths.run_url``): encoding it again turned a run id's
    # ``%E6`` into ``%25E6`` and ``Ana%20Lee`` into ``Ana%2520Lee``, an address that 404s and a
    # second name for one annotator.
    url = f"http://{shown}:{bound}{open_path}"
    if token is not None:
        url += ("&" if "?" in url else "?") + urlencode({"token": token})
    print(f"ragaudit view: serving {runs_root} at {url}", flush=True)
    if token is not None:
        print("every request needs the token in that address (Ctrl-C stops)", flush=True)
    if on_ready is not None:
        on_ready(url)
    app = create_app(Path(runs_root), token=token, hosts=(*LOOPBACK_NAMES, shown))
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        sys.stdout.flush()


__all__ = ["DEFAULT_PORT", "is_loopback", "open_in_browser", "serve"]
