"""Search backends behind one interface, registered by name."""

from ragaudit.search._base import (
    Document,
    Hit,
    SearchBackend,
    backend_names,
    make_backend,
    register_backend,
)
from ragaudit.search import _local  # noqa: F401  (registers "local")

__all__ = ["Document", "Hit", "SearchBackend", "backend_names", "make_backend", "register_backend"]
