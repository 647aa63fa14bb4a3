"""One frozen configuration for a run, loaded from a YAML/TOML file, the environment and flags.

Precedence, lowest first: defaults, the file, ``RAGAUDIT_*`` environment variables (nested
with ``__``, e.g. ``RAGAUDIT_MODELS__JUDGE``), then CLI flags. Every error names the field.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ragaudit.errors import ConfigError

OFFLINE_JUDGE = "local/gemma-3-270m"
OFFLINE_EMBEDDER = "local/all-minilm-l6-v2"
ENV_PREFIX = "RAGAUDIT_"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ModelsConfig(_Frozen):
    """Which models judge, generate and embed, and how hard the gateway may push them."""

    judge: str | None = None
    """litellm model string of the judge (``openai/gpt-4o-mini``, ``ollama/qwen2.5:7b`` …).
    None selects the offline smoke-quality judge."""
    generator: str | None = None
    """Model that writes answers in the built-in reference pipeline; defaults to the judge."""
    embedder: str | None = None
    """litellm embedding model string; None selects the offline English-only MiniLM."""
    judge_context_window: int | None = None
    """Prompt + answer token budget of the judge; None asks litellm, else 8,192."""
    concurrency: int = Field(default=8, ge=1, le=512)
    """Calls in flight at once per model."""
    max_retries: int = Field(default=4, ge=0, le=20)
    """Retries of a rate-limited or transient failure before the call fails."""
    backoff_s: float = Field(default=1.0, ge=0.0)
    """First backoff delay; doubles each retry (with jitter) unless Retry-After says otherwise."""
    timeout_s: float = Field(default=120.0, gt=0)
    """Per-request timeout."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature of every judge call."""
    max_output_tokens: int = Field(default=1024, ge=16)
    """Answer budget of one judge call."""

    @property
    def judge_model(self) -> str:
        """The judge actually used."""
        return self.judge or OFFLINE_JUDGE

    @property
    def generator_model(self) -> str:
        """The generator actually used."""
        return self.generator or self.judge_model

    @property
    def embedder_model(self) -> str:
        """The embedding model actually used."""
        return self.embedder or OFFLINE_EMBEDDER


class AnswerConfig(_Frozen):
    """Where the system-under-test's answers come from."""

    source: Literal["column", "entrypoint"] = "column"
    """``column``: the question set's ``response``; ``entrypoint``: call a Python function."""
    entrypoint: str | None = None
    """``package.module:function`` taking (question, filters) and returning the answer text
    (sync or async)."""
    concurrency: int = Field(default=4, ge=1)
    """Answers fetched at once."""
    retries: int = Field(default=2, ge=0, le=10)
    """Bounded retries of a failing answer source."""


class CollectConfig(_Frozen):
    """Stage 1: candidates from the search backend, answers from the system."""

    backend: Literal["local", "question_set"] = "local"
    """Search backend (``local`` is embedded, no server); ``question_set`` takes each question's
    ``retrieved_contexts`` as its candidates in the order given."""
    index_path: Path = Path("data/index")
    """Folder of the local backend's on-disk index."""
    table: str = "contexts"
    """Index (table) name inside the backend."""
    corpus: Path | None = None
    """Corpus indexed into the local backend on first use (JSONL with id, text, metadata)."""
    top_n: int = Field(default=200, ge=1, le=10_000)
    """Candidates fetched per question."""
    filter_field: str | None = "collection"
    """Metadata field the question's ``filters`` constrain (the seed's company id)."""
    mode: Literal["bm25", "vector", "hybrid"] = "bm25"
    """Local backend ranking."""
    answers: AnswerConfig = AnswerConfig()
    """Answer source."""


class SortConfig(_Frozen):
    """Stage 2: LLM-judged ground-truth order of the candidates."""

    enabled: bool = True
    """Skip the stage entirely when false."""
    strategy: Literal["merge", "insertion"] = "merge"
    """``merge``: parallel merge rounds; ``insertion``: the seed's sequential binary insertion."""
    both_orders: bool = True
    """Ask each comparison in both orders; disagreement counts as a tie."""
    max_candidates: int | None = None
    """Judge only the engine's first N candidates (None: all)."""
    agreement_k: int = Field(default=10, ge=1)
    """k of top-k overlap, NDCG@k, hit@k, precision/recall@k."""


class GroundTruthConfig(_Frozen):
    """Stage 3: reference answers from the relevant candidates."""

    enabled: bool = True
    """Skip when false (question-set references are used as they are)."""
    mode: Literal["fast", "slow"] = "fast"
    """``fast``: window-filling groups then merges; ``slow``: per context then merges."""
    seed: int = 0
    """Seed of the shuffle before packing."""
    answer_tokens: int = Field(default=512, ge=32)
    """Token budget reserved for each answer."""
    overwrite_reference: bool = False
    """Replace a reference the question set already has."""


