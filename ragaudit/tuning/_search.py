"""How a tune finds its variants: search strategies, each registered by name (``tune.search``).

A strategy says how ``tune.params`` become fixed variants (every combination, or each
parameter alone around the baseline) and whether it then draws further points, one trial at a
time, each tried (searched, pooled, graded) and scored before the next is drawn. A plugin
registers one the same way, with :func:`search_strategy`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ragaudit.config import CollectConfig, RunConfig
from ragaudit.registry import TUNE_SEARCHES as REGISTRY

Trial = Callable[[int, dict[str, Any], dict[str, Any]], Awaitable[float | None]]
"""Tries trial ``n`` with (collect changes, template parameters); its score on the tuning
questions, None when its search failed."""
Draw = Callable[[RunConfig, dict[str, Any], Trial], Awaitable[None]]
"""Draws ``tune.trials`` points from the baseline's template parameters, trying each."""


@dataclass(frozen=True)
class SearchStrategy:
    """A registered way of finding a tune's variants.

    Attributes:
        name: Its name (``tune.search``).
        grid: ``tune.params`` expand to every combination (True) or one parameter at a time
            around the baseline (False).
        draw: Draws further points after the fixed variants are graded; None: it draws none.
    """

    name: str
    grid: bool = True
    draw: Draw | None = None

    @property
    def draws(self) -> bool:
        """It draws points (``tune.trials``) from ``tune.ranges`` and ``collect_ranges``."""
        return self.draw is not None


def search_strategy(name: str, *, grid: bool = True) -> Callable[[Draw], Draw]:
    """Register the decorated draw as search strategy ``name`` (built-in or a plugin's)."""

    def deco(draw: Draw) -> Draw:
        module = draw.__module__
        unit = SearchStrategy(REGISTRY.qualify(name, module), grid, draw)
        REGISTRY.add(name, unit, module=module)
        return draw

    return deco


REGISTRY.add("grid", SearchStrategy("grid", grid=True), module=__name__)
REGISTRY.add("ofat", SearchStrategy("ofat", grid=False), module=__name__)


def numeric_collect_fields() -> dict[str, type]:
    """The collect fields a ``tune.collect_ranges`` entry may draw: name → int or float."""
    return {
        name: field.annotation
        for name, field in CollectConfig.model_fields.items()
        if field.annotation in (int, float)
    }


@search_strategy("optuna")
async def optuna_trials(config: RunConfig, base_params: dict[str, Any], trial: Trial) -> None:
    """TPE draws template parameters and numeric collect fields, scored on tuning questions."""
    import optuna

    tune = config.tune
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        direction="maximize", sampler=optuna.samplers.TPESampler(seed=tune.seed)
    )
    numeric = numeric_collect_fields()
    for n in range(1, tune.trials + 1):
        drawn = study.ask()
        params = dict(base_params)
        for name, rng in tune.ranges.items():
            params[name] = (
                drawn.suggest_int(name, int(rng.low), int(rng.high), log=rng.log)
                if rng.integer
                else drawn.suggest_float(name, rng.low, rng.high, log=rng.log)
            )
        for name, choices in tune.params.items():
            if name not in tune.ranges:
                params[name] = drawn.suggest_categorical(name, choices)
        changes: dict[str, Any] = {}
        for name, rng in tune.collect_ranges.items():
            # The collect field's own type decides: top_n and rrf_k are counts.
            changes[name] = (
                drawn.suggest_int(f"collect.{name}", int(rng.low), int(rng.high), log=rng.log)
                if numeric[name] is int
                else drawn.suggest_float(f"collect.{name}", rng.low, rng.high, log=rng.log)
            )
        score = await trial(n, changes, params)
        if score is None:
            study.tell(drawn, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(drawn, score)


__all__ = ["SearchStrategy", "Trial", "numeric_collect_fields", "search_strategy"]
