"""The ``ablate`` section of the config: what ``ragaudit ablate`` sweeps.

Beside ``ablation/``, in the base layer: it imports pydantic and base modules only, so that
``config.py`` composes it without loading the ablation package (``config.py`` says why);
``ragaudit.ablation`` exports this section.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from ragaudit._section import Section

DIMENSIONS = ("file_size", "chunk_size", "overlap", "context", "top_k")
"""What an ablation may vary: corpus bytes, chunk tokens, overlap tokens, paragraph context, k."""

_SIZE_UNITS = {"b": 1, "kb": 1_000, "mb": 1_000_000, "gb": 1_000_000_000}


def parse_size(value: Any) -> int:
    """Bytes from ``5000000``, ``"5MB"`` or ``"500 KB"`` (decimal units, as file sizes are shown).

    Raises:
        ValueError: Not a positive size.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int | float):
        size = int(value)
    else:
        text = str(value).strip().lower().replace(" ", "")
        unit = next((u for u in ("gb", "mb", "kb", "b") if text.endswith(u)), "")
        try:
            size = int(float(text[: len(text) - len(unit)]) * _SIZE_UNITS.get(unit, 1))
        except ValueError:
            raise ValueError(f"{value!r} is not a size (say 5MB, 500KB or bytes)") from None
    if size <= 0:
        raise ValueError(f"{value!r}: a size must be positive")
    return size


class AblationPoint(Section):
    """One setting of the reference RAG pipeline."""

    file_size: int = 5_000_000
    """Corpus bytes (UTF-8 text of whole documents); ``"5MB"`` style text is accepted."""
    chunk_size: int = Field(default=500, ge=1)
    """Tokens per chunk, in the unit ``ablate.chunk_unit`` names (the generator's by default)."""
    overlap: int = Field(default=50, ge=0)
    """Tokens shared by neighbouring chunks (capped below the chunk size)."""
    context: bool = True
    """Start each chunk with its document's title and heading path."""
    top_k: int = Field(default=5, ge=1)
    """Chunks retrieved and given to the generator."""

    @field_validator("file_size", mode="before")
    @classmethod
    def _size(cls, value: Any) -> int:
        return parse_size(value)


class AblateConfig(Section):
    """``ragaudit ablate``: one-factor sweeps of the reference RAG pipeline around a baseline."""

    name: str = "ablation"
    """Folder under ``runs_root`` holding the ablation (indexes, one run folder per point)."""
    corpus: Path | None = None
    """The corpus (JSONL, Parquet or a folder of text) the pipeline indexes."""
    questions: Path | None = None
    """The question set the sweep asks, used as is: a hand-made one with references, or one
    ``ragaudit testset`` generated from ``corpus``. None: the run's ``questions``."""
    id_field: str = "id"
    """Id field of a JSONL or Parquet corpus."""
    text_field: str = "text"
    """Text field of a JSONL or Parquet corpus."""
    baseline: AblationPoint = AblationPoint()
    """The fixed values every one-factor sweep varies one dimension of."""
    sweeps: dict[str, list[Any]] = {
        "file_size": ["1MB", "5MB", "10MB"],
        "chunk_size": [100, 300, 500, 700, 1000],
        "context": [True, False],
        "top_k": [3, 5, 7, 10, 15],
    }
    """Dimension → values; each value is tried with the baseline's other values."""
    grid: bool = False
    """Try every combination of the swept values instead (the product grows fast)."""
    chunk_unit: Literal["generator", "words"] = "generator"
    """What ``chunk_size`` and ``overlap`` count: ``generator``, tokens of ``models.generator``'s
    tokenizer (litellm's counter; cl100k for the fake and local models), context line included;
    ``words``, a CJK character or a Latin word each (``ragaudit index --chunk-unit tokens``)."""
    parallel: int = Field(default=4, ge=1, le=64)
    """Points evaluated at once, concurrently in the flow's event loop."""
    objective: dict[str, float] = {}
    """Metric → weight of the objective the best point maximises (a lower-is-better metric
    counts as 1 − value); empty: the plain mean of every scored metric."""
    outliers: int = Field(default=10, ge=0)
    """Questions listed whose objective swings most across the points."""
    drop_indexes: bool = False
    """Drop the engine indexes (elasticsearch/opensearch) after the sweep; local ones stay."""

    @field_validator("sweeps")
    @classmethod
    def _sweeps(cls, value: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for dim, values in value.items():
            if dim not in DIMENSIONS:
                raise ValueError(f"unknown dimension '{dim}' (known: {', '.join(DIMENSIONS)})")
            if not values:
                raise ValueError(f"{dim}: no values")
            for v in values:  # each value must make a valid point
                AblationPoint.model_validate({dim: v})
        return value


__all__ = ["DIMENSIONS", "AblateConfig", "AblationPoint", "parse_size"]
