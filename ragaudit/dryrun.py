"""Dry-run estimates: the calls, tokens and cost a run will need, before any model is asked.

One estimator per stage that calls a model (``estimate_collect``, ``estimate_sort``,
``estimate_ground_truth``, ``estimate_score``), each declared with its stage in the flow's
stage table (``ragaudit.flows.STAGES``), which runs them in stage order over one :class:`Plan`
(:func:`start_plan`, then :func:`finish_plan`); each reads what the earlier ones filled in
(candidate texts, relevant contexts, references) and adds :class:`Line` rows labelled with the
stage names the call log uses (``collect``, ``sort``, ``ground_truth``, ``score:<metric>``).

What is measured and what is assumed:

- Prompts are rendered exactly as the stages send them (the typed prompts of
  :mod:`ragaudit.prompts`, ragas's own prompt templates or our localised ones, each behind the
  gateway's schema message) on the real question, answer and
  candidate texts, and counted as the model's provider will report them (``cache.usage_counter``):
  the ``local`` models by their own tokenizers (Gemma's read from the provider's GGUF with
  no weights loaded, MiniLM's), OpenAI models by their own tiktoken encoding (o200k for
  gpt-4o, gpt-4.1 and the o-series), cl100k for models litellm cannot map, the fake
  provider's own rule for ``fake/...``.
- Candidates come from the configured search without any model call: an engine is searched
  (read only); the local index is searched with BM25 (its ``vector`` and ``hybrid`` modes
  would embed each question, so BM25 over the same table stands in); an empty local index is
  replaced by a throwaway BM25 index of ``collect.corpus`` in a temporary folder, so the dry
  run never writes the run's own index. The system under test is never called: answers from
  an ``entrypoint`` or ``http`` source are assumed ``response_tokens`` long.
- What depends on the judge's answers is read, where it exists, from earlier finished runs
  with the same judge under the runs root (``estimate.judge_history``: their tables and call
  logs, no call): the share of candidates it judged relevant, the share of pairs it left tied, the
  share of the references asked of it that it wrote (metrics that need a reference skip the
  rest) and their length, its reply length per prompt. Without such a run, a judge record
  file of the same judge stands in (``ragaudit record`` writes one from finished runs, to carry
  a judge's record to another machine; the package ships the offline demo judge's, measured on
  the bundled demo, so the demo's first dry run is not left to priors). Where there is no
  record, or where
  ``--assume`` states a value, the :class:`Assumptions` are used; every figure is printed
  with where it came from. Relevant candidates are taken in engine order. Pairwise
  comparison counts come from running the configured ordering strategy on a simulated judge
  that ties as often as the record (or the prior) says.
- Memo hits are not predicted: a re-run of a finished run id costs nothing (Prefect returns
  its stages cached), which the estimate does not try to detect.
"""

from __future__ import annotations

import math
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragaudit.cache import context_window, usage_counter
from ragaudit.config import RunConfig
from ragaudit.conversation import in_context
from ragaudit.dataset import Question, load_questions
from ragaudit.errors import ConfigError
from ragaudit.estimate import History, Reply, find_record, judge_history

if TYPE_CHECKING:
    from ragaudit.judging import Judge
    from ragaudit.query_forms import SearchQuery


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
    reference_share: float = 1.0
    """Share of the references the judge sets out to write that it writes (it may find the
    contexts insufficient); metrics that need a reference skip the rest."""
    verdict_tokens: int = 40
    """Reply of a one-verdict judge call (relevance, pairwise, context precision)."""
    statement_tokens: int = 25
    """Reply tokens per statement (statement extraction, verdicts, classifications)."""
    question_tokens: int = 25
    """Reply of a written question: answer relevancy's question generation, a turn's rewrite
    (``collect.query_form: rewrite``)."""
    answer_tokens: int = 150
    """Reply of a ground-truth group answer or merge."""
    tie_share: float = 0.0
    """Share of pairwise comparisons the judge leaves tied (its two orders disagree); ties
    change how many pairs an ordering strategy goes on to ask."""
    orderings: int = 3
    """Random input orders the ordering strategy is simulated on (the mean is taken)."""
    stated: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    """Priors the user stated (``--assume``, or any value other than the default): no
    observation from earlier runs replaces them."""

    def __post_init__(self) -> None:
        differing = {f.name for f in _priors() if getattr(self, f.name) != f.default}
        object.__setattr__(self, "stated", frozenset(self.stated) | differing)

    @classmethod
    def parse(cls, items: list[str] | None) -> Assumptions:
        """``["relevant_share=0.5", ...]`` → Assumptions; an unknown name is a ConfigError."""
        known = {f.name: f.type for f in _priors()}
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
        for share in ("relevant_share", "reference_share", "tie_share"):
            if not 0.0 <= float(values.get(share, 0.0)) <= 1.0:
                raise ConfigError(f"--assume {share}: must lie between 0 and 1")
        return cls(**values, stated=frozenset(values))

    def describe(self) -> list[str]:
        """One ``name=value`` per prior."""
        return [f"{f.name}={getattr(self, f.name)}" for f in _priors()]


