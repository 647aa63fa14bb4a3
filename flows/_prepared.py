"""Imported by the forkserver local Dask workers are forked from: prepares it once.

Importing this module runs :func:`ragaudit.flows._workers.prepare` (imports, Prefect's
collections, token tables): a forkserver only imports the modules it is given by name.
"""

from ragaudit.flows._workers import prepare

prepare()
