"""Which points an ablation evaluates: the baseline and one-factor sweeps, or the full grid."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragaudit._ablate_config import DIMENSIONS, AblateConfig, AblationPoint
from ragaudit.cache import canonical_hash
from ragaudit.config import RunConfig
from ragaudit.search import Chunking


@dataclass(frozen=True)
class PlannedPoint:
    """A point and the sweeps (dimensions) whose charts it belongs to."""

    point: AblationPoint
    dimensions: tuple[str, ...]

    @property
    def point_id(self) -> str:
        """Readable and unique: every dimension's value (the run folder's name)."""
        return point_id(self.point)


def point_id(p: AblationPoint) -> str:
    """``fs5000000-cs500-ov50-ctx1-k5``."""
    return f"fs{p.file_size}-cs{p.chunk_size}-ov{p.overlap}-ctx{int(p.context)}-k{p.top_k}"


def chunking(p: AblationPoint, tokenizer: str | None = None) -> Chunking:
    """How the point cuts documents: in ``tokenizer``'s tokens, or without one in words.

    Words are ragaudit's own tokens (a CJK character or a Latin word each, as ``ragaudit index
    --chunk-unit tokens`` counts them). The overlap is capped below half a chunk, so a small
    chunk size in a sweep never makes an invalid chunking out of the baseline's overlap.
    """
    return Chunking(
        size=p.chunk_size,
        overlap=min(p.overlap, p.chunk_size // 2),
        unit="tokens",
        keep_context=p.context,
        tokenizer=tokenizer,
    )


def chunk_tokenizer(config: RunConfig) -> str | None:
    """The model whose tokens chunk sizes count (``ablate.chunk_unit``), None for words."""
    return config.models.generator_model if config.ablate.chunk_unit == "generator" else None


def index_group(p: AblationPoint) -> str:
    """Points sharing this key share one index: same corpus subset, same chunking."""
    c = chunking(p)
    return canonical_hash(
        {"file_size": p.file_size, "size": c.size, "overlap": c.overlap, "ctx": c.keep_context}
    )[:16]


def expand(
    base: Mapping[str, Any], sweeps: Mapping[str, Sequence[Any]], *, grid: bool
) -> list[tuple[dict[str, Any], tuple[str, ...]]]:
    """The settings of a sweep around ``base``, base first, each with the sweeps it belongs to.

    ``grid``: every combination of the swept values, each on the sweep of every dimension it
    varies alone; otherwise each dimension varied alone (one factor at a time). Settings that
    come out equal are one (the baseline's own value in a sweep is the baseline).
    """
    order: dict[str, tuple[dict[str, Any], list[str]]] = {}

    def add(values: dict[str, Any], dims: list[str]) -> None:
        entry = order.setdefault(canonical_hash(values), (values, []))
        entry[1].extend(d for d in dims if d not in entry[1])

    add(dict(base), [])
    dims = list(sweeps)
    if grid:
        for combo in itertools.product(*(sweeps[d] for d in dims)):
            values = {**base, **dict(zip(dims, combo, strict=True))}
            differs = {d for d in dims if values[d] != base.get(d)}
            add(values, [d for d in dims if differs <= {d}])
    else:
        for dim in dims:
            for value in sweeps[dim]:
                add({**base, dim: value}, [dim])
    return [(values, tuple(d)) for values, d in order.values()]


def plan(cfg: AblateConfig) -> list[PlannedPoint]:
    """The distinct points to evaluate, baseline first, each with the sweeps it belongs to."""
    base = cfg.baseline
    # Validated before being compared: ``"5MB"`` and 5000000 are one corpus size.
    sweeps = {
        d: [getattr(AblationPoint.model_validate({d: v}), d) for v in cfg.sweeps[d]]
        for d in DIMENSIONS
        if d in cfg.sweeps
    }
    points = [
        (AblationPoint.model_validate(v), dims)
        for v, dims in expand(base.model_dump(), sweeps, grid=cfg.grid)
    ]
    merged: dict[str, PlannedPoint] = {}
    for p, dims in points:
        known = merged.get(point_id(p))
        both = tuple(dict.fromkeys((*(known.dimensions if known else ()), *dims)))
        merged[point_id(p)] = PlannedPoint(p, both)
    return list(merged.values())


__all__ = [
    "PlannedPoint",
    "chunk_tokenizer",
    "chunking",
    "expand",
    "index_group",
    "plan",
    "point_id",
]
