"""The stages: thin adapters from run-folder tables to library calls, one module per stage."""

from ragaudit.tasks._common import (
    BATCH_PREFIX,
    StageContext,
    StageResult,
    batch_names,
    combine_parts,
    dumps,
    file_digest,
    gather_limited,
    in_flight,
    make_context,
    part_name,
    run_stage,
    split_part,
)

__all__ = [
    "BATCH_PREFIX",
    "StageContext",
    "StageResult",
    "batch_names",
    "combine_parts",
    "dumps",
    "file_digest",
    "gather_limited",
    "in_flight",
    "make_context",
    "part_name",
    "run_stage",
    "split_part",
]