def _priors() -> list[Any]:
    """The fields of :class:`Assumptions` that are priors (all but ``stated``)."""
    return [f for f in fields(Assumptions) if f.name != "stated"]


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
    """As the judge is shown them (a turn with its history, bounded)."""
    candidates: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """Per question, (context id, text) in engine order."""
    queries: dict[str, str] = field(default_factory=dict)
    """Per question the engine is asked, the text it searches (``collect.query_form``)."""
    responses: dict[str, str | None] = field(default_factory=dict)
    relevant: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    references: dict[str, str | None] = field(default_factory=dict)
    lines: list[Line] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    history: History | None = None
    """The judge's record in earlier runs (None: not looked up)."""
    shares: dict[str, float] = field(default_factory=dict)
    """Judge-dependent shares read from the record instead of their priors, by prior name."""
    reference_weight: dict[str, float] = field(default_factory=dict)
    """Per question whose reference the run will write: the chance that it is written."""
    observed: dict[tuple[str, str], Reply] = field(default_factory=dict)
    """Replies whose logged length stood in for a prior, by (stage, prompt version)."""
    priors_used: set[str] = field(default_factory=set)
    """Priors used where the record has nothing (reply and reference lengths)."""
    observed_references: int = 0
    """Written references whose mean length stood in for ``reference_tokens``."""
    nuggets: dict[str, int] = field(default_factory=dict)
    """Per question, the nuggets the ground_truth stage is taken to write."""
    stored: dict[str, Question] = field(default_factory=dict)
    """The questions as the set gives them, by id: what the search is asked from (a turn's
    utterance, never the conversation the judge is shown); absent ones are their own."""
    answerability: dict[str, str | None] = field(default_factory=dict)
    """Per labelled question, its label where the set gives one, None where the ground_truth
    stage will judge it."""
    counted_once: set[tuple[str, str]] = field(default_factory=set)
    """(judge, request) of the requests several metrics share, once counted."""

    def share(self, name: str) -> float:
        """The share ``name`` (``relevant_share``, ``tie_share``, ``reference_share``).

        Stated by the user, else what the judge did in earlier runs, else the prior.
        """
        seen = None if self.history is None else getattr(self.history, name)
        if seen is not None and name not in self.assume.stated:
            self.shares[name] = seen
            return float(seen)
        return float(getattr(self.assume, name))

    def reference_tokens(self) -> float:
        """Length of a written reference: the judge's mean in earlier runs, else the prior."""
        written = () if self.history is None else self.history.reference_tokens
        if written and "reference_tokens" not in self.assume.stated:
            self.observed_references = len(written)
            return sum(written) / len(written)
        self.priors_used.add("reference_tokens")
        return float(self.assume.reference_tokens)

    def observed_reply(self, stage: str, prompt_version: str | None, prior: str) -> Reply | None:
        """The judge's logged replies that replace ``prior`` for this prompt, if any.

        ``prompt_version`` None: any of the stage's prompts (ragas's carry the prompt language
        only). A prior the user stated wins over the record; a prior that stays is noted.
        """
        seen = None
        if self.history is not None and prior not in self.assume.stated:
            seen = self.history.reply(stage, prompt_version)
        if seen is None:
            self.priors_used.add(prior)
            return None
        self.observed[(stage, prompt_version or "*")] = seen
        return seen

    def reply_tokens(self, stage: str, prompt_version: str, prior: str) -> float:
        """Tokens of one reply to ``prompt_version``: the judge's logged mean, else ``prior``."""
        seen = self.observed_reply(stage, prompt_version, prior)
        return float(getattr(self.assume, prior)) if seen is None else seen.mean_tokens

    def line(self, stage: str, step: str, model: str, kind: str = "completion") -> Line:
        """The line for (stage, step, model), created on first use (a jury's judges apart)."""
        for existing in self.lines:
            if (existing.stage, existing.step, existing.model) == (stage, step, model):
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
    evidence: list[str] = field(default_factory=list)
    """Where each judge-dependent figure came from: the judge's record, --assume, or a prior."""
    history: History | None = None

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


