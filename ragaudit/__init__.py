"""ragaudit: evaluate retrieval-augmented QA systems that run on Elasticsearch or OpenSearch."""

from ragaudit import _env

# Before anything imports litellm, ragas or prefect: they read these at import time.
_env.apply_defaults()

__version__ = "0.1.0"

__all__ = ["__version__"]