class ScoreConfig(_Frozen):
    """Stage 4: metrics on the system's top-k contexts."""

    metrics: tuple[str, ...] = (
        "faithfulness",
        "answer_relevancy",
        "context_precision",
        "context_recall",
        "nonllm_context_precision",
        "nonllm_context_recall",
        "rouge_l",
    )
    """Metric names, as ``ragaudit metrics`` lists them."""
    top_k: int = Field(default=10, ge=1)
    """Contexts scored per question, reduced until the judge's prompt fits its window."""
    answer_relevancy_strictness: int = Field(default=3, ge=1, le=10)
    """Questions generated per answer by answer relevancy."""


class ReportConfig(_Frozen):
    """Stage 5: summary, flags and artifacts."""

    thresholds: dict[str, float] = {
        "context_precision": 0.8,
        "context_recall": 0.7,
        "faithfulness": 0.9,
        "answer_relevancy": 0.8,
    }
    """A metric mean below its threshold is flagged (defaults from the users' notes)."""
    bootstrap_samples: int = Field(default=1000, ge=0)
    """Resamples for the confidence intervals of the means (0 turns them off)."""
    worst: int = Field(default=5, ge=0)
    """Worst questions listed per metric."""


class RunConfig(_Frozen):
    """Everything one evaluation run needs; stored whole in the run's manifest."""

    questions: Path = Path("data/demo/questions.jsonl")
    """Question set: JSONL, CSV or Parquet (ragaudit or RAGAS field names)."""
    run_id: str | None = None
    """Run identifier; the same id resumes a run. None: derived from time."""
    runs_root: Path = Path("data/runs")
    """Folder holding one subfolder per run."""
    cache_dir: Path = Path("data/cache")
    """diskcache folder of the LLM memo."""
    limit: int | None = Field(default=None, ge=1)
    """Evaluate only the first N questions."""
    models: ModelsConfig = ModelsConfig()
    collect: CollectConfig = CollectConfig()
    sort: SortConfig = SortConfig()
    ground_truth: GroundTruthConfig = GroundTruthConfig()
    score: ScoreConfig = ScoreConfig()
    report: ReportConfig = ReportConfig()

    def fingerprint(self) -> str:
        """Stable hash of the output-affecting configuration (used in task cache keys)."""
        from ragaudit.cache import canonical_hash

        return canonical_hash(self.model_dump(mode="json", exclude={"run_id"}))


def _read_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file {path}: not found")
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix in {".toml"}:
            data = tomllib.loads(text)
        elif path.suffix in {".yaml", ".yml"}:
            data = yaml.safe_load(text) or {}
        elif path.suffix == ".json":
            data = json.loads(text)
        else:
            raise ConfigError(f"config file {path}: use .yaml, .yml, .toml or .json")
    except (tomllib.TOMLDecodeError, yaml.YAMLError, json.JSONDecodeError) as exc:
        raise ConfigError(f"config file {path}: not valid {path.suffix[1:]}: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path}: not UTF-8 text") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: the top level must be a mapping")
    return data


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    """``RAGAUDIT_MODELS__JUDGE=x`` → ``{"models": {"judge": "x"}}``; values parsed as YAML."""
    out: dict[str, Any] = {}
    skip = {"RAGAUDIT_HOME", "RAGAUDIT_REAL_LLM"}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or name in skip:
            continue
        parts = [p.lower() for p in name[len(ENV_PREFIX) :].split("__") if p]
        try:
            value = yaml.safe_load(raw) if raw else raw
        except yaml.YAMLError:
            value = raw
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def set_path(tree: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``tree["a"]["b"] = value`` for ``dotted="a.b"``, creating levels."""
    parts = dotted.split(".")
    node = tree
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def format_validation_error(exc: ValidationError, origin: str) -> str:
    """One line per problem, each naming the dotted field."""
    lines = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        lines.append(f"{origin}: {field}: {err['msg']}")
    return "\n".join(lines)


def load_config(
    path: Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> RunConfig:
    """Build the run configuration from a file, the environment and CLI overrides."""
    data: dict[str, Any] = _read_file(path) if path else {}
    data = _merge(data, _env_overrides(dict(os.environ if environ is None else environ)))
    data = _merge(data, overrides or {})
    origin = f"config ({path})" if path else "config"
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, origin)) from None


__all__ = [
    "OFFLINE_EMBEDDER",
    "OFFLINE_JUDGE",
    "AnswerConfig",
    "CollectConfig",
    "GroundTruthConfig",
    "ModelsConfig",
    "ReportConfig",
    "RunConfig",
    "ScoreConfig",
    "SortConfig",
    "load_config",
    "set_path",
]
