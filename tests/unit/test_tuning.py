"""The tune's config checks and statistics (no search, no judge)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragaudit.config import load_config
from ragaudit.errors import ConfigError
from ragaudit.tuning import (
    BASELINE,
    judge_alone_notice,
    plan_variants,
    question_metrics,
    recommend,
    split_questions,
)

TEMPLATE = {
    "query": {
        "bool": {
            "must": "{{ filter_clauses }}",
            "should": [
                {
                    "match": {
                        "{{ text_field }}": {
                            "query": "{{ question }}",
                            "boost": "{{ params.boost }}",
                            "operator": "{{ params.operator }}",
                        }
                    }
                }
            ],
        }
    }
}


def _config(tmp_path: Path, tune: dict[str, Any], backend: str = "opensearch") -> Any:
    collect: dict[str, Any] = {"backend": backend}
    if backend == "opensearch":
        collect["opensearch"] = {"query_template": TEMPLATE}
    return load_config(
        None,
        {"runs_root": str(tmp_path / "runs"), "collect": collect, "tune": tune},
        environ={},
    )


def _plan_error(tmp_path: Path, tune: dict[str, Any], **kw: Any) -> str:
    with pytest.raises(ConfigError) as info:
        plan_variants(_config(tmp_path, tune, **kw.pop("backend_kw", {})), **kw)
    return str(info.value)


def test_grid_expands_and_names_each_point(tmp_path: Path) -> None:
    cfg = _config(tmp_path, {"params": {"boost": [1, 4, 8], "operator": ["or", "and"]}})
    variants = plan_variants(cfg)
    names = [v.name for v in variants]
    assert names[0] == BASELINE
    assert len(variants) == 6  # the baseline is boost=1,operator=or
    assert "boost=8,operator=and" in names
    v = variants[names.index("boost=8,operator=and")]
    assert v.config.collect.opensearch.template_params == {"boost": 8, "operator": "and"}
    assert variants[0].config.collect.opensearch.template_params == {"boost": 1, "operator": "or"}


@pytest.mark.parametrize(
    "how", [{"search": "ofat"}, {"expand": "one_at_a_time"}], ids=["search-ofat", "old-expand"]
)
def test_one_at_a_time_reuses_the_ablation_expansion(tmp_path: Path, how: dict[str, str]) -> None:
    # ``expand: one_at_a_time``, from before the search strategies were registered, still
    # means search ``ofat``.
    cfg = _config(tmp_path, {"params": {"boost": [1, 4, 8], "operator": ["or", "and"]}, **how})
    assert cfg.tune.search == "ofat"
    names = [v.name for v in plan_variants(cfg)]
    assert names == [BASELINE, "boost=4,operator=or", "boost=8,operator=or", "boost=1,operator=and"]


def test_an_old_expand_that_contradicts_the_search_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="expand: one_at_a_time is search 'ofat'"):
        _config(
            tmp_path, {"params": {"boost": [1, 4]}, "expand": "one_at_a_time", "search": "optuna"}
        )
    with pytest.raises(ConfigError, match="unknown tune search strategy 'random'"):
        _config(tmp_path, {"params": {"boost": [1, 4]}, "search": "random"})


def test_named_variants_override_collect_fields_and_params(tmp_path: Path) -> None:
    cfg = _config(
        tmp_path,
        {
            "params": {"boost": [1, 8], "operator": ["or"]},
            "variants": {"deep": {"top_n": 50, "params": {"boost": 3}}},
        },
    )
    deep = next(v for v in plan_variants(cfg) if v.name == "deep")
    assert deep.config.collect.top_n == 50
    assert deep.params == {"boost": 3, "operator": "or"}


@pytest.mark.parametrize(
    ("tune", "field", "words"),
    [
        (
            {
                "params": {"boost": [1, 8], "operator": ["or"]},
                "variants": {"x": {"params": {"bost": 2}}},
            },
            "tune.variants.x.params.bost",
            "unknown template parameter",
        ),
        (
            {"params": {"boost": [1, 8], "operator": ["or"], "fuzz": [1, 2]}},
            "tune.params.fuzz",
            "never reads params.fuzz",
        ),
        (
            {
                "params": {"boost": [1, 8], "operator": ["or"]},
                "variants": {"boost=8,operator=or": {"top_n": 5}},
            },
            "tune.params",
            "duplicate variant name",
        ),
        (
            {
                "params": {"boost": [1, 8], "operator": ["or"]},
                "variants": {"baseline": {"top_n": 5}},
            },
            "tune.variants.baseline",
            "duplicate variant name",
        ),
        (
            {"params": {"boost": [1, 8], "operator": ["or"]}, "variants": {"bad": {"top_n": 0}}},
            "tune.variants.bad",
            "top_n",
        ),
        (
            {"params": {"boost": list(range(1, 30)), "operator": ["or", "and"]}},
            "tune.max_variants",
            "--yes",
        ),
        (
            {"params": {"boost": [1, 8], "operator": ["or"]}, "variants": {"../up": {"top_n": 5}}},
            "tune.variants.../up",
            "must be letters, digits",
        ),
        (
            # A trailing newline would have named a file run.<name>\n.txt.
            {"params": {"boost": [1, 8], "operator": ["or"]}, "variants": {"x\n": {"top_n": 5}}},
            "tune.variants.x",
            "must be letters, digits",
        ),
        ({"baseline_params": {"boost": 1, "operator": "or"}}, "tune", "nothing to compare"),
        ({"params": {"boost": [1, 8]}}, "query_template", "params.operator"),
    ],
)
def test_bad_tune_sections_name_their_field(
    tmp_path: Path, tune: dict[str, Any], field: str, words: str
) -> None:
    message = _plan_error(tmp_path, tune)
    assert message.startswith(field) or f"{field}" in message.split(":")[0], message
    assert words in message


def test_a_big_grid_passes_with_yes(tmp_path: Path) -> None:
    cfg = _config(tmp_path, {"params": {"boost": list(range(1, 30)), "operator": ["or", "and"]}})
    assert len(plan_variants(cfg, yes=True)) == 58


def test_an_empty_grid_fails_when_the_config_loads(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tune\.params\.boost|tune\.params: .*boost: no values"):
        _config(tmp_path, {"params": {"boost": []}})


def test_template_parameters_on_the_local_backend_are_refused(tmp_path: Path) -> None:
    message = _plan_error(tmp_path, {"params": {"boost": [1, 2]}}, backend_kw={"backend": "local"})
    assert message.startswith("tune.params: backend 'local' has no query template")


def test_unknown_metric_and_bad_range_fail_at_load(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tune\.metrics.*unknown tune metric 'map'"):
        _config(tmp_path, {"metrics": ["map"]})
    with pytest.raises(ConfigError, match=r"tune\.ranges\.boost.*low"):
        _config(tmp_path, {"ranges": {"boost": {"low": 5, "high": 1}}})


def test_condensed_lists_leave_unjudged_documents_out() -> None:
    grades = {"a": 3, "b": 0, "c": 2}
    full, share = question_metrics(["a", "x", "b", "c"], grades, 4, 2, ["ndcg", "precision", "mrr"])
    assert share == 0.75
    # x is dropped, so c rises to the third place: the same as ranking a, b, c.
    same, _ = question_metrics(["a", "b", "c"], grades, 4, 2, ["ndcg", "precision", "mrr"])
    assert full == same
    assert full["mrr"] == 1.0
    assert full["precision"] == pytest.approx(2 / 4)
    ideal = 3 + 2 / math.log2(3)
    assert full["ndcg"] == pytest.approx((3 + 2 / math.log2(4)) / ideal)


def test_splits_are_stable_and_disjoint() -> None:
    qids = [f"q{i}" for i in range(20)]
    [(tuning, heldout)] = split_questions(qids, 0.3, seed=1)
    assert len(heldout) == 6 and not set(tuning) & set(heldout)
    assert split_questions(list(reversed(qids)), 0.3, seed=1) == [(tuning, heldout)]
    folds = split_questions(qids, 0.3, seed=1, folds=4)
    assert sorted(q for _, h in folds for q in h) == sorted(qids)


def _values(means: dict[str, float], n: int, seed: int, noise: float = 0.05) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.2, 0.8, n)
    return {
        name: {"ndcg": {f"q{i}": float(base[i] + m + rng.normal(0, noise)) for i in range(n)}}
        for name, m in means.items()
    }


def test_a_clear_winner_is_recommended_with_its_held_out_gain() -> None:
    values = _values({BASELINE: 0.0, "a": 0.01, "b": 0.15}, 40, seed=3)
    splits = split_questions(list(values[BASELINE]["ndcg"]), 0.3, seed=0)
    d = recommend(values, BASELINE, ["ndcg"], splits, resamples=999, bootstrap_samples=200)
    assert d.winner == "b" and d.recommended == "b"
    assert d.n_heldout == 12
    assert d.heldout_gain is not None and 0.1 < d.heldout_gain < 0.2
    assert d.heldout_ci[0] is not None and d.heldout_ci[0] > 0
    b = next(s for s in d.stats if s.variant == "b")
    assert b.p_adjusted is not None and b.p_value is not None and b.p_adjusted >= b.p_value


def test_equal_variants_keep_the_baseline() -> None:
    values = _values({BASELINE: 0.0, "a": 0.0, "b": 0.0, "c": 0.0}, 30, seed=5)
    splits = split_questions(list(values[BASELINE]["ndcg"]), 0.3, seed=0)
    d = recommend(values, BASELINE, ["ndcg"], splits, resamples=999, bootstrap_samples=200)
    assert d.recommended == BASELINE
    assert d.why.startswith("keep the baseline")


def test_folds_hold_every_question_out_once() -> None:
    values = _values({BASELINE: 0.0, "b": 0.2}, 20, seed=7)
    splits = split_questions(list(values[BASELINE]["ndcg"]), 0.3, seed=0, folds=4)
    d = recommend(values, BASELINE, ["ndcg"], splits, resamples=999, bootstrap_samples=200)
    assert d.n_heldout == 20 and d.recommended == "b"


def test_a_tune_never_writes_into_a_run_folder_or_the_store(tmp_path: Path) -> None:
    (tmp_path / "runs" / "nightly-1").mkdir(parents=True)
    (tmp_path / "runs" / "nightly-1" / "manifest.json").write_text("{}")
    tune = {"params": {"boost": [1, 8], "operator": ["or"]}}
    for name, words in (("nightly-1", "a run folder"), ("judgments", "judgment store")):
        message = _plan_error(tmp_path, {**tune, "name": name})
        assert message.startswith(f"tune.name: '{name}' is") and words in message


@pytest.mark.parametrize(
    ("ranges", "search", "words"),
    [
        ({"mode": {"low": 1, "high": 2}}, "optuna", "not a numeric collect field"),
        ({"rrf_k": {"low": 1, "high": 50}}, "optuna", "only a backend that embeds, in hybrid mode"),
        ({"top_n": {"low": 1, "high": 20_000}}, "optuna", "less than or equal to 10000"),
        ({"top_n": {"low": 1, "high": 20}}, "grid", "a search that draws (optuna), not 'grid'"),
    ],
    ids=["not-numeric", "fusion-outside-hybrid", "out-of-bounds", "grid-search"],
)
def test_a_collect_range_no_trial_could_use_is_refused_naming_it(
    tmp_path: Path, ranges: dict[str, Any], search: str, words: str
) -> None:
    (field,) = ranges
    tune = {"search": search, "collect_ranges": ranges, "variants": {"v": {"top_n": 5}}}
    message = _plan_error(tmp_path, tune, backend_kw={"backend": "local"})
    assert message.startswith(f"tune.collect_ranges.{field}") and words in message


def test_optuna_over_collect_ranges_alone_plans_only_the_baseline(tmp_path: Path) -> None:
    tune = {"search": "optuna", "collect_ranges": {"top_n": {"low": 3, "high": 20}}}
    variants = plan_variants(_config(tmp_path, tune, backend="local"))
    assert [v.name for v in variants] == [BASELINE]  # the trials are drawn as the tune runs


@pytest.mark.parametrize(
    ("models", "named"),
    [
        ({"judge_repeats": 3}, ["models.judge_repeats (3)"]),
        ({"jury": ["fake/a", "fake/b"]}, ["models.jury (2 judges)"]),
        (
            {"jury": ["fake/a", "fake/b"], "judge_repeats": 2},
            ["models.jury (2 judges)", "models.judge_repeats (2)"],
        ),
    ],
    ids=["repeats", "jury", "both"],
)
def test_a_jury_or_repeats_is_named_as_ignored_by_tune(
    tmp_path: Path, models: dict[str, Any], named: list[str]
) -> None:
    cfg = load_config(
        None,
        {
            "runs_root": str(tmp_path / "runs"),
            "collect": {"backend": "local"},
            "models": models,
            "tune": {"variants": {"v": {"top_n": 5}}},
        },
        environ={},
    )
    notice = judge_alone_notice(cfg)
    assert notice is not None and "\n" not in notice
    assert notice.startswith(f"tune grades with the judge alone ({cfg.models.judge_model}")
    assert all(name in notice for name in named)


def test_the_judge_alone_says_nothing(tmp_path: Path) -> None:
    assert judge_alone_notice(_config(tmp_path, {"variants": {"v": {"top_n": 5}}})) is None
