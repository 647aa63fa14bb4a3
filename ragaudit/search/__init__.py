"""Search backends behind one interface, registered by name.

``local`` (embedded LanceDB, no server), ``opensearch`` (opensearch-py) and
``elasticsearch`` (the official 9.x client). The two engine backends share their query
building, paging and error handling (``_query.py``, ``_engine.py``).
"""

from ragaudit.search import _elasticsearch, _local, _opensearch  # noqa: F401  (register by name)
from ragaudit.search._base import (
    Document,
    Hit,
    SearchBackend,
    backend_names,
    make_backend,
    register_backend,
)
from ragaudit.search._corpus import (
    Chunking,
    check_corpus,
    chunk_documents,
    index_documents,
    read_corpus,
)
from ragaudit.search._engine import EngineBackend
from ragaudit.search._indexing import (
    ENGINES,
    IndexReport,
    engine_options,
    index_corpus,
    index_target,
    make_search_backend,
)
from ragaudit.search._query import (
    DEFAULT_QUERY_TEMPLATE,
    FieldMap,
    SearchError,
    Template,
    TemplateRenderError,
)

__all__ = [
    "DEFAULT_QUERY_TEMPLATE",
    "ENGINES",
    "Chunking",
    "Document",
    "EngineBackend",
    "FieldMap",
    "Hit",
    "IndexReport",
    "SearchBackend",
    "SearchError",
    "Template",
    "TemplateRenderError",
    "backend_names",
    "chunk_documents",
    "engine_options",
    "index_corpus",
    "index_documents",
    "index_target",
    "make_search_backend",
    "make_backend",
    "check_corpus",
    "read_corpus",
    "register_backend",
]
