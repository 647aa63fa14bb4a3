"""What a judge did before and what its calls cost: the dry run's evidence and prices.

The judge's record is read from earlier finished runs with the same judge under the runs root
(:func:`judge_history`: their tables and call logs, no call), or from a judge record file
(:func:`record_json` writes one, :func:`load_record` and :func:`find_record` read them; the
package ships the offline demo judge's). Prices come from litellm's price map (:func:`price`).
The dry run itself (:mod:`ragaudit.dryrun`) turns them into an estimate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import litellm
import polars as pl

from ragaudit.cache import usage_counter
from ragaudit.cache.providers import provider_record
from ragaudit.errors import ConfigError
from ragaudit.runfolder import RunsRoot

HISTORY_RUNS = 20
"""The newest runs read for the record (reading one costs its tables and call log)."""


@dataclass(frozen=True)
class Reply:
    """A judge's replies to one prompt in earlier runs: how many distinct ones, mean length."""

    calls: int
    mean_tokens: float


@dataclass(frozen=True)
class History:
    """What earlier finished runs with the same judge observed, read from their folders alone.

    Replies are keyed by the call log's ``(stage, prompt_version)``; each distinct request
    (key hash) counts once, so a memo hit or a resumed run does not weigh twice.
    """

    judge: str
    runs: tuple[str, ...] = ()
    verdicts: int = 0
    relevant: int = 0
    comparisons: int = 0
    ties: int = 0
    replies: dict[tuple[str, str], Reply] = field(default_factory=dict)
    reference_tokens: tuple[int, ...] = ()
    """Length of each reference it wrote, in its tokens."""
    references_tried: int = 0
    """References it was asked to write (from at least one context)."""
    source: str = ""
    """Where the record was read: empty for the runs root, else the judge record file."""
    about: str = ""
    """A judge record file's path and what it was measured on."""

    @property
    def relevant_share(self) -> float | None:
        """Share of ``ok`` relevance verdicts that said relevant, or None without any."""
        return self.relevant / self.verdicts if self.verdicts else None

    @property
    def tie_share(self) -> float | None:
        """Share of ``ok`` pairwise comparisons that ended tied, or None without any."""
        return self.ties / self.comparisons if self.comparisons else None

    @property
    def reference_share(self) -> float | None:
        """Share of the references it was asked to write that it wrote, or None."""
        return len(self.reference_tokens) / self.references_tried if self.references_tried else None

    def reply(self, stage: str, prompt_version: str | None) -> Reply | None:
        """The judge's logged replies to ``prompt_version`` (None: all ``stage``'s prompts)."""
        if prompt_version is not None:
            return self.replies.get((stage, prompt_version))
        seen = [r for (st, _), r in self.replies.items() if st == stage]
        calls = sum(r.calls for r in seen)
        if not calls:
            return None
        return Reply(calls, sum(r.calls * r.mean_tokens for r in seen) / calls)


RECORD_FORMAT = "ragaudit-judge-record/1"
BUNDLED_RECORDS = Path(__file__).parent / "records"
"""Judge records shipped with the package: the offline demo judge's, measured by
``ragaudit record`` on a finished run of the bundled demo (its ``source`` says which)."""


def record_json(history: History, source: str) -> dict[str, Any]:
    """``history`` as a judge record file's content (``ragaudit record``).

    ``source`` says what it was measured on. Only counts and lengths: no prompt, answer or
    context text.
    """
    return {
        "format": RECORD_FORMAT,
        "judge": history.judge,
        "source": source,
        "runs": list(history.runs),
        "verdicts": history.verdicts,
        "relevant": history.relevant,
        "comparisons": history.comparisons,
        "ties": history.ties,
        "replies": [
            {"stage": st, "prompt_version": pv, "calls": r.calls, "mean_tokens": r.mean_tokens}
            for (st, pv), r in sorted(history.replies.items())
        ],
        "reference_tokens": list(history.reference_tokens),
        "references_tried": history.references_tried,
    }


def load_record(path: Path) -> History:
    """A judge record file (:func:`record_json`) as a :class:`History`.

    A file that is not one is a ConfigError naming it and what is wrong.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if data.get("format") != RECORD_FORMAT:
            raise ValueError(f"format is {data.get('format')!r}, expected {RECORD_FORMAT!r}")
        return History(
            judge=str(data["judge"]),
            runs=tuple(str(r) for r in data["runs"]),
            verdicts=int(data["verdicts"]),
            relevant=int(data["relevant"]),
            comparisons=int(data["comparisons"]),
            ties=int(data["ties"]),
            replies={
                (str(r["stage"]), str(r["prompt_version"])): Reply(
                    int(r["calls"]), float(r["mean_tokens"])
                )
                for r in data["replies"]
            },
            reference_tokens=tuple(int(n) for n in data["reference_tokens"]),
            references_tried=int(data["references_tried"]),
            source=f"the judge record {Path(path).name}",
            about=f"{path}: {data.get('source') or 'no source given'}",
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"judge record {path}: not a readable judge record: {exc}") from None


def find_record(judge: str, records: list[Path] | None = None) -> History | None:
    """The first of ``records`` (then the bundled ones) that is a record of ``judge``."""
    paths = list(records or []) + sorted(BUNDLED_RECORDS.glob("*.json"))
    for path in paths:
        record = load_record(path)
        if record.judge == judge:
            return record
    return None


def _frame(paths: list[Path], columns: list[str]) -> pl.DataFrame | None:
    """The parquet files' ``columns`` stacked, or None when there are none or one is unreadable."""
    frames = []
    for path in paths:
        try:
            frames.append(pl.read_parquet(path, columns=columns))
        except Exception:  # a half-written part or an older schema: the record skips it
            continue
    return pl.concat(frames, how="vertical_relaxed") if frames else None


