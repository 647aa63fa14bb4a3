"""Dry-run estimates: the calls, tokens and cost a run will need, before any model is asked.

One estimator per stage, registered in :data:`ESTIMATORS` under the stage's name; they run in
stage order over one :class:`Plan`, each reading what the earlier ones filled in (candidate
texts, relevant contexts, references) and adding :class:`Line` rows labelled with the stage
names the call log uses (``collect``, ``sort``, ``ground_truth``, ``score:<metric>``).

What is measured and what is assumed:

- Prompts are rendered exactly as the stages send them (the typed prompts of
  :mod:`ragaudit.prompts` behind the gateway's schema message; ragas's own prompt templates,
  or our localised ones, behind instructor's schema message) on the real question, answer and
  candidate texts, and counted with the provider's counting rule: litellm's token counter
  (tiktoken's cl100k for models it cannot map), the fake provider's own rule for ``fake/...``.
- Candidates come from the configured search without any model call: an engine is searched
  (read only); the local index is searched with BM25 (its ``vector`` and ``hybrid`` modes
  would embed each question, so BM25 over the same table stands in); an empty local index is
  replaced by a throwaway BM25 index of ``collect.corpus`` in a temporary folder, so the dry
  run never writes the run's own index. The system under test is never called: answers from
  an ``entrypoint`` or ``http`` source are assumed ``response_tokens`` long.
- What depends on the judge's answers uses :class:`Assumptions`, printed with the estimate:
  the share of candidates judged relevant (the engine's first ones are taken), statements per
  answer sentence, the lengths of replies and written references. Pairwise comparison counts
  come from running the configured ordering strategy on a consistent simulated judge.
- Memo hits are not predicted: a re-run of a finished run id costs nothing (Prefect returns
  its stages cached), which the estimate does not try to detect.
"""

from __future__ import annotations

import math
import random
import tempfile
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import litellm

from ragaudit.config import OFFLINE_EMBEDDER, RunConfig
from ragaudit.dataset import Question, load_questions
from ragaudit.errors import ConfigError

PROVIDERS_HERE = ("fake", "local")
"""Providers that run in this process: no bill, whatever litellm's price map says."""


@dataclass(frozen=True)
class Assumptions:
    """Priors for what only the judge's answers decide; each one printed with the estimate."""

    relevant_share: float = 0.3
    """Share of a question's candidates the judge finds relevant (the engine's first ones)."""
    statements_per_sentence: float = 1.0
    """Statements the judge extracts per sentence of an answer (faithfulness)."""
    response_tokens: int = 120
    """Length of an answer the dry run cannot read (entrypoint or http sources)."""
    reference_tokens: int = 150
    """Length of a reference the ground_truth stage will write."""
    verdict_tokens: int = 40
    """Reply of a one-verdict judge call (relevance, pairwise, context precision)."""
    statement_tokens: int = 25
    """Reply tokens per statement (statement extraction, verdicts, classifications)."""
    question_tokens: int = 25
    """Reply of answer relevancy's question generation."""
    answer_tokens: int = 150
    """Reply of a ground-truth group answer or merge."""
    orderings: int = 3
    """Random input orders the ordering strategy is simulated on (the mean is taken)."""

    @classmethod
    def parse(cls, items: list[str] | None) -> Assumptions:
        """``["relevant_share=0.5", ...]`` → Assumptions; an unknown name is a ConfigError."""
        known = {f.name: f.type for f in fields(cls)}
        values: dict[str, Any] = {}
        for item in items or []:
            name, sep, raw = item.partition("=")
            name = name.strip()
            if not sep or name not in known:
                raise ConfigError(
                    f"--assume {item}: expected name=value with name one of {', '.join(known)}"
                )
            try:
                values[name] = int(raw) if known[name] == "int" else float(raw)
            except ValueError:
                raise ConfigError(f"--assume {item}: {raw!r} is not a number") from None
        if not 0.0 <= float(values.get("relevant_share", 0.0)) <= 1.0:
            raise ConfigError("--assume relevant_share: must lie between 0 and 1")
        return cls(**values)

    def describe(self) -> list[str]:
        """One ``name=value`` per prior."""
        return [f"{f.name}={getattr(self, f.name)}" for f in fields(self)]


