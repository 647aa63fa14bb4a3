"""Which points an ablation evaluates: the baseline and one-factor sweeps, or the full grid."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ragaudit.cache import canonical_hash
from ragaudit.config import DIMENSIONS, AblateConfig, AblationPoint, RunConfig
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


def _differs(p: AblationPoint, base: AblationPoint) -> set[str]:
    return {d for d in DIMENSIONS if getattr(p, d) != getattr(base, d)}


def plan(cfg: AblateConfig) -> list[PlannedPoint]:
    """The distinct points to evaluate, baseline first, each with the sweeps it belongs to."""
    base = cfg.baseline
    order: dict[str, tuple[AblationPoint, list[str]]] = {point_id(base): (base, [])}

    def add(p: AblationPoint, dims: list[str]) -> None:
        entry = order.setdefault(point_id(p), (p, []))
        entry[1].extend(d for d in dims if d not in entry[1])

    dims = [d for d in DIMENSIONS if d in cfg.sweeps]
    if cfg.grid:
        values = [cfg.sweeps[d] for d in dims]
        for combo in itertools.product(*values):
            p = base.model_validate({**base.model_dump(), **dict(zip(dims, combo, strict=True))})
            # A grid point is on a dimension's chart when every other value is the baseline's.
            add(p, [d for d in dims if _differs(p, base) <= {d}])
    else:
        for dim in dims:
            for value in cfg.sweeps[dim]:
                add(base.model_validate({**base.model_dump(), dim: value}), [dim])
    return [PlannedPoint(p, tuple(d)) for p, d in order.values()]


__all__ = ["PlannedPoint", "chunk_tokenizer", "chunking", "index_group", "plan", "point_id"]