def _prompt_tokens(model: str, messages: list[dict[str, Any]]) -> int:
    return usage_counter(model).prompt(messages)


def _text_tokens(model: str, text: str) -> int:
    return usage_counter(model).text(text)


def _chat(system: str, user: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


_PLACEHOLDER_CHARS = 1 << 20  # a bound, should a counter count a text as no tokens at all


def _placeholder(tokens: float, language: str, model: str, like: str = "") -> str:
    """Text of about ``tokens`` of ``model``'s tokens, standing in for one the run will produce.

    Cut from ``like`` (texts the run's one will resemble: a reference is written from the
    relevant contexts) repeated as needed, so it tokenizes like real text in the question's
    language; a repeated single character or word merges into few tokens in a large
    vocabulary.
    """
    want = max(0, round(tokens))
    if not want:
        return ""
    base = " ".join(like.split()) or ("参考答案的内容" if language == "zh" else "the reference")
    text = base
    while _text_tokens(model, text) < want and len(text) < _PLACEHOLDER_CHARS:
        text = f"{text} {text}"
    lo, hi = 1, len(text)
    while lo < hi:  # the shortest prefix holding ``want`` tokens
        mid = (lo + hi) // 2
        if _text_tokens(model, text[:mid]) < want:
            lo = mid + 1
        else:
            hi = mid
    return text[:lo]


# -- collect ------------------------------------------------------------------------------


def _bm25(config: RunConfig) -> RunConfig:
    """``config`` searching by BM25 alone: the dry run embeds no question to search."""
    return config.model_copy(update={"collect": config.collect.model_copy(update={"mode": "bm25"})})


async def _queries(plan: Plan, todo: list[Question]) -> dict[str, SearchQuery]:
    """What each question searches under ``collect.query_form``; rewrites counted, not asked.

    The rewrite's own plan (``query_forms.search_queries`` on a counting judge) gives every
    request the stage sends; a rewrite not asked is searched as its ``history`` form, the
    form a failed rewrite falls back to.
    """
    from ragaudit.judging import CountingJudge, Judge, PlannedRequest
    from ragaudit.prompts.rewrite import REWRITE
    from ragaudit.query_forms import search_queries

    config = plan.config
    requests: list[PlannedRequest] = []
    sizer = Judge.from_config(config.models, None, 1)  # type: ignore[arg-type]  # it never calls
    counting = CountingJudge.like(sizer, lambda schema: None, requests)
    queries = await search_queries(todo, config.collect.query_form, config.conversation, counting)
    if requests:
        line = plan.line("collect", "query rewrites", sizer.model)
        for r in requests:
            line.calls += 1
            line.tokens_in += _prompt_tokens(r.model, r.messages)
            line.tokens_out += plan.reply_tokens("collect", REWRITE.key, "question_tokens")
        plan.notes.append(
            f"collect: {len(requests)} turns rewritten by the judge (query_form rewrite); "
            "searched here in their history form (the rewrites are not asked)"
        )
    return queries


async def _search_dry(plan: Plan) -> None:
    """Candidate texts per question from the configured search, without any model call."""
    from ragaudit.search import capabilities, make_search_backend, read_corpus

    config = plan.config
    cfg = config.collect
    # Searched as the run searches them: from the stored question, not the judge's text of it.
    todo = [plan.stored.get(q.question_id, q) for q in plan.questions if not q.retrieved_contexts]
    for q in plan.questions:
        if q.retrieved_contexts:
            plan.candidates[q.question_id] = [
                (f"{q.question_id}#{i}", t) for i, t in enumerate(q.retrieved_contexts)
            ]
    can = capabilities(cfg.backend)
    if not todo or not can.searches:
        return
    queries = await _queries(plan, todo)
    plan.queries.update({qid: query.text for qid, query in queries.items()})
    temp: tempfile.TemporaryDirectory[str] | None = None
    if not can.embedded:
        backend = make_search_backend(config)
        plan.notes.append(f"collect: searched {cfg.backend} (read only, no model call)")
    else:
        bm25 = _bm25(config)
        backend = make_search_backend(bm25)
        if can.embeds and cfg.mode != "bm25":
            plan.notes.append(
                f"collect: the {cfg.backend} index ranked by BM25 instead of {cfg.mode} "
                "(that would embed each question); candidate counts and lengths are alike"
            )
        if backend.count() == 0:
            if cfg.corpus is None:
                plan.notes.append(f"collect: the {cfg.backend} index is empty and no corpus is set")
                return
            temp = tempfile.TemporaryDirectory(prefix="ragaudit-dryrun-")
            # An embedded backend keeps its index in collect.index_path: a scratch folder there.
            scratch = bm25.collect.model_copy(update={"index_path": Path(temp.name)})
            backend = make_search_backend(bm25.model_copy(update={"collect": scratch}))
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
                hits = await backend.search(
                    queries[q.question_id].text, filters=filters, top_n=cfg.top_n
                )
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
    from ragaudit.answers import AnswerError, ColumnSource

    answers = plan.config.collect.answers
    if answers.source != "column":
        plan.notes.append(
            f"collect: the {answers.source} answer source is not called in a dry run; "
            f"answers assumed {plan.assume.response_tokens} tokens long"
        )
        judge = plan.config.models.judge_model
        for q in plan.questions:
            like = " ".join(t for _, t in plan.candidates.get(q.question_id, []))
            plan.responses[q.question_id] = _placeholder(
                plan.assume.response_tokens, q.language, judge, like
            )
        return
    column = ColumnSource(answers.column)
    for q in plan.questions:
        try:
            plan.responses[q.question_id] = await column.answer(q)
        except AnswerError:  # the run skips this question's answer-based metrics
            plan.responses[q.question_id] = None


async def estimate_collect(plan: Plan) -> None:
    """Candidates, answers, the judge's rewrites of turns, embeddings of local vector search.

    Rewrites only under ``collect.query_form: rewrite``; embeddings only for the local
    backend's vector and hybrid modes.
    """
    await _search_dry(plan)
    await _read_answers(plan)
    cfg = plan.config.collect
    from ragaudit.search import capabilities, make_search_backend, read_corpus

    can = capabilities(cfg.backend)
    if not can.embeds or cfg.mode == "bm25":
        return

    model = plan.config.models.embedder_model
    searched = [q for q in plan.questions if not q.retrieved_contexts]
    queries = plan.line("collect", "query embeddings", model, "embedding")
    queries.calls += len(searched)
    queries.tokens_in += sum(
        _text_tokens(model, plan.queries.get(q.question_id, q.question)) for q in searched
    )
    index = make_search_backend(_bm25(plan.config))
    if index.count() == 0 and cfg.corpus is not None:
        docs = read_corpus(Path(cfg.corpus))
        line = plan.line("collect", "corpus embeddings (empty index)", model, "embedding")
        line.calls += math.ceil(len(docs) / can.embed_batch)
        line.tokens_in += sum(_text_tokens(model, d.text) for d in docs)


# -- sort ---------------------------------------------------------------------------------


def _structured(prompt: Any, inp: Any, language: str) -> list[dict[str, Any]]:
    """What the gateway's structured call sends for a typed prompt (its own message layout)."""
    from ragaudit.cache import structured_messages

    return structured_messages(prompt.output_model, prompt.messages(inp, language))


async def estimate_sort(plan: Plan) -> None:
    """Relevance verdicts per candidate; pairwise comparisons of the assumed relevant ones.

    Each candidate's grade is asked as the sort stage's plan says (``judging.grade_plan``):
    every grading model (the jury, else the judge) ``judge_repeats`` times; a jury's members
    each get their line, counted with their own tokenizer.
    """
    from ragaudit.judging import (
        Judge,
        OrderOptions,
        grade_plan,
        plan_grades,
        plan_order,
        sample_judges,
    )

    config = plan.config
    cfg = config.sort
    if not cfg.enabled:
        for q in plan.questions:
            plan.relevant[q.question_id] = plan.candidates.get(q.question_id, [])
        return
    judge = config.models.judge_model
    share = plan.share("relevant_share")
    ties = plan.share("tie_share")
    ordering = OrderOptions.from_sort(cfg)
    models = config.models
    samples = grade_plan(
        models.graders, models.judge_repeats, models.temperature, config.score.sampling_temperature
    )
    jury = bool(models.jury)
    verdict_lines = {
        s.model: plan.line(
            "sort", f"relevance verdicts ({s.model})" if jury else "relevance verdicts", s.model
        )
        for s in samples
    }
    # Created first so the table keeps its row even when no question has a pair to compare.
    plan.line("sort", f"pairwise comparisons ({cfg.strategy})", judge)
    # The grading's own plan: every sample's requests as grade_candidates sends them.
    sizer = Judge.from_config(models, None, 1)  # type: ignore[arg-type]  # it never calls
    graders = sample_judges(sizer, samples, models)
    for q in plan.questions:
        cands = plan.candidates.get(q.question_id, [])[: cfg.max_candidates or None]
        requests = await plan_grades(
            graders,
            {q.question_id: q},
            {q.question_id: [{"context_id": cid, "text": text} for cid, text in cands]},
            per_call=cfg.grade_batch,
        )
        for r in requests:
            verdicts = verdict_lines[r.model]
            verdicts.calls += 1
            verdicts.tokens_in += _prompt_tokens(r.model, r.messages)
            verdicts.tokens_out += plan.reply_tokens("sort", r.prompt_version, "verdict_tokens")
        relevant = cands[: round(share * len(cands))]
        plan.relevant[q.question_id] = relevant

        def tokens(prompt: Any, inp: Any, q: Question = q) -> int:
            return _prompt_tokens(judge, _structured(prompt, inp, q.language))

        # The ordering's own plan (judging.plan_order), priced here.
        for step in await plan_order(
            ordering,
            q,
            [t for _, t in relevant],
            tokens,
            orderings=plan.assume.orderings,
            tie_share=ties,
        ):
            line = plan.line("sort", step.step, judge)
            line.calls += step.calls
            line.tokens_in += step.tokens_in
            line.tokens_out += step.calls * plan.reply_tokens(
                "sort", step.prompt_key, "verdict_tokens"
            )
    plan.notes.append(
        f"sort: the first {share:.0%} of each question's candidates taken as relevant; "
        f"comparisons counted by running '{cfg.strategy}' on a simulated judge that leaves "
        f"{ties:.0%} of pairs tied, each asked in "
        + ("both orders" if cfg.both_orders else "one order")
    )


# -- ground_truth -------------------------------------------------------------------------


async def estimate_ground_truth(plan: Plan) -> None:
    """Group answers over the relevant contexts packed into the window, then merge rounds."""
    from ragaudit.judging import Judge
    from ragaudit.prompts.reference import ANSWER_GROUP, MERGE
    from ragaudit.reference import ReferenceWriter
    from ragaudit.windowing import QuestionJudge

    config = plan.config
    cfg = config.ground_truth
    for q in plan.questions:
        plan.references[q.question_id] = q.reference
        if q.answerability is not None:
            plan.answerability[q.question_id] = q.answerability
    if not cfg.enabled:
        return
    # The writers size and render prompts without a gateway, which only answering uses.
    sizer = Judge.from_config(config.models, None, 1)  # type: ignore[arg-type]
    await _estimate_answerability(plan, sizer)
    judge = sizer.model
    answers = plan.line("ground_truth", f"answers ({cfg.mode})", judge)
    merges = plan.line("ground_truth", "merges", judge)
    reference_tokens = plan.reference_tokens()
    written_share = plan.share("reference_share")
    for q in plan.questions:
        if q.reference and not cfg.overwrite_reference:
            continue
        contexts = [(i, t) for i, t in plan.relevant.get(q.question_id, []) if t and t.strip()]
        if not contexts:
            plan.references[q.question_id] = None
            continue
        writer = ReferenceWriter(
            QuestionJudge(sizer, q.question, q.language, cfg.answer_tokens, cfg.reserve_tokens)
        )
        # Every partial answer as long as a reply, cut from the contexts it is written from.
        like = " ".join(t for _, t in contexts)
        answer_tokens = plan.reply_tokens("ground_truth", ANSWER_GROUP.key, "answer_tokens")
        planned = writer.plan(
            contexts, cfg.mode, cfg.seed, _placeholder(answer_tokens, q.language, judge, like)
        )
        if planned is None:
            plan.references[q.question_id] = None
            continue
        for messages in planned.answers:
            answers.calls += 1
            answers.tokens_in += _prompt_tokens(judge, messages)
            answers.tokens_out += answer_tokens
        for messages in planned.merges:
            merges.calls += 1
            merges.tokens_in += _prompt_tokens(judge, messages)
            merges.tokens_out += plan.reply_tokens("ground_truth", MERGE.key, "answer_tokens")
        plan.references[q.question_id] = _placeholder(reference_tokens, q.language, judge, like)
        plan.reference_weight[q.question_id] = written_share
    if cfg.nuggets:
        _estimate_nuggets(plan, sizer)


async def _estimate_answerability(plan: Plan, sizer: Judge) -> None:
    """The label call of every turn the stage will judge, as the stage asks it.

    :func:`judge_answerability` runs through a :class:`CountingJudge`, so the passages are
    fitted to the window as in a run.
    """
    from ragaudit.answerability import judge_answerability, should_judge
    from ragaudit.judging import CountingJudge, PlannedRequest

    cfg = plan.config.ground_truth
    judge = sizer.model
    requests: list[PlannedRequest] = []
    counting = CountingJudge.like(sizer, lambda schema: None, requests)
    for q in plan.questions:
        if not should_judge(q, cfg.answerability):
            continue
        plan.answerability[q.question_id] = None
        passages = [t for _, t in plan.relevant.get(q.question_id, []) if t and t.strip()]
        await judge_answerability(
            counting, q.question, q.language, passages, cfg.answerability_passages
        )
    if requests:
        line = plan.line("ground_truth", "answerability", judge)
        for request in requests:
            line.calls += 1
            line.tokens_in += _prompt_tokens(judge, request.messages)
            line.tokens_out += plan.assume.verdict_tokens


def _estimate_nuggets(plan: Plan, sizer: Judge) -> None:
    """Nugget extraction as :meth:`NuggetExtractor.plan` asks it.

    A nugget per relevant context (``statement_tokens`` long) stands in for what the map step
    writes.
    """
    from ragaudit.nuggets import NuggetExtractor
    from ragaudit.prompts.nuggets import EXTRACT, MERGE_NUGGETS
    from ragaudit.windowing import QuestionJudge

    cfg = plan.config.ground_truth
    judge = sizer.model
    maps = plan.line("ground_truth", "nugget extraction", judge)
    merges = plan.line("ground_truth", "nugget merges", judge)
    for q in plan.questions:
        contexts = [(i, t) for i, t in plan.relevant.get(q.question_id, []) if t and t.strip()]
        extractor = NuggetExtractor(
            QuestionJudge(sizer, q.question, q.language, cfg.nugget_tokens, cfg.reserve_tokens),
            max_nuggets=cfg.max_nuggets,
        )
        like = " ".join(t for _, t in contexts)
        nugget = _placeholder(plan.assume.statement_tokens, q.language, judge, like)
        planned = extractor.plan(contexts, nugget)
        if planned is None:
            continue
        for messages in planned.answers:
            maps.calls += 1
            maps.tokens_in += _prompt_tokens(judge, messages)
            maps.tokens_out += plan.reply_tokens("ground_truth", EXTRACT.key, "answer_tokens")
        for messages in planned.merges:
            merges.calls += 1
            merges.tokens_in += _prompt_tokens(judge, messages)
            merges.tokens_out += plan.reply_tokens(
                "ground_truth", MERGE_NUGGETS.key, "answer_tokens"
            )
        plan.nuggets[q.question_id] = min(len(contexts), cfg.max_nuggets)


# -- score --------------------------------------------------------------------------------


@dataclass
class _ScoreSheet:
    """The dry run's side of a metric's cost model: one metric's lines, one row at a time."""

    plan: Plan
    stage: str
    judge: str
    embedder: str
    weight: float = 1.0
    """The current row's weight: the chance that the metric scores it."""
    repeats: int = 1
    """Judge repeats of a judged metric: each of its calls counted this many times. Its
    embeddings too: most embed what the judge wrote (answer relevancy's generated questions),
    which differs per repeat; the few that embed a fixed text are memoised, an over-count."""

    @property
    def assume(self) -> Assumptions:
        return self.plan.assume

    def tally(
        self,
        step: str,
        kind: str,
        calls: float,
        tokens_in: float,
        tokens_out: float,
        prior: str | None = None,
    ) -> None:
        if kind == "completion" and prior is not None:
            # The call log labels a metric's judge calls with the prompt language only, so
            # the record gives one mean reply over all of the metric's steps.
            seen = self.observed_reply(prior)
            if seen is not None:
                tokens_out = calls * seen
        model = self.judge if kind == "completion" else self.embedder
        line = self.plan.line(self.stage, step, model, kind)
        weight = self.weight * self.repeats
        line.calls += weight * calls
        line.tokens_in += weight * tokens_in
        line.tokens_out += weight * tokens_out

    def observed_reply(self, prior: str) -> float | None:
        seen = self.plan.observed_reply(self.stage, None, prior)
        return None if seen is None else seen.mean_tokens

    def chat_tokens(self, system: str, user: str) -> int:
        return _prompt_tokens(self.judge, _chat(system, user))

    def text_tokens(self, model: str, text: str) -> int:
        return _text_tokens(model, text)

    def once(self, key: str) -> bool:
        seen = (self.judge, key)
        if seen in self.plan.counted_once:
            return False
        self.plan.counted_once.add(seen)
        return True


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
                nuggets=_nugget_placeholders(plan, q) if plan.config.ground_truth.nuggets else None,
                # A label the stage will judge is taken as "answerable": the refusal check and
                # the metric both asked, the most a labelled row can cost.
                answerability=(
                    plan.answerability[q.question_id] or "answerable"
                    if q.question_id in plan.answerability
                    else None
                ),
            )
        )
    return out


