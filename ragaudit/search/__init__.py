"""Search backends behind one interface, registered by name in ``ragaudit.registry``.

``local`` (embedded LanceDB, no server), ``opensearch`` (opensearch-py), ``elasticsearch``
(the official 9.x client) and ``question_set`` (each question's own retrieved contexts). The
two engine backends share their query building, paging and error handling (``_query.py``,
``_engine.py``). A caller asks a backend's :class:`Capabilities`, never its name.
"""

from ragaudit.search import (  # noqa: F401  (register by name)
    _elasticsearch,
    _local,
    _opensearch,
    _question_set,
)
from ragaudit.search._base import (
    Capabilities,
    Document,
    FetchingBackend,
    Hit,
    IndexableBackend,
    SearchBackend,
    backend_names,
    capabilities,
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
    IndexReport,
    engine_options,
    index_corpus,
    index_target,
    make_search_backend,
    ready_backend,
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
    "Capabilities",
    "Chunking",
    "Document",
    "EngineBackend",
    "FetchingBackend",
    "FieldMap",
    "Hit",
    "IndexReport",
    "IndexableBackend",
    "SearchBackend",
    "SearchError",
    "Template",
    "TemplateRenderError",
    "backend_names",
    "capabilities",
    "chunk_documents",
    "engine_options",
    "index_corpus",
    "index_documents",
    "index_target",
    "make_search_backend",
    "ready_backend",
    "make_backend",
    "check_corpus",
    "read_corpus",
    "register_backend",
]