def judge_history(runs_root: Path, judge: str, limit: int = HISTORY_RUNS) -> History:
    """The record of ``judge`` in the newest ``limit`` finished runs under ``runs_root``.

    A run counts when its manifest names ``judge`` and :func:`ragaudit.runfolder.run_state`
    calls it complete (:meth:`ragaudit.runfolder.RunsRoot.finished`).
    Read: ``verdicts`` (``ok`` rows: relevant or not), ``comparisons`` (``ok`` rows: tied or
    not), ``ground_truth`` (references asked of it, and those it wrote, counted in its tokens)
    and the call log (completion rows of ``judge`` without error). No model is called.
    """
    # The one rule of a finished run (runfolder.run_state), oldest first by start.
    found = [
        r
        for r in RunsRoot(runs_root).finished()
        if (r.manifest.get("models") or {}).get("judge") == judge
    ][-limit:]
    if not found:
        return History(judge)
    dirs = [r.path for r in found]
    verdicts = _frame(
        [d / "verdicts.parquet" for d in dirs if (d / "verdicts.parquet").is_file()],
        ["relevant", "status"],
    )
    ok = verdicts.filter(pl.col("status") == "ok") if verdicts is not None else None
    compared = _frame(
        [d / "comparisons.parquet" for d in dirs if (d / "comparisons.parquet").is_file()],
        ["outcome", "status"],
    )
    decided = compared.filter(pl.col("status") == "ok") if compared is not None else None
    references = _frame(
        [d / "ground_truth.parquet" for d in dirs if (d / "ground_truth.parquet").is_file()],
        ["reference", "origin", "status", "calls"],
    )
    written: tuple[int, ...] = ()
    tried = 0
    if references is not None:
        # Asked of the judge: a question without any relevant context makes no call.
        asked = references.filter(
            (pl.col("origin") == "generated")
            & ((pl.col("calls") > 0) | (pl.col("status") == "failed"))
        )
        tried = asked.height
        written = tuple(usage_counter(judge).text(t) for t in asked["reference"].drop_nulls())
    calls = _frame(
        [part for d in dirs for part in sorted((d / "llm_calls").glob("*.parquet"))],
        ["stage", "kind", "model", "prompt_version", "key_hash", "tokens_out", "error"],
    )
    replies: dict[tuple[str, str], Reply] = {}
    if calls is not None:
        answered = (
            calls.filter(
                (pl.col("model") == judge)
                & (pl.col("kind") == "completion")
                & pl.col("error").is_null()
                & pl.col("tokens_out").is_not_null()
                & pl.col("prompt_version").is_not_null()
            )
            .unique(subset=["stage", "prompt_version", "key_hash"], keep="first")
            .group_by("stage", "prompt_version")
            .agg(pl.len().alias("calls"), pl.col("tokens_out").mean().alias("mean"))
        )
        for row in answered.iter_rows(named=True):
            replies[(row["stage"], row["prompt_version"])] = Reply(row["calls"], row["mean"])
    return History(
        judge,
        runs=tuple(r.run_id for r in found),
        verdicts=0 if ok is None else ok.height,
        relevant=0 if ok is None else int(ok["relevant"].sum()),
        comparisons=0 if decided is None else decided.height,
        ties=0 if decided is None else int((decided["outcome"] == "tie").sum()),
        replies=replies,
        reference_tokens=written,
        references_tried=tried,
    )


def price(model: str, tokens_in: float, tokens_out: float) -> float | None:
    """USD for the tokens from litellm's price map; 0 for in-process models; None if unknown.

    litellm answers 0 for models of some providers that its map does not hold (ollama): only a
    model the map holds a per-token price for gets a figure, so an unknown price is never $0.
    """
    if provider_record(model).free:
        return 0.0
    names = (model, model.split("/", 1)[-1])
    if not any(
        (litellm.model_cost.get(n) or {}).get("input_cost_per_token") is not None for n in names
    ):
        return None
    try:
        cost_in, cost_out = litellm.cost_per_token(
            model=model, prompt_tokens=round(tokens_in), completion_tokens=round(tokens_out)
        )
    except Exception:
        return None
    return float(cost_in) + float(cost_out)


__all__ = [
    "BUNDLED_RECORDS",
    "HISTORY_RUNS",
    "RECORD_FORMAT",
    "History",
    "Reply",
    "find_record",
    "judge_history",
    "load_record",
    "price",
    "record_json",
]