@dataclass
class Line:
    """Calls of one kind in one stage: how many, and their tokens."""

    stage: str
    step: str
    model: str
    kind: str
    calls: float = 0.0
    tokens_in: float = 0.0
    tokens_out: float = 0.0


@dataclass
class Plan:
    """What the stage estimators share: the run's inputs and what earlier stages will produce."""

    config: RunConfig
    assume: Assumptions
    questions: list[Question]
    candidates: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """Per question, (context id, text) in engine order."""
    responses: dict[str, str | None] = field(default_factory=dict)
    relevant: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    references: dict[str, str | None] = field(default_factory=dict)
    lines: list[Line] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def line(self, stage: str, step: str, model: str, kind: str = "completion") -> Line:
        """The line for (stage, step), created on first use."""
        for existing in self.lines:
            if (existing.stage, existing.step) == (stage, step):
                return existing
        new = Line(stage, step, model, kind)
        self.lines.append(new)
        return new


@dataclass
class Estimate:
    """The dry run's result: lines per stage and step, assumptions and notes."""

    lines: list[Line]
    assumptions: Assumptions
    notes: list[str]

    def by_stage(self) -> dict[str, dict[str, float]]:
        """Per call-log stage label: calls, tokens_in and tokens_out summed over its steps."""
        out: dict[str, dict[str, float]] = defaultdict(
            lambda: {"calls": 0.0, "tokens_in": 0.0, "tokens_out": 0.0}
        )
        for line in self.lines:
            row = out[line.stage]
            row["calls"] += line.calls
            row["tokens_in"] += line.tokens_in
            row["tokens_out"] += line.tokens_out
        return dict(out)


# -- counting and prices ------------------------------------------------------------------


