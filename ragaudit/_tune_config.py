"""The ``tune`` section of the config: which collect variants ``ragaudit tune`` compares.

Beside ``tuning/``, in the base layer: it imports pydantic and base modules only, so that
``config.py`` composes it without loading the tuning package (``config.py`` says why). Search
strategies and metrics are registered kinds (``ragaudit.registry.TUNE_SEARCHES``,
``TUNE_METRICS``), checked by name here; ``ragaudit.tuning`` exports this section.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from ragaudit._section import Section, folder_name
from ragaudit.registry import TUNE_METRICS, TUNE_SEARCHES


class TuneRange(Section):
    """A numeric range a drawing search (``tune.search: optuna``) draws a parameter from."""

    low: float
    """Smallest value."""
    high: float
    """Largest value."""
    log: bool = False
    """Draw on a log scale (boosts, weights spanning orders of magnitude)."""
    integer: bool = False
    """Draw whole numbers."""

    @model_validator(mode="after")
    def _ordered(self) -> TuneRange:
        if not self.low < self.high:
            raise ValueError(f"low ({self.low:g}) must be below high ({self.high:g})")
        if self.log and self.low <= 0:
            raise ValueError("a log range needs low > 0")
        if self.integer and not (self.low.is_integer() and self.high.is_integer()):
            # Optuna would round 0.5 down to 0 and fail on it (a log range) after grading.
            raise ValueError(
                f"an integer range needs whole-number bounds (low {self.low:g}, high {self.high:g})"
            )
        return self


class TuneConfig(Section):
    """``ragaudit tune``: which collect settings retrieve better, judged on one pooled grading.

    The run's ``collect`` section is the baseline; every variant is that section with some
    fields replaced. Checked again, with the backend's knowledge, before any judge call.
    """

    name: str = "tune"
    """Folder under ``runs_root`` holding the tune's outputs (a name, not a path)."""
    variants: dict[str, dict[str, Any]] = {}
    """Variant name → ``collect`` fields it replaces (``top_n``, ``mode``, ``options`` …; an
    engine section's ``query_template`` or ``fields`` as ``opensearch: {query_template: …}``),
    and optionally ``params``, template parameters over :attr:`baseline_params`."""
    params: dict[str, list[Any]] = {}
    """Template parameter → values (``boost: [1, 4, 8]``), read by the query template as
    ``{{ params.boost }}``; the search strategy expands them into variants."""
    baseline_params: dict[str, Any] = {}
    """The baseline's template parameters; a swept one defaults to its first value."""
    search: str = "grid"
    """A registered search strategy (``ragaudit.tuning.search_strategy``): ``grid``, the
    variants listed and every combination of :attr:`params`; ``ofat``, the variants listed and
    each parameter varied alone around :attr:`baseline_params` (as ``ablate`` sweeps);
    ``optuna``, the grid's variants and :attr:`trials` more points drawn by Optuna's TPE
    sampler from :attr:`ranges` and :attr:`collect_ranges` (and :attr:`params` as choices);
    or a plugin's. A config's older ``expand: one_at_a_time`` is ``search: ofat``."""
    trials: int = Field(default=20, ge=1, le=1000)
    """A drawing search (``optuna``): parameter settings tried."""
    ranges: dict[str, TuneRange] = {}
    """A drawing search (``optuna``): template parameter → numeric range."""
    collect_ranges: dict[str, TuneRange] = {}
    """A drawing search (``optuna``): numeric ``collect`` field (``top_n``, the local backend's
    ``rrf_k`` and ``vector_weight``) → range; a whole-number field is drawn as whole numbers."""
    depth: int = Field(default=10, ge=1, le=1000)
    """k: the top-k of each variant that is pooled, graded and scored."""
    metrics: tuple[str, ...] = ("ndcg",)
    """Registered tune metrics at ``depth`` (``ragaudit.tuning.tune_metric``: ``ndcg``,
    ``precision``, ``recall``, ``mrr``, or a plugin's); the first one picks the winner."""
    holdout: float = Field(default=0.3, gt=0.0, lt=1.0)
    """Share of questions kept out of the choice, on which the winner's gain is measured."""
    folds: int | None = Field(default=None, ge=2, le=20)
    """Cross-validation instead of one holdout: each fold's winner, chosen on the other folds,
    is measured on it, so every question is held out once."""
    max_judge_tokens: int | None = Field(default=None, ge=1)
    """Budget of judge prompt tokens for grading the pool (None: grade all of it); under it the
    shallowest documents are graded first and metrics use judged documents only."""
    max_variants: int = Field(default=50, ge=1)
    """More variants than this need ``--yes``."""
    seed: int = 0
    """Seed of the holdout split, the sampler and the resampling."""

    @model_validator(mode="before")
    @classmethod
    def _expand_is_a_search(cls, value: Any) -> Any:
        # ``expand`` chose between a grid and one-at-a-time sweeps before those became search
        # strategies: a config that still says it means the same search.
        if not isinstance(value, dict) or "expand" not in value:
            return value
        out = dict(value)
        expand = out.pop("expand")
        if expand == "one_at_a_time":
            if out.get("search", "grid") not in ("grid", "ofat"):
                raise ValueError(
                    f"expand: one_at_a_time is search 'ofat', which search "
                    f"'{out['search']}' replaces; drop expand"
                )
            out["search"] = "ofat"
        elif expand != "grid":
            raise ValueError(f"expand: '{expand}' is neither grid nor one_at_a_time")
        return out

    @field_validator("search")
    @classmethod
    def _known_search(cls, value: str) -> str:
        return TUNE_SEARCHES.check(value)

    @field_validator("name")
    @classmethod
    def _name_is_a_name(cls, value: str) -> str:
        return folder_name(value)

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError(f"no metric given (known: {', '.join(TUNE_METRICS.names())})")
        return tuple(TUNE_METRICS.check(m) for m in value)

    @field_validator("params")
    @classmethod
    def _non_empty(cls, value: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for name, values in value.items():
            if not values:
                raise ValueError(f"{name}: no values (an empty grid)")
        return value


__all__ = ["TuneConfig", "TuneRange"]