def _nugget_placeholders(plan: Plan, q: Any) -> list[dict[str, Any]]:
    """The nuggets the ground_truth stage is taken to write for ``q``, as placeholder facts."""
    judge = plan.config.models.judge_model
    like = " ".join(t for _, t in plan.candidates.get(q.question_id, [])[:3])
    text = _placeholder(plan.assume.statement_tokens, q.language, judge, like)
    return [
        {"text": text, "importance": "vital", "context_ids": []}
        for _ in range(plan.nuggets.get(q.question_id, 0))
    ]


async def estimate_score(plan: Plan) -> None:
    """Per metric and row: the metric's own cost model on the row's top-k contexts.

    k is fitted to each judge's window by the score stage's own function; a judged metric is
    estimated once per grader (the jury, else the judge) and its completions counted once per
    judge repeat, as the score stage's panel asks them.
    """
    from ragaudit.judging import Judge
    from ragaudit.metrics import (
        SETTLED_BY_CHECK,
        Skip,
        is_conditioned,
        refusal_check_cost,
        resolve,
    )
    from ragaudit.scoring import fit_k, make_panel

    config = plan.config
    models = config.models
    # The metrics size and render prompts without a gateway, which only answering uses.
    sizer = Judge.from_config(models, None, 1)  # type: ignore[arg-type]
    samples = _samples(plan)
    for name in config.score.metrics:
        try:
            m = resolve(name, config.score.model_dump())
        except (KeyError, ValueError) as exc:
            raise ConfigError(f"score.metrics: {exc.args[0]}") from None
        priced = m.needs_llm or m.needs_embeddings
        if not (priced or m.conditioned):
            continue
        if priced and m.cost is None:
            plan.notes.append(f"score:{name}: rough estimate (one call of its prompt per row)")
        panel = make_panel(config, sizer, name)
        # A metric without a judge is scored once, whatever the panel: its first member's deps.
        judges = panel.judges if m.needs_llm else panel.judges[:1]
        for deps, window in judges:
            sheet = _ScoreSheet(plan, f"score:{name}", deps.judge, deps.embedder)
            sheet.repeats = panel.repeats if m.needs_llm else 1
            for s in samples:
                if s.response is not None and is_conditioned(m, s, deps):
                    # The refusal check first; on these labels its verdict is the value.
                    sheet.weight = 1.0
                    refusal_check_cost(s, deps, sheet)
                    if s.answerability in SETTLED_BY_CHECK:
                        continue
                if not priced or m.missing(s):
                    continue
                # A reference the run has yet to write exists only with the judge's written
                # share.
                needs_reference = m.missing(replace(s, reference=None))
                weight = plan.reference_weight.get(s.question_id, 1.0) if needs_reference else 1.0
                sheet.weight = weight
                if "contexts" in m.inputs and m.needs_llm:
                    k, _ = fit_k(m, s, deps, window)
                    if k == 0:
                        continue
                    s = replace(s, contexts=s.contexts[:k], context_ids=s.context_ids[:k])
                try:
                    m.estimate(s, deps, sheet)
                except Skip:
                    continue


