"""``ragaudit testset``: a checked question set from a corpus, or scenario sets."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from ragaudit.cli._app import (
    ConfigOpt,
    EmbedderOpt,
    JudgeOpt,
    SetOpt,
    _overrides,
    app,
    console,
    err,
    load_paid_config,
)
from ragaudit.errors import RagauditError


@app.command("testset")
def testset_cmd(
    out: Annotated[Path, typer.Argument(help="Question set to write (JSONL).")],
    corpus: Annotated[
        Path | None,
        typer.Option(
            "--corpus",
            help="Corpus: JSONL, Parquet or a folder of .txt/.md (default: collect.corpus).",
        ),
    ] = None,
    size: Annotated[int, typer.Option("--size", min=1, help="Questions to keep.")] = 20,
    scenarios: Annotated[
        Path | None,
        typer.Option(
            "--scenarios-from",
            help="Instead: write the scenario families of this question set with gold relevance.",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Order of plans, random orders.")] = 0,
    config: ConfigOpt = None,
    judge: JudgeOpt = None,
    embedder: EmbedderOpt = None,
    sets: SetOpt = None,
) -> None:
    """Generate a checked question set from a corpus, or scenario sets from a question set."""
    from ragaudit.cache import hold_gateway
    from ragaudit.calibration import make_scenarios
    from ragaudit.dataset import load_questions
    from ragaudit.metrics import Deps
    from ragaudit.search import read_corpus
    from ragaudit.testset import generate_testset, write_question_set

    cfg = load_paid_config(config, _overrides(judge=judge, embedder=embedder, sets=sets))
    source = corpus or cfg.collect.corpus
    if scenarios is not None:
        docs = read_corpus(source) if source is not None else []
        scenario_rows = make_scenarios(load_questions(scenarios), docs, seed=seed)
        write_question_set(
            [r.model_dump(mode="json", exclude_none=True) for r in scenario_rows], out
        )
        console.print(f"{len(scenario_rows)} scenario rows written to {out}")
        return
    if source is None or not Path(source).exists():
        raise RagauditError(f"testset: corpus {source} not found (--corpus or collect.corpus)")
    chunks = [{"id": d.id, "text": d.text, "metadata": d.metadata} for d in read_corpus(source)]
    m = cfg.models
    with hold_gateway(cfg) as gateway, gateway.scope("testset"):
        deps = Deps.of(
            gateway,
            m.judge_model,
            m.embedder_model,
            {},
            temperature=m.temperature,
            max_output_tokens=m.max_output_tokens,
        )
        rows = asyncio.run(
            generate_testset(chunks, deps, generator=m.generator_model, size=size, seed=seed)
        )
    write_question_set(rows, out)
    console.print(
        f"{len(rows)} questions written to {out} "
        f"(generator {cfg.models.generator_model}, checked by {cfg.models.judge_model})"
    )
    if len(rows) < size:
        err.print(f"[bold yellow]WARNING:[/] only {len(rows)} of {size} questions passed the check")
    from ragaudit.manifest import judge_warnings

    for warning in judge_warnings(cfg):
        console.print(f"[bold yellow]WARNING:[/] {warning}")