def _provider(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else ""


def count_messages(model: str, messages: list[dict[str, Any]]) -> int:
    """Prompt tokens of ``messages`` as ``model``'s provider will report them."""
    if _provider(model) == "fake":
        from ragaudit.cache._fake import count_prompt_tokens

        return count_prompt_tokens(messages)
    from ragaudit.cache import count_prompt

    return count_prompt(model, messages)


def count_text(model: str, text: str) -> int:
    """Tokens of ``text`` (a reply or an embedded text) as ``model``'s provider reports them."""
    if _provider(model) == "fake":
        from ragaudit.cache._fake import count_text_tokens

        return count_text_tokens(text)
    from ragaudit.cache import count_tokens

    return count_tokens(model, text)


def price(model: str, tokens_in: float, tokens_out: float) -> float | None:
    """USD for the tokens from litellm's price map; 0 for in-process models; None if unknown.

    litellm answers 0 for models of some providers that its map does not hold (ollama): only a
    model the map holds a per-token price for gets a figure, so an unknown price is never $0.
    """
    if _provider(model) in PROVIDERS_HERE:
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


def _chat(system: str, user: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _placeholder(tokens: int, language: str) -> str:
    """Text of about ``tokens`` tokens, standing in for a text the run will only produce."""
    return ("字" * tokens) if language == "zh" else " ".join(["word"] * tokens)


# -- collect ------------------------------------------------------------------------------


async def _search_dry(plan: Plan) -> None:
    """Candidate texts per question from the configured search, without any model call."""
    from ragaudit.search import make_backend, read_corpus
    from ragaudit.search._indexing import ENGINES, make_search_backend

    config = plan.config
    cfg = config.collect
    todo = [q for q in plan.questions if not q.retrieved_contexts]
    for q in plan.questions:
        if q.retrieved_contexts:
            plan.candidates[q.question_id] = [
                (f"{q.question_id}#{i}", t) for i, t in enumerate(q.retrieved_contexts)
            ]
    if not todo or cfg.backend == "question_set":
        return
    temp: tempfile.TemporaryDirectory[str] | None = None
    if cfg.backend in ENGINES:
        backend = make_search_backend(config)
        plan.notes.append(f"collect: searched {cfg.backend} (read only, no model call)")
    else:
        bm25 = config.model_copy(update={"collect": cfg.model_copy(update={"mode": "bm25"})})
        backend = make_search_backend(bm25)
        if cfg.mode != "bm25":
            plan.notes.append(
                f"collect: the local index ranked by BM25 instead of {cfg.mode} "
                "(that would embed each question); candidate counts and lengths are alike"
            )
        if backend.count() == 0:
            if cfg.corpus is None:
                plan.notes.append("collect: the local index is empty and no corpus is set")
                return
            temp = tempfile.TemporaryDirectory(prefix="ragaudit-dryrun-")
            backend = make_backend("local", path=Path(temp.name), table=cfg.table, mode="bm25")
            backend.index(read_corpus(Path(cfg.corpus)))
            plan.notes.append(
                f"collect: the index at {cfg.index_path} is empty; searched a throwaway BM25 "
                f"index of {cfg.corpus} (the run's own index is left untouched)"
            )
    field_ = cfg.filter_field
    try:
        for q in todo:
            filters = {field_: q.filters[field_]} if field_ and field_ in q.filters else {}
            try:
                hits = await backend.search(q.question, filters=filters, top_n=cfg.top_n)
            except Exception as exc:  # the real run records it as this question's failure
                plan.notes.append(f"collect: question {q.question_id}: search failed: {exc}")
                hits = []
            plan.candidates[q.question_id] = [(h.id, h.text) for h in hits]
    finally:
        closer = getattr(backend, "aclose", None)
        if closer is not None:
            await closer()
        if temp is not None:
            temp.cleanup()


async def _read_answers(plan: Plan) -> None:
    from ragaudit.answers import AnswerError
    from ragaudit.answers._column import ColumnSource

    answers = plan.config.collect.answers
    if answers.source != "column":
        plan.notes.append(
            f"collect: the {answers.source} answer source is not called in a dry run; "
            f"answers assumed {plan.assume.response_tokens} tokens long"
        )
        for q in plan.questions:
            plan.responses[q.question_id] = _placeholder(plan.assume.response_tokens, q.language)
        return
    column = ColumnSource(answers.column)
    for q in plan.questions:
        try:
            plan.responses[q.question_id] = await column.answer(q)
        except AnswerError:  # the run skips this question's answer-based metrics
            plan.responses[q.question_id] = None


async def estimate_collect(plan: Plan) -> None:
    """Candidates and answers (no judge call); embeddings only for local vector/hybrid search."""
    await _search_dry(plan)
    await _read_answers(plan)
    cfg = plan.config.collect
    if cfg.backend != "local" or cfg.mode == "bm25":
        return
    from ragaudit.search import make_backend, read_corpus
    from ragaudit.search._local import _EMBED_BATCH

    model = plan.config.models.embedder_model
    searched = [q for q in plan.questions if not q.retrieved_contexts]
    queries = plan.line("collect", "query embeddings", model, "embedding")
    queries.calls += len(searched)
    queries.tokens_in += sum(count_text(model, q.question) for q in searched)
    index = make_backend("local", path=cfg.index_path, table=cfg.table, mode="bm25")
    if index.count() == 0 and cfg.corpus is not None:
        docs = read_corpus(Path(cfg.corpus))
        line = plan.line("collect", "corpus embeddings (empty index)", model, "embedding")
        line.calls += math.ceil(len(docs) / _EMBED_BATCH)
        line.tokens_in += sum(count_text(model, d.text) for d in docs)


# -- sort ---------------------------------------------------------------------------------

_comparisons_memo: dict[tuple[str, int, int | None, int], float] = {}


async def simulated_comparisons(
    strategy: str, n: int, top_k: int | None = None, orderings: int = 3
) -> float:
    """Distinct pairs ``strategy`` asks to order ``n`` items, with a consistent judge.

    The mean over ``orderings`` random input orders; ties (which a noisy judge gives) would add
    a few repair comparisons to the ``sample`` strategy.
    """
    from ragaudit.ordering import STRATEGIES

    key = (strategy, n, top_k, orderings)
    if key in _comparisons_memo:
        return _comparisons_memo[key]
    if n < 2:
        return 0.0
    total = 0
    for seed in range(max(1, orderings)):
        items = [f"c{i}" for i in range(n)]
        truth = {item: rank for rank, item in enumerate(random.Random(seed).sample(items, n))}
        asked: set[frozenset[str]] = set()

        async def compare(a: str, b: str) -> int:
            asked.add(frozenset((a, b)))  # noqa: B023  (each ordering has its own set)
            return -1 if truth[a] < truth[b] else 1  # noqa: B023

        await STRATEGIES[strategy](items, compare, top_k=top_k)
        total += len(asked)
    _comparisons_memo[key] = total / max(1, orderings)
    return _comparisons_memo[key]


def _structured(prompt: Any, inp: Any, language: str) -> list[dict[str, Any]]:
    """What the gateway's structured call sends for a typed prompt: its schema message first."""
    from ragaudit.cache._gateway import schema_instruction

    return [
        {"role": "system", "content": schema_instruction(prompt.output_model)},
        *prompt.messages(inp, language),
    ]


async def estimate_sort(plan: Plan) -> None:
    """One relevance verdict per candidate; pairwise comparisons of the assumed relevant ones."""
    from ragaudit.prompts import PAIRWISE, RELEVANCE, PairwiseInput, RelevanceInput

    config = plan.config
    cfg = config.sort
    if not cfg.enabled:
        for q in plan.questions:
            plan.relevant[q.question_id] = plan.candidates.get(q.question_id, [])
        return
    judge = config.models.judge_model
    share = plan.assume.relevant_share
    verdicts = plan.line("sort", "relevance verdicts", judge)
    pairs = plan.line("sort", f"pairwise comparisons ({cfg.strategy})", judge)
    orders = 2 if cfg.both_orders else 1
    for q in plan.questions:
        cands = plan.candidates.get(q.question_id, [])[: cfg.max_candidates or None]
        for _, text in cands:
            messages = _structured(
                RELEVANCE, RelevanceInput(question=q.question, context=text), q.language
            )
            verdicts.calls += 1
            verdicts.tokens_in += count_messages(judge, messages)
            verdicts.tokens_out += plan.assume.verdict_tokens
        relevant = cands[: round(share * len(cands))]
        plan.relevant[q.question_id] = relevant
        n = await simulated_comparisons(
            cfg.strategy, len(relevant), cfg.top_k_exact, plan.assume.orderings
        )
        if not n:
            continue

        def pairwise(first: str, second: str, q: Question = q) -> int:
            inp = PairwiseInput(question=q.question, context_1=first, context_2=second)
            return count_messages(judge, _structured(PAIRWISE, inp, q.language))

        # A comparison's prompt is the empty prompt plus its two contexts: the mean pair costs
        # the empty prompt plus twice the mean context.
        empty = pairwise("", "")
        mean_context = sum(pairwise(t, "") - empty for _, t in relevant) / len(relevant)
        pairs.calls += orders * n
        pairs.tokens_in += orders * n * (empty + 2 * mean_context)
        pairs.tokens_out += orders * n * plan.assume.verdict_tokens
    plan.notes.append(
        f"sort: {share:.0%} of each question's candidates assumed relevant (--assume "
        f"relevant_share=…); comparisons counted by running '{cfg.strategy}' on a consistent "
        "judge, each asked in " + ("both orders" if cfg.both_orders else "one order")
    )


# -- ground_truth -------------------------------------------------------------------------


async def estimate_ground_truth(plan: Plan) -> None:
    """Group answers over the relevant contexts packed into the window, then merge rounds."""
    from ragaudit.cache import context_window, structured_messages
    from ragaudit.prompts.reference import ANSWER_GROUP, MERGE
    from ragaudit.reference import _MIN_USABLE, ReferenceWriter, _Piece

    config = plan.config
    cfg = config.ground_truth
    for q in plan.questions:
        plan.references[q.question_id] = q.reference
    if not cfg.enabled:
        return
    judge = config.models.judge_model
    window = context_window(judge, config.models.judge_context_window)
    answers = plan.line("ground_truth", f"answers ({cfg.mode})", judge)
    merges = plan.line("ground_truth", "merges", judge)
    out_tokens = plan.assume.answer_tokens
    for q in plan.questions:
        if q.reference and not cfg.overwrite_reference:
            continue
        contexts = [(i, t) for i, t in plan.relevant.get(q.question_id, []) if t and t.strip()]
        if not contexts:
            plan.references[q.question_id] = None
            continue
        # The writer sizes and renders prompts without its gateway, which only answering uses.
        writer = ReferenceWriter(
            None,  # type: ignore[arg-type]
            judge,
            q.question,
            q.language,
            window=window,
            answer_tokens=cfg.answer_tokens,
            reserve_tokens=cfg.reserve_tokens,
            temperature=config.models.temperature,
        )
        if writer.usable < _MIN_USABLE:
            plan.references[q.question_id] = None
            continue
        order = list(contexts)
        if cfg.mode == "fast":
            random.Random(cfg.seed).shuffle(order)
        pieces = writer.context_pieces(order)
        groups = [[p] for p in pieces] if cfg.mode == "slow" else writer.map_groups(pieces)
        for group in groups:
            messages = structured_messages(
                ANSWER_GROUP.output_model, writer._render_group(ANSWER_GROUP, group, keep=False)[0]
            )
            answers.calls += 1
            answers.tokens_in += count_messages(judge, messages)
            answers.tokens_out += out_tokens
        # Every partial answer assumed answer_tokens long; merges in rounds, as the writer does.
        text = _placeholder(out_tokens, q.language)
        partials = [
            _Piece(text, [], len(writer.nodes) + i, writer.cost(text)) for i in range(len(groups))
        ]
        while len(partials) > 1:
            rounds = writer.merge_groups(partials)
            if all(len(g) == 1 for g in rounds):
                break
            for group in rounds:
                if len(group) > 1:
                    messages = structured_messages(
                        MERGE.output_model, writer._render_group(MERGE, group, keep=False)[0]
                    )
                    merges.calls += 1
                    merges.tokens_in += count_messages(judge, messages)
                    merges.tokens_out += out_tokens
            base = max(p.node for p in partials) + 1
            partials = [_Piece(text, [], base + i, writer.cost(text)) for i in range(len(rounds))]
        plan.references[q.question_id] = _placeholder(plan.assume.reference_tokens, q.language)


# -- score --------------------------------------------------------------------------------

Tally = Callable[[str, str, float, float, float], None]
"""``tally(step, kind, calls, tokens_in, tokens_out)`` adds to the metric's lines."""
StepModel = Callable[[Any, Any, Plan, Tally], None]
"""How a metric's judge steps cost for one sample: ``steps(sample, deps, plan, tally)``."""


def _ragas_call(prompt: Any, data: Any, judge: str) -> int:
    """Tokens of one ragas judge call: instructor's schema message, then the prompt."""
    from ragaudit.metrics._ragas import ragas_window

    system, user = ragas_window(prompt, data, "joined").messages
    return count_messages(judge, _chat(system, user))


def _faithfulness(s: Any, deps: Any, plan: Plan, tally: Tally) -> None:
    from ragas.metrics.collections.faithfulness import util

    from ragaudit.lang import sentences
    from ragaudit.metrics._ragas import prompt_for
    from ragaudit.prompts.statements import NLI_FAITHFULNESS, STATEMENTS_FAITHFULNESS

    found = sentences(s.response) or [s.response]
    n = max(1, round(len(found) * plan.assume.statements_per_sentence))
    statements = (found * n)[:n]
    gen = prompt_for(util.StatementGeneratorPrompt(), STATEMENTS_FAITHFULNESS, s.language)
    data = util.StatementGeneratorInput(question=s.question, answer=s.response)
    tally(
        "statements",
        "completion",
        1,
        _ragas_call(gen, data, deps.judge),
        n * plan.assume.statement_tokens,
    )
    nli = prompt_for(util.NLIStatementPrompt(), NLI_FAITHFULNESS, s.language)
    data2 = util.NLIStatementInput(context="\n".join(s.contexts), statements=statements)
    tally(
        "verdicts",
        "completion",
        1,
        _ragas_call(nli, data2, deps.judge),
        2 * n * plan.assume.statement_tokens,
    )


def _answer_relevancy(s: Any, deps: Any, plan: Plan, tally: Tally) -> None:
    from ragas.metrics.collections.answer_relevancy.util import (
        AnswerRelevanceInput,
        AnswerRelevancePrompt,
    )

    from ragaudit.metrics._answer_relevancy import check_embedder
    from ragaudit.metrics._ragas import prompt_for
    from ragaudit.prompts.answer_relevancy import ANSWER_RELEVANCE

    check_embedder(s, deps)
    n = int(deps.option("answer_relevancy_strictness", 3))
    prompt = prompt_for(AnswerRelevancePrompt(), ANSWER_RELEVANCE, s.language)
    tokens = _ragas_call(prompt, AnswerRelevanceInput(response=s.response), deps.judge)
    tally("questions", "completion", n, n * tokens, n * plan.assume.question_tokens)
    # The real question, then the generated ones in one request.
    embedded = count_text(deps.embedder, s.question) + n * plan.assume.question_tokens
    tally("embeddings", "embedding", 2, embedded, 0)


def _context_precision(answer_field: str) -> StepModel:
    def steps(s: Any, deps: Any, plan: Plan, tally: Tally) -> None:
        from ragas.metrics.collections.context_precision.util import (
            ContextPrecisionInput,
            ContextPrecisionPrompt,
        )

        from ragaudit.metrics._ragas import prompt_for
        from ragaudit.prompts.context_precision import CONTEXT_PRECISION

        prompt = prompt_for(ContextPrecisionPrompt(), CONTEXT_PRECISION, s.language)
        answer = getattr(s, answer_field) or ""
        for context in s.contexts:
            data = ContextPrecisionInput(question=s.question, context=context, answer=answer)
            tally(
                "verdicts",
                "completion",
                1,
                _ragas_call(prompt, data, deps.judge),
                plan.assume.verdict_tokens,
            )

    return steps


def _context_recall(s: Any, deps: Any, plan: Plan, tally: Tally) -> None:
    from ragas.metrics.collections.context_recall.util import (
        ContextRecallInput,
        ContextRecallPrompt,
    )

    from ragaudit.lang import sentences
    from ragaudit.metrics._ragas import prompt_for
    from ragaudit.prompts.context_recall import CONTEXT_RECALL

    prompt = prompt_for(ContextRecallPrompt(), CONTEXT_RECALL, s.language)
    data = ContextRecallInput(
        question=s.question, context="\n".join(s.contexts), answer=s.reference or ""
    )
    n = max(1, len(sentences(s.reference or "")))
    tally(
        "classifications",
        "completion",
        1,
        _ragas_call(prompt, data, deps.judge),
        2 * n * plan.assume.statement_tokens,
    )


STEP_MODELS: dict[str, StepModel] = {
    "faithfulness": _faithfulness,
    "answer_relevancy": _answer_relevancy,
    "context_precision": _context_precision("reference"),
    "context_precision_without_reference": _context_precision("response"),
    "context_recall": _context_recall,
}
"""Metrics whose judge steps are modelled call by call; other judged metrics get a rough
estimate (one call of their largest prompt per row), said so in the notes."""


def _rough(m: Any) -> StepModel:
    def steps(s: Any, deps: Any, plan: Plan, tally: Tally) -> None:
        texts = [s.question, s.response or "", s.reference or ""]
        if m.needs_llm:
            if m.window is not None:
                spec = m.window(s, deps)
                each = spec.mode == "each"
                base = count_messages(deps.judge, _chat(*spec.messages[:2]))
                ctx = [count_text(deps.judge, c) for c in s.contexts]
                if each:
                    tally("judge (rough)", "completion", len(ctx), len(ctx) * base + sum(ctx), 0)
                else:
                    tally("judge (rough)", "completion", 1, base + sum(ctx), 0)
            else:
                tokens = sum(count_text(deps.judge, t) for t in texts)
                tally("judge (rough)", "completion", 1, tokens, plan.assume.verdict_tokens)
        if m.needs_embeddings:
            tokens = sum(count_text(deps.embedder, t) for t in texts[1:])
            tally("embeddings (rough)", "embedding", 1, tokens, 0)

    return steps


def _samples(plan: Plan) -> list[Any]:
    from ragaudit.metrics import Sample

    top_k = plan.config.score.top_k
    out = []
    for q in plan.questions:
        cands = plan.candidates.get(q.question_id, [])[:top_k]
        out.append(
            Sample(
                question_id=q.question_id,
                question=q.question,
                language=q.language,
                response=plan.responses.get(q.question_id),
                reference=plan.references.get(q.question_id),
                contexts=[t for _, t in cands],
                context_ids=[i for i, _ in cands],
                reference_contexts=q.reference_contexts,
                reference_context_ids=q.reference_context_ids,
            )
        )
    return out


async def estimate_score(plan: Plan) -> None:
    """Per metric and row: its judge steps on the row's top-k contexts (k fitted to the window)."""
    from ragaudit.cache import context_window
    from ragaudit.metrics import Deps, Skip, resolve
    from ragaudit.tasks.score import fit_k

    config = plan.config
    models = config.models
    judge = models.judge_model
    deps = Deps(
        gateway=None,  # type: ignore[arg-type]  # a dry run calls nothing
        judge=judge,
        embedder=models.embedder_model,
        options=config.score.model_dump(),
        temperature=models.temperature,
        max_output_tokens=models.max_output_tokens,
        english_only_embedder=models.embedder_model == OFFLINE_EMBEDDER,
    )
    window = context_window(judge, models.judge_context_window)
    samples = _samples(plan)
    for name in config.score.metrics:
        try:
            m = resolve(name, config.score.model_dump())
        except KeyError as exc:
            raise ConfigError(f"score.metrics: {exc.args[0]}") from None
        if not (m.needs_llm or m.needs_embeddings):
            continue
        steps = STEP_MODELS.get(name)
        if steps is None:
            steps = _rough(m)
            plan.notes.append(f"score:{name}: rough estimate (one call of its prompt per row)")
        stage = f"score:{name}"

        def tally(
            step: str, kind: str, calls: float, t_in: float, t_out: float, stage: str = stage
        ) -> None:
            line = plan.line(stage, step, judge if kind == "completion" else deps.embedder, kind)
            line.calls += calls
            line.tokens_in += t_in
            line.tokens_out += t_out

        for s in samples:
            if m.missing(s):
                continue
            if "contexts" in m.inputs and m.needs_llm:
                k, _ = fit_k(m, s, deps, window)
                if k == 0:
                    continue
                s = replace(s, contexts=s.contexts[:k], context_ids=s.context_ids[:k])
            try:
                steps(s, deps, plan, tally)
            except Skip:
                continue


async def estimate_report(plan: Plan) -> None:
    """The report stage calls no model."""


ESTIMATORS: dict[str, Callable[[Plan], Awaitable[None]]] = {
    "collect": estimate_collect,
    "sort": estimate_sort,
    "ground_truth": estimate_ground_truth,
    "score": estimate_score,
    "report": estimate_report,
}
"""One estimator per stage, in stage order, keyed by the stage's name."""


async def estimate_run(
    config: RunConfig, assume: Assumptions | None = None, stages: list[str] | None = None
) -> Estimate:
    """The calls, tokens and cost ``config``'s run will need, without calling any model.

    ``stages`` limits the lines to those stages; the earlier stages are still estimated, since
    later ones read what they produce.
    """
    assume = assume or Assumptions()
    plan = Plan(config, assume, load_questions(config.questions, limit=config.limit))
    for estimator in ESTIMATORS.values():
        await estimator(plan)
    lines = [line for line in plan.lines if stages is None or line.stage.split(":", 1)[0] in stages]
    return Estimate(lines, assume, plan.notes)


__all__ = [
    "ESTIMATORS",
    "STEP_MODELS",
    "Assumptions",
    "Estimate",
    "Line",
    "Plan",
    "count_messages",
    "count_text",
    "estimate_collect",
    "estimate_ground_truth",
    "estimate_report",
    "estimate_run",
    "estimate_score",
    "estimate_sort",
    "price",
    "simulated_comparisons",
]