def start_plan(
    config: RunConfig,
    assume: Assumptions | None = None,
    *,
    use_history: bool = True,
    records: list[Path] | None = None,
) -> Plan:
    """The plan the stage estimators fill in: the run's questions and the judge's record.

    ``use_history``: read the judge's record in earlier runs under ``config.runs_root``
    (``estimate.judge_history``) where a prior would stand; when no finished run there used the
    judge, the first judge record of it among ``records`` and the bundled ones
    (``estimate.find_record``) stands in.
    """
    assume = assume or Assumptions()
    judge = config.models.judge_model
    # Counted as the judge is shown them: a turn of a conversation with its history, bounded.
    # The judge's prompt budget as ``Judge.from_config`` works it out: its window less its answer.
    models = config.models
    budget = context_window(judge, models.judge_context_window) - models.max_output_tokens
    stored = load_questions(config.questions, limit=config.limit)
    questions = [in_context(q, config.conversation, judge, budget) for q in stored]
    plan = Plan(config, assume, questions, stored={q.question_id: q for q in stored})
    if use_history:
        plan.history = judge_history(Path(config.runs_root), judge)
        if not plan.history.runs:
            plan.history = find_record(judge, records) or plan.history
            if plan.history.about:
                plan.notes.append(f"judge record {plan.history.about}")
    return plan


