"""The ``ragaudit`` command line: the whole DAG, one command per stage, the demo and the cache.

One module per command group; importing them registers their commands on ``app``, in the
order ``ragaudit --help`` lists them.
"""

# Not sorted: the import order is the order of the commands in the help.
from ragaudit.cli import (  # noqa: F401, I001  (importing registers the commands)
    _run,
    _reports,
    _metrics,
    _plugins,
    _index,
    _serve,
    _ablate,
    _tune,
    _audit,
    _testset,
    _calibrate,
    _label,
    _judgments,
    _cache,
    _view,
)
from ragaudit.cli._app import app, main

__all__ = ["app", "main"]