def finish_plan(plan: Plan, stages: list[str] | None = None) -> Estimate:
    """The estimate of a plan every stage estimator has filled in.

    ``stages`` limits the lines to those stages (the earlier ones were still estimated, since
    later ones read what they produce).
    """
    lines = [line for line in plan.lines if stages is None or line.stage.split(":", 1)[0] in stages]
    used = {line.model for line in lines if line.calls}
    plan.notes.extend(
        f"tokens of {model} counted with {usage_counter(model).rule}" for model in sorted(used)
    )
    return Estimate(lines, plan.assume, plan.notes, _evidence(plan), plan.history)


def _runs_text(history: History) -> str:
    n = len(history.runs)
    runs = f"{n} earlier run{'s' if n != 1 else ''} with judge {history.judge}"
    return f"{runs}, read from {history.source}" if history.source else runs


def _share_line(what: str, name: str, detail: str, plan: Plan, nothing: str) -> str:
    """Where a judge-dependent share came from: stated, observed, or a plainly said prior."""
    value = getattr(plan.assume, name)
    if name in plan.assume.stated:
        return f"{what} {value:g}: stated (--assume)"
    observed = plan.shares.get(name)
    if observed is not None and plan.history is not None:
        return f"{what} {observed:.2f} (observed in {_runs_text(plan.history)}: {detail})"
    return (
        f"{what} {value:g}: a prior, not an observation — {nothing} "
        f"(state one with --assume {name}=…)"
    )


def _evidence(plan: Plan) -> list[str]:
    """One line per judge-dependent figure: its value and where it came from."""
    assume, history = plan.assume, plan.history
    judge = plan.config.models.judge_model
    nothing = (
        "earlier runs not read"
        if history is None
        else f"no earlier finished run with judge {judge} under {plan.config.runs_root} shows it"
        + (f", nor {history.source}" if history.source else "")
    )
    out = []
    h = history or History(judge)
    if plan.config.sort.enabled:
        out.append(
            _share_line(
                "relevant share",
                "relevant_share",
                f"{h.relevant} of {h.verdicts} relevance verdicts said relevant",
                plan,
                nothing,
            )
        )
        if (
            any(
                line.stage == "sort" and line.step.startswith("pairwise") and line.calls
                for line in plan.lines
            )
            or "tie_share" in plan.shares
        ):
            out.append(
                _share_line(
                    "tied pairs",
                    "tie_share",
                    f"{h.ties} of {h.comparisons} pairwise comparisons tied",
                    plan,
                    nothing,
                )
            )
    if plan.reference_weight:
        out.append(
            _share_line(
                "references written",
                "reference_share",
                f"{len(h.reference_tokens)} of {h.references_tried} asked for",
                plan,
                nothing,
            )
        )
    if plan.observed and history is not None:
        seen = ", ".join(
            f"{stage} {version if version != '*' else 'prompts'} {reply.mean_tokens:.1f}"
            f" ({reply.calls} replies)"
            for (stage, version), reply in plan.observed.items()
        )
        out.append(f"reply tokens observed in {_runs_text(history)}: {seen}")
    if plan.observed_references and history is not None:
        written = history.reference_tokens
        out.append(
            f"reference length {sum(written) / len(written):.0f} tokens (observed in "
            f"{_runs_text(history)}: {len(written)} references written)"
        )
    lengths = sorted(plan.priors_used)
    stated = [name for name in lengths if name in assume.stated]
    if stated:
        values = ", ".join(f"{name}={getattr(assume, name)}" for name in stated)
        out.append(f"lengths stated (--assume): {values}")
    priors = [name for name in lengths if name not in assume.stated]
    if priors:
        values = ", ".join(f"{name}={getattr(assume, name)}" for name in priors)
        if plan.observed or plan.observed_references:
            nothing = "the record has none for them"
        out.append(f"lengths from priors, not observations ({nothing}): {values}")
    return out


__all__ = [
    "Assumptions",
    "Estimate",
    "Line",
    "Plan",
    "estimate_collect",
    "estimate_ground_truth",
    "estimate_score",
    "estimate_sort",
    "finish_plan",
    "start_plan",
]
