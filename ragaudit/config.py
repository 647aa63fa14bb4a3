"""One frozen configuration for a run, loaded from a YAML/TOML file, the environment and flags.

Precedence, lowest first: defaults, the file, ``RAGAUDIT_*`` environment variables (nested
with ``__``, e.g. ``RAGAUDIT_MODELS__JUDGE``), then CLI flags. Every error names the field.

This module holds the run's core (models, the five stages, scale, cache) and composes it with
the sections of single commands, each defined beside its package in a small module of the base
layer (``_tune_config.py`` beside ``tuning/``, ``_ablate_config.py`` beside ``ablation/``,
``_nightly_config.py`` beside ``reevaluation.py``). Why there and not inside the packages: this
module is a base module (``make layers``) that every package imports, so it can import a
section only from the base layer; and a module inside ``tuning/`` would run the package's
``__init__`` (the gateway, litellm, polars) on every config load. A section module imports only
pydantic and base modules; a new one joins by its import and one field of :class:`RunConfig`
(and its name in the base layer of the layers contract).
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import regex
import yaml
from pydantic import (
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ragaudit._ablate_config import DIMENSIONS, AblateConfig, AblationPoint, parse_size
from ragaudit._audit_config import AuditSection
from ragaudit._conversation_config import ConversationConfig
from ragaudit._nightly_config import NightlyConfig
from ragaudit._section import Section, folder_name, operational
from ragaudit._tune_config import TuneConfig, TuneRange
from ragaudit.errors import ConfigError, clip
from ragaudit.registry import (
    ANSWER_SOURCES,
    HEAD_METHODS,
    METRICS,
    ORDERINGS,
    SEARCH_BACKENDS,
    load_plugins,
)
from ragaudit.runids import new_run_id
from ragaudit.runlock import check_run_id
from ragaudit.secrets import url_password

OFFLINE_JUDGE = "local/gemma-3-270m"
OFFLINE_EMBEDDER = "local/multilingual-e5-small-unpadded"
ENGLISH_ONLY_EMBEDDERS = frozenset({"local/all-minilm-l6-v2"})
"""Embedders that cannot read Chinese: their scores of Chinese rows are skipped, saying why."""
ENV_PREFIX = "RAGAUDIT_"
DEFAULT_RUNS_ROOT = Path("data/runs")
"""Where every command keeps its folders unless told otherwise (``runs_root``, ``--runs-root``)."""


_Frozen = Section


class ModelsConfig(_Frozen):
    """Which models judge, generate and embed, and how hard the gateway may push them."""

    judge: str | None = None
    """litellm model string of the judge (``openai/gpt-4o-mini``, ``ollama/qwen2.5:7b`` …).
    None selects the offline smoke-quality judge."""
    generator: str | None = None
    """Model that writes answers in the built-in reference pipeline; defaults to the judge."""
    embedder: str | None = None
    """litellm embedding model string; None selects the offline multilingual e5-small (zh, en)."""
    judge_context_window: int | None = None
    """Prompt + answer token budget of the judge; None asks litellm, else 8,192."""
    concurrency: int = operational(8, ge=1, le=512)
    """Calls in flight at once per model."""
    max_retries: int = operational(4, ge=0, le=20)
    """Retries of a rate-limited or transient failure before the call fails."""
    max_repairs: int = operational(1, ge=0, le=5)
    """Re-asks of a judge answer that is not valid JSON of its schema, each showing the judge
    its reply and what is wrong with it, before the answer is unscored: one judge answer costs
    at most ``1 + max_repairs`` calls (1: at most two). Applies to every structured judge call,
    ours and ragas's alike."""
    backoff_s: float = operational(1.0, ge=0.0)
    """First backoff delay; doubles each retry (with jitter) unless Retry-After says otherwise."""
    timeout_s: float = operational(120.0, gt=0)
    """Per-request timeout."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature of every judge call."""
    max_output_tokens: int = Field(default=1024, ge=16)
    """Answer budget of one judge call."""
    judge_repeats: int = Field(default=1, ge=1, le=20)
    """Independent samples of every judge request that grades (each metric's judge calls and
    each relevance grade), each memoised under its own key; a row's score is the aggregate of
    its samples and its spread is kept, and the summary reports the judge's self-agreement per
    metric. Samples after the first are asked at ``score.sampling_temperature`` (at temperature
    0 they would repeat one answer). 1: one answer per request, as before."""
    jury: tuple[str, ...] = ()
    """litellm model strings of several judges that each grade what ``judge`` grades (metrics
    and relevance grades; references, nuggets and orderings are still written by ``judge``);
    a row's score aggregates every judge's samples (``score.aggregate``, ``sort.grade_aggregate``),
    each judge's scores are kept and the summary reports the judges' agreement per metric.
    Empty: ``judge`` alone."""
    global_limit: int | None = operational(None, ge=1, le=100_000)
    """Judge calls in flight at once across every worker of a run, held by a Prefect global
    concurrency limit (``ragaudit-judge``; needs a Prefect API). None: only the per-process
    ``concurrency`` applies, at no cost."""

    @field_validator("jury")
    @classmethod
    def _distinct_jurors(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        repeated = sorted({m for m in value if value.count(m) > 1})
        if repeated:
            raise ValueError(
                f"{', '.join(repeated)} listed twice: a jury's members must differ "
                "(use judge_repeats for several samples of one judge)"
            )
        return value

    @property
    def judge_model(self) -> str:
        """The judge actually used."""
        return self.judge or OFFLINE_JUDGE

    @property
    def graders(self) -> tuple[str, ...]:
        """The models that grade: the jury, else the judge alone."""
        return self.jury or (self.judge_model,)

    @property
    def generator_model(self) -> str:
        """The generator actually used."""
        return self.generator or self.judge_model

    @property
    def embedder_model(self) -> str:
        """The embedding model actually used."""
        return self.embedder or OFFLINE_EMBEDDER


class SecretRef(_Frozen):
    """A credential by reference, never the value (which would land in the manifest).

    Names an environment variable or a Prefect Secret block.
    """

    env: str | None = None
    """Environment variable holding the value."""
    secret: str | None = None
    """Prefect Secret block holding the value."""
    prefix: str = ""
    """Text put before the value (``"Bearer "``)."""

    @model_validator(mode="after")
    def _one_reference(self) -> SecretRef:
        if bool(self.env) == bool(self.secret):
            raise ValueError("give exactly one of env (a variable name) or secret (a block name)")
        return self


class HttpAnswerConfig(_Frozen):
    """The system under test as an HTTP endpoint (a deployed QA service)."""

    url: str | None = None
    """Endpoint URL, e.g. ``http://qa.internal:8001/qa``."""
    method: Literal["GET", "POST"] = "GET"
    """HTTP method."""
    params: dict[str, Any] = {"message": "{{ question }}"}
    """Query parameters; values are templates over ``question``, ``question_id``, ``filters``,
    ``language`` and ``metadata`` (e.g. ``company_name: "{{ filters.collection }}"``)."""
    body: dict[str, Any] | None = None
    """JSON body template (POST), rendered leaf by leaf like ``params``."""
    headers: dict[str, str] = {}
    """Plain headers (no secrets here: they would be stored in the manifest)."""
    secret_headers: dict[str, SecretRef] = {}
    """Headers whose values come from an environment variable or a Prefect Secret block."""
    response: Literal["lines", "text", "json"] = "lines"
    """``lines``: streamed lines, the last non-empty one is the answer (a streaming QA service);
    ``text``: the whole body; ``json``: the value at ``json_path``."""
    json_path: str | None = None
    """Where the answer is in a JSON response (``answer``, ``data.choices[0].text``, or with a
    leading ``$.``); with ``lines``, applied to the last line."""
    citations_path: str | None = None
    """Where a JSON response lists the documents its answer cites (``references``,
    ``data.sources``): a list of context ids, or of objects whose ``citation_id_field`` holds
    one; the answer's marker ``[n]`` then cites the n-th entry (json response mode only)."""
    citation_id_field: str = "id"
    """The id's key in each entry of ``citations_path`` when the entries are objects."""
    verify_certs: bool = True
    """Verify the endpoint's TLS certificate."""
    ca_certs: Path | None = None
    """CA bundle that signed the endpoint's certificate."""

    @field_validator("url")
    @classmethod
    def _url_without_credentials(cls, value: str | None) -> str | None:
        if value is not None:
            if not value.startswith(("http://", "https://")):
                raise ValueError("must start with http:// or https://")
            if "@" in value.split("/", 3)[2]:
                raise ValueError("must not hold credentials: use secret_headers")
        return value


class AnswerConfig(_Frozen):
    """Where the system-under-test's answers come from."""

    http: HttpAnswerConfig = HttpAnswerConfig()
    """The HTTP endpoint (source ``http``)."""
    entrypoint: str | None = None
    """``package.module:function`` taking (question, filters) and returning the answer text
    (sync or async); source ``entrypoint``."""
    column: str = "response"
    """Question-set field holding the answer (source ``column``): ``response`` or a key of the
    question's ``metadata``."""
    error_column: str | None = None
    """Source ``column``: a key of the question's ``metadata`` saying why the system gave no
    answer (the ablation's generator writes ``generation_error``); such a question's answer is
    ``failed`` with that error rather than ``skipped``."""
    model: str | None = None
    """The system under test's own model (its generator), when known: used only to warn, in
    the summary, the report and ``compare``, when it is also a judge."""
    source: str = "column"
    """A registered answer source: ``column``, already in the question set; ``entrypoint``,
    call a Python function; ``http``, ask the live system; or a plugin's (named in the
    top-level ``plugins``). An unknown name fails when the config loads, listing the known."""
    options: dict[str, Any] = {}
    """Options of the answer source, checked against its options model when the config loads
    and filled in with its defaults (the built-in sources take their sections above)."""
    concurrency: int = operational(4, ge=1, le=256)
    """Answers fetched at once."""
    retries: int = operational(2, ge=0, le=10)
    """Bounded retries of a failing answer source (timeouts, 5xx, 429, empty answers)."""
    backoff_s: float = operational(0.5, ge=0.0)
    """First retry delay; doubles each retry (a 429's Retry-After wins when longer)."""
    timeout_s: float = operational(120.0, gt=0)
    """Limit of one attempt, streaming included."""

    # Declared after http and entrypoint so that it can see them: the error then names
    # ``source``, the field that asked for what is missing.
    @field_validator("source")
    @classmethod
    def _source_is_configured(cls, value: str, info: ValidationInfo) -> str:
        ANSWER_SOURCES.check(value)
        if value == "http" and "http" in info.data and not info.data["http"].url:
            raise ValueError("source 'http' needs collect.answers.http.url")
        if value == "entrypoint" and "entrypoint" in info.data and not info.data["entrypoint"]:
            raise ValueError("source 'entrypoint' needs collect.answers.entrypoint")
        return value

    @model_validator(mode="after")
    def _source_options(self) -> AnswerConfig:
        try:
            built = ANSWER_SOURCES.build_options(self.source, self.options)
        except ValueError as exc:
            raise ValueError(f"options: {exc}") from None
        object.__setattr__(self, "options", built.model_dump(mode="json"))
        return self


class FieldsConfig(_Frozen):
    """Where a candidate's parts live in an engine document."""

    id: str | None = None
    """Dotted ``_source`` path of the context id; None uses the engine's ``_id``."""
    text: str = "text"
    """Dotted ``_source`` path of the text (e.g. ``metadata.content``)."""
    metadata: str | None = "metadata"
    """Dotted ``_source`` path of the metadata object; None takes every other field."""
    filters: dict[str, str] = {}
    """Question filter key → engine field (e.g. ``collection: collection_info.collect_id``);
    unlisted keys map to ``<metadata>.<key>``."""


class EngineConfig(_Frozen):
    """An Elasticsearch or OpenSearch cluster: connection, credentials by reference, query."""

    hosts: tuple[str, ...] = ("http://127.0.0.1:9200",)
    """Engine URLs, without credentials."""
    index: str = "contexts"
    """Index or alias searched (and written by ``ragaudit index``)."""
    username: str | None = None
    """Basic-auth user name."""
    password_env: str | None = None
    """Environment variable holding the basic-auth password."""
    password_secret: str | None = None
    """Prefect Secret block holding the basic-auth password."""
    api_key_env: str | None = None
    """Environment variable holding the API key (Elasticsearch: the encoded ``id:key``)."""
    api_key_secret: str | None = None
    """Prefect Secret block holding the API key."""
    bearer_env: str | None = None
    """Environment variable holding a bearer token."""
    bearer_secret: str | None = None
    """Prefect Secret block holding a bearer token."""
    ca_certs: Path | None = None
    """CA bundle that signed the engine's certificate."""
    verify_certs: bool = True
    """Verify TLS certificates (turn off only for a lab cluster)."""
    timeout_s: float = operational(30.0, gt=0)
    """Per-request timeout."""
    retries: int = operational(2, ge=0, le=10)
    """Retries of a transient failure (unreachable, timeout, 429, 5xx), with backoff."""
    backoff_s: float = operational(0.5, ge=0.0)
    """First retry delay; doubles each retry."""
    fields: FieldsConfig = FieldsConfig()
    """Field mapping: id, text, metadata, filters."""
    source_excludes: tuple[str, ...] = ("*_embedding",)
    """``_source`` fields never fetched (e.g. the embedding vectors, which are large and unused)."""
    query_template: dict[str, Any] | str | None = None
    """Search body template (mapping or JSON text) over ``question``, ``filters``,
    ``filter_clauses``, ``text_field``, ``top_n``; None is the default bool query (match_phrase
    filter + match boost 8). Rendered leaf by leaf: a question can never change its shape."""
    page_size: int = Field(default=1000, ge=1, le=10_000)
    """Most hits per request; ``collect.top_n`` beyond it pages."""
    paging: Literal["auto", "pit", "scroll"] = "auto"
    """``pit``: search_after over a point in time; ``scroll``; ``auto``: pit on Elasticsearch,
    scroll on OpenSearch (every version has it; PIT needs 2.4)."""
    keep_alive: str = "2m"
    """How long the engine keeps a point in time or scroll between pages."""
    pit_tiebreaker: str = "_shard_doc"
    """Sort field breaking score ties between point-in-time pages."""
    concurrency: int = operational(8, ge=1, le=256)
    """Searches in flight at once."""
    analyzer: str | None = None
    """Analyzer of the text field when ``ragaudit index`` creates the index (``cjk``,
    ``ik_max_word`` …); None: the engine's default."""
    index_settings: dict[str, Any] | None = None
    """Full index-creation body for ``ragaudit index`` (replaces the generated mappings)."""
    template_params: dict[str, Any] = {}
    """Values the query template reads as ``params`` (``"{{ params.boost }}"``); ``ragaudit
    tune`` sets them per variant (``tune.params``)."""

    @field_validator("hosts")
    @classmethod
    def _hosts_without_credentials(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("at least one engine URL is needed")
        for host in value:
            if "@" in host.split("/", 3)[2 if "//" in host else 0]:
                raise ValueError(
                    "a host must not hold credentials: use username with password_env or "
                    "password_secret"
                )
        return value

    @model_validator(mode="after")
    def _one_kind_of_auth(self) -> EngineConfig:
        kinds = [
            name
            for name, refs in (
                ("password", (self.password_env, self.password_secret)),
                ("api_key", (self.api_key_env, self.api_key_secret)),
                ("bearer", (self.bearer_env, self.bearer_secret)),
            )
            if any(refs)
        ]
        if len(kinds) > 1:
            raise ValueError(f"configure one kind of credential, not {' and '.join(kinds)}")
        for name, env, block in (
            ("password", self.password_env, self.password_secret),
            ("api_key", self.api_key_env, self.api_key_secret),
            ("bearer", self.bearer_env, self.bearer_secret),
        ):
            if env and block:
                raise ValueError(f"give {name}_env or {name}_secret, not both")
        return self


QueryForm = Literal["last", "history", "rewrite"]
"""What a turn sends to the search backend (``collect.query_form``; ``ragaudit.query_forms``)."""


class CollectConfig(_Frozen):
    """Stage 1: candidates from the search backend, answers from the system."""

    backend: str = "local"
    """A registered search backend: ``local`` is embedded (no server); ``elasticsearch`` and
    ``opensearch`` take their section below; ``question_set`` takes each question's
    ``retrieved_contexts`` as its candidates in the order given; or a plugin's (named in the
    top-level ``plugins``). An unknown name fails when the config loads, listing the known."""
    options: dict[str, Any] = {}
    """Options of the search backend, checked against its options model when the config loads
    and filled in with its defaults (the built-in backends take their sections below)."""
    index_path: Path = Path("data/index")
    """Folder of the local backend's on-disk index."""
    table: str = "contexts"
    """Table name inside the local backend's folder."""
    corpus: Path | None = None
    """Corpus indexed into the backend on first use when its index is empty (JSONL, Parquet or
    a folder of .txt/.md; ``ragaudit index`` does the same with chunking options)."""
    top_n: int = Field(default=200, ge=1, le=10_000)
    """Candidates fetched per question."""
    filter_field: str | None = "collection"
    """Key of the question's ``filters`` that constrains the search (e.g. a collection id)."""
    query_form: QueryForm = "last"
    """What a turn of a conversation sends to the search backend: ``last``, the utterance
    alone; ``history``, the conversation's user turns (at most ``conversation.max_history_turns``
    earlier ones), oldest first, then the utterance; ``rewrite``, the question's ``rewrite``
    field, else the judge's model rewriting the turn as a question that stands alone (memoised;
    a rewrite that fails searches the ``history`` form and says so on the question's
    ``retrieval`` row). The judge always sees the turn with its history; a question without a
    history searches its text under every form. ``tune.variants`` compares forms."""
    mode: Literal["bm25", "vector", "hybrid"] = "bm25"
    """Local backend ranking."""
    rrf_k: int = Field(default=60, ge=1, le=10_000)
    """Local backend, ``hybrid``: reciprocal-rank fusion's k (small values favour each list's
    first hits)."""
    vector_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    """Local backend, ``hybrid``: the vector list's weight in the fusion (BM25's is the rest);
    0.5 weighs them equally, the plain fusion's order."""
    elasticsearch: EngineConfig = EngineConfig()
    """The Elasticsearch cluster (backend ``elasticsearch``)."""
    opensearch: EngineConfig = EngineConfig()
    """The OpenSearch cluster (backend ``opensearch``)."""
    answers: AnswerConfig = Field(default_factory=AnswerConfig)
    """Answer source."""

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        return SEARCH_BACKENDS.check(value)

    @model_validator(mode="after")
    def _backend_options(self) -> CollectConfig:
        try:
            built = SEARCH_BACKENDS.build_options(self.backend, self.options)
        except ValueError as exc:
            raise ValueError(f"options: {exc}") from None
        # Frozen: the validated options replace the given ones before anyone reads them.
        object.__setattr__(self, "options", built.model_dump(mode="json"))
        return self


class SortConfig(_Frozen):
    """Stage 2: LLM-judged ground-truth order of the candidates."""

    enabled: bool = True
    """Skip the stage entirely when false."""
    strategy: str = "sample"
    """``order: full``: a registered pairwise ordering (``ragaudit.ordering``): ``sample``,
    parallel sample sort built for a noisy judge; ``insertion``, the classic sequential binary
    insertion; ``merge`` and ``quick``, plain parallel merge rounds and quicksort (for
    comparison); or a plugin's (named in the top-level ``plugins``)."""
    relevant_grade: int = Field(default=2, ge=1, le=3)
    """The lowest relevance grade (0–3) that counts as relevant: 2, TREC's cut, counts a
    candidate relevant when it answers at least in part."""
    grade_batch: int = Field(default=1, ge=1, le=20)
    """Candidates graded per judge call. 1 (the default): a grade depends only on the question,
    the candidate and the judge, so a re-run pays nothing for candidates it has seen. Above 1:
    fewer calls and tokens, grades that depend on their neighbours in the prompt."""
    order: Literal["full", "head", "none"] = "head"
    """How the relevant candidates are ordered after grading: ``full``, all of them by pairwise
    comparisons (``strategy``); ``head``, only the top ``head_k`` exactly, by ``head_method``,
    the rest by grade; ``none``, by grade alone (tied inside a grade)."""
    head_k: int = Field(default=10, ge=1, le=1000)
    """``order: head``: positions ordered exactly from the top."""
    head_method: str = "window"
    """``order: head``: a registered head method (``ragaudit.judging.head_method``):
    ``window``, listwise windows slid from the bottom up (RankGPT's method); ``setwise``, a
    heap whose sifts choose the best of ``set_size`` candidates; or a plugin's."""
    window: int = Field(default=20, ge=2, le=100)
    """``head_method: window``: candidates per listwise call (the window moves by half)."""
    head_votes: int = Field(default=2, ge=0, le=10)
    """``head_method: window``: further listwise answers asked on the top window, each shown in
    another order; the head follows the mean position over all answers (0: one pass only)."""
    set_size: int = Field(default=4, ge=2, le=20)
    """``head_method: setwise``: candidates per setwise call (a heap node and its children)."""
    both_orders: bool = True
    """``order: full``: ask each comparison in both orders; disagreement counts as a tie."""
    visit_ties: bool = False
    """``sample`` strategy: an item whose pivot search ends tied visits the buckets on both
    sides of the tied pivots instead of joining the one on its engine-order side. Orders
    better on a noisy judge, for more calls and a longer critical path (``bench/bench_sort.py``
    measures both)."""
    top_k_exact: int | None = Field(default=None, ge=1)
    """Order only the first k relevant candidates exactly; the rest follow only partitioned
    (blocks whose inner order was not asked for). None: order all of them."""
    max_candidates: int | None = None
    """Judge only the engine's first N candidates (None: all)."""
    agreement_k: int = Field(default=10, ge=1)
    """k of top-k overlap, NDCG@k, hit@k, precision/recall@k."""
    grade_aggregate: Literal["majority", "median"] = "majority"
    """How several samples of a candidate's grade (``models.judge_repeats``, ``models.jury``)
    become its grade: ``majority``, the most frequent grade, a tie going to the lower one (LLM
    judges over-rate relevance more often than they under-rate it); ``median``, the lower median."""

    previous: str = operational("auto")
    """``order: head``: the earlier run whose judged heads this run builds on, ordering afresh
    only what changed: ``auto``, the newest earlier completed run of the same question set and
    configuration under the runs root (the nightly's baseline); a run id, that run (reused per
    question only where its judge, prompt versions and method are this run's); ``none``, every
    head ordered afresh."""

    @field_validator("previous")
    @classmethod
    def _previous_run(cls, value: str) -> str:
        # A run id becomes a folder name under the runs root: refused here if it could leave it.
        return value if value in ("auto", "none") else check_run_id(value)

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, value: str) -> str:
        return ORDERINGS.check(value)

    @field_validator("head_method")
    @classmethod
    def _known_head_method(cls, value: str) -> str:
        return HEAD_METHODS.check(value)


class GroundTruthConfig(_Frozen):
    """Stage 3: reference answers from the relevant candidates."""

    enabled: bool = True
    """Skip when false (question-set references are used as they are)."""
    mode: Literal["fast", "slow"] = "fast"
    """``fast``: window-filling groups then merges; ``slow``: per context then merges."""
    seed: int = 0
    """Seed of the shuffle before packing."""
    answer_tokens: int = Field(default=1024, ge=32)
    """Answer budget (``max_tokens``) of each answer written from contexts; a merge gets as many
    tokens as its partial answers hold, so a merge never has to drop a fact to fit."""
    reserve_tokens: int = Field(default=0, ge=0)
    """Tokens kept free in every prompt for what the counter cannot see: a provider's chat
    template, or a tokenizer litellm does not have (the count falls back to cl100k)."""
    overwrite_reference: bool = False
    """Replace a reference the question set already has."""
    nuggets: bool = True
    """Also extract nuggets (atomic facts, vital or okay, with the contexts stating each) from
    the same relevant contexts into ``nuggets.parquet``; the nugget metrics read them."""
    nugget_tokens: int = Field(default=1024, ge=64)
    """Answer budget of one nugget extraction call (a list of up to ``max_nuggets`` facts
    needs more room than ``answer_tokens`` may give a short reference)."""
    max_nuggets: int = Field(default=30, ge=1)
    """Nuggets kept per question after merging: vital ones first, then those more contexts
    state."""
    answerability: Literal["auto", "judge", "given"] = "auto"
    """Each question's answerability (answerable, partial, unanswerable, underspecified,
    conversational), kept in ``ground_truth.parquet`` with its source: a label the question set
    gives is read (``given``); a question without one is labelled by the judge from the turn
    and its relevant contexts (``judged``): with ``auto``, the turns of conversations only (a
    set of lone questions is then scored exactly as without labels); ``judge``, every question;
    ``given``, none. The answer metrics declared conditioned are scored on a labelled turn by
    MTRAG's rule (``score.condition_on_answerability``)."""
    answerability_passages: int = Field(default=5, ge=0, le=100)
    """Relevant contexts (most relevant first) shown to the answerability judge, as many of
    them as fit its window."""


DEFAULT_CITATION_PATTERN = (
    r"\[(?:doc)?\s*(\d+(?:\s*[,，]\s*(?:doc\s*)?\d+)*)\s*\]|【\s*(\d+(?:\s*[,，]\s*\d+)*)\s*】"
)
r"""Citations written ``[1]``, ``[1, 2]``, ``[doc3]`` or ``【1】``.

Each run of spaces can be matched one way only (``(?:doc\s*)?`` rather than ``\s*(?:doc)?\s*``):
with two ways per list item, an unclosed list such as ``[1,  1,  1, …`` made the matcher try
every split of every item, time doubling or tripling per item."""


SAMPLING_TEMPERATURE = 0.3
"""Default judge temperature of a prompt sampled several times (``score.sampling_temperature``)."""

LEGACY_SCORE_OPTIONS: dict[str, tuple[str, str]] = {
    "answer_relevancy_strictness": ("answer_relevancy", "strictness"),
    "aspect_strictness": ("aspect_", "strictness"),
    "answer_correctness_weights": ("answer_correctness", "weights"),
    "answer_correctness_beta": ("answer_correctness", "beta"),
    "factual_correctness_beta": ("factual_correctness", "beta"),
    "factual_correctness_atomicity": ("factual_correctness", "atomicity"),
    "factual_correctness_coverage": ("factual_correctness", "coverage"),
    "summarization_length_penalty": ("summarization_score", "length_penalty"),
    "summarization_coeff": ("summarization_score", "coeff"),
}
"""Flat ``score.<metric>_<option>`` keys of configs written before options moved to their
metric: key → (prefix of the metrics it applies to, their option's name)."""


def migrate_score_options(raw: dict[str, Any]) -> dict[str, Any]:
    """A score section with ``metrics`` as names and each metric's options in ``metric_options``.

    ``metrics`` may mix names and one-key mappings ``{name: {option: value}}``; an old flat key
    (``answer_relevancy_strictness: 5``) sets that option of every listed metric it applies to,
    unless the metric's own entry sets it. Nothing is checked against the metrics here: their
    options models do that when the metrics package is loaded.

    Raises:
        ValueError: an entry of ``metrics`` that is neither a name nor a one-key mapping.
    """
    out = dict(raw)
    options: dict[str, dict[str, Any]] = {
        k: dict(v or {}) for k, v in (out.get("metric_options") or {}).items()
    }
    names: list[str] = []
    entries = out.get("metrics")
    if isinstance(entries, str | dict):
        entries = [entries]
    for entry in entries if entries is not None else []:
        if isinstance(entry, dict):
            if len(entry) != 1:
                raise ValueError(
                    f"a metrics entry is a name or {{name: {{option: value}}}}, not {entry!r}"
                )
            [(name, given)] = entry.items()
            if given is not None and not isinstance(given, dict):
                raise ValueError(f"options of metric '{name}' must be a mapping, not {given!r}")
            options.setdefault(str(name), {}).update(given or {})
            names.append(str(name))
        elif isinstance(entry, str):
            names.append(entry)
        else:
            raise ValueError(
                f"a metrics entry is a name or {{name: {{option: value}}}}, not {entry!r}"
            )
    if entries is not None:
        out["metrics"] = tuple(names)
    listed = out.get("metrics", ScoreConfig.model_fields["metrics"].default)
    for key, (prefix, option) in LEGACY_SCORE_OPTIONS.items():
        if key not in out:
            continue
        value = out.pop(key)
        for name in listed:
            if name.startswith(prefix):
                options.setdefault(name, {}).setdefault(option, value)
    if options or "metric_options" in out:
        out["metric_options"] = options
    return out


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
    """Metric names, as ``ragaudit metrics`` lists them; an entry may be ``{name: {option:
    value}}`` to set that metric's options (``{answer_relevancy: {strictness: 5}}``). Unknown
    names and options are rejected when the config loads."""
    metric_options: dict[str, dict[str, Any]] = {}
    """Options of each listed metric, by metric name; filled in with the metric's defaults
    when the config loads (the options each metric is built with, kept in the run's manifest)."""
    plugins: tuple[str, ...] = ()
    """Python modules to import before the metrics are resolved: each registers its own metrics
    with ``ragaudit.metrics.metric`` (an installed package may use the ``ragaudit.metrics``
    entry-point group instead)."""
    top_k: int = Field(default=10, ge=1)
    """Contexts scored per question, reduced until the judge's prompt fits its window."""
    sampling_temperature: float = Field(default=SAMPLING_TEMPERATURE, ge=0.0, le=2.0)
    """Judge temperature of metrics that sample one prompt several times (answer relevancy,
    aspect critique with strictness > 1), so that the samples can differ."""
    aspects: dict[str, str | dict[Literal["en", "zh"], str]] = {}
    """User-defined aspect critiques: name → definition, a yes/no question (1 = yes), either one
    text or one per language (``{en: …, zh: …}``). Scored by listing ``aspect_<name>`` in
    ``metrics``; a built-in aspect's name (harmlessness, maliciousness, coherence, correctness,
    refusal, conciseness) redefines it."""
    aggregate: dict[str, Literal["mean", "median", "majority"]] = {}
    """How several samples of a row's score (``models.judge_repeats``, ``models.jury``) become
    its score, by metric name: ``mean`` (the default for a metric not listed), ``median``, or
    ``majority`` (the most frequent value, for metrics that score 0 or 1; a tie takes the lowest
    of the tied values). Every (judge, repeat) sample of the row counts once: with a jury, each
    judge weighs as much as its samples that did not fail. Only metrics listed in ``metrics``."""
    condition_on_answerability: bool = True
    """On a turn labelled with its answerability (given by the set, or judged by the
    ground_truth stage), score the answer metrics declared conditioned (faithfulness, answer
    relevancy and correctness, factual correctness, semantic similarity, nugget recalls, ROUGE-L,
    BLEU, Jaccard) by MTRAG's rule: declining an unanswerable or conversational turn, or asking
    back on an underspecified one, gets 1, not doing so 0; declining an answerable turn gets 0,
    answering it the metric's own value. Each row says so. False: every metric's own value.
    A turn without a label is never conditioned."""
    citation_pattern: str = DEFAULT_CITATION_PATTERN
    """How a citation appears in an answer (a regular expression whose first matching capture
    group holds a context's 1-based position among the retrieved contexts, its id, or several
    separated by commas); the default reads ``[1]``, ``[1, 2]``, ``[doc3]`` and ``【1】``. Shared
    by every citation metric, as one answer has one citation style."""

    @field_validator("citation_pattern")
    @classmethod
    def _pattern(cls, v: str) -> str:
        # Compiled with the engine that matches it (``regex``, which takes a timeout).
        try:
            compiled = regex.compile(v)
        except regex.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        if compiled.groups < 1:
            raise ValueError("needs a capture group for the cited context's position or id")
        return v

    @model_validator(mode="before")
    @classmethod
    def _entries(cls, value: Any) -> Any:
        return migrate_score_options(value) if isinstance(value, dict) else value

    @field_validator("aspects")
    @classmethod
    def _aspect_names(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name in value:
            plain = name.isascii() and name[:1].isalpha() and name.replace("_", "0").isalnum()
            if not plain or name != name.lower():
                raise ValueError(
                    f"aspect name '{name}': use lower-case letters, digits and _ "
                    f"(it becomes the metric aspect_{name})"
                )
        return value

    @model_validator(mode="after")
    def _known_metrics(self) -> ScoreConfig:
        unlisted = sorted(set(self.aggregate) - set(self.metrics))
        if unlisted:
            # A misspelt name would otherwise aggregate its metric by the mean, silently.
            raise ValueError(
                f"score.aggregate names {', '.join(unlisted)}, not in score.metrics "
                f"({', '.join(self.metrics)})"
            )
        # The registry loads the built-in metrics and the plugins itself: whether a config is
        # valid never depends on what was imported before.
        built = METRICS.check_section(self.model_dump(), self.plugins)
        # Frozen: the validated options replace the given ones before anyone reads them.
        object.__setattr__(self, "metric_options", built)
        return self


def default_thresholds(plugins: Iterable[str] = ()) -> dict[str, float]:
    """The thresholds the metrics of the built-in modules and of ``plugins`` declare.

    Each metric declares its own in its registration (``ragaudit.metrics.metric(...,
    threshold=…)``); the registry loads those modules by name, as it does to check the metrics.
    """
    return {
        name: info.threshold
        for name, info in METRICS.declared_info(plugins).items()
        if info.threshold is not None
    }


class ReportConfig(_Frozen):
    """Stage 5: summary, flags and artifacts."""

    thresholds: dict[str, float] = Field(default_factory=default_thresholds)
    """A metric mean on the wrong side of its threshold (below it; above it for a
    lower-is-better metric) is flagged. The default: the thresholds the metrics declare (the
    built-in ones common starting points), those of the config's plugins included; a mapping
    given replaces it as a whole."""
    bootstrap_samples: int = Field(default=1000, ge=0)
    """Resamples for the confidence intervals of the means (0 turns them off)."""
    worst: int = Field(default=5, ge=0)
    """Worst questions listed per metric."""
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    """``compare``: a metric moved beyond noise when its adjusted p-value is below this and its
    confidence interval excludes 0."""
    adjustment: Literal["bh", "by"] = "bh"
    """``compare``: how p-values are adjusted across metrics: Benjamini–Hochberg (``bh``) or
    Benjamini–Yekutieli (``by``, valid under any dependence between metrics)."""
    battles: bool = False
    """``compare``: also play blind pairwise battles between the two runs' answers (the judge
    asked which answer is better, in both orders); a regression by battles fails
    ``--fail-on-regression`` like a metric's."""
    compare_resamples: int = Field(default=9999, ge=99)
    """``compare``: resamples of the paired bootstrap and of the permutation test."""
    moved_questions: int = Field(default=10, ge=0)
    """``compare``: questions listed per metric among those that moved most."""
    formats: tuple[Literal["xlsx", "html", "artifacts"], ...] = ("xlsx", "html", "artifacts")
    """What the report stage renders besides ``summary``: ``report.xlsx``, ``report.html`` (its
    charts cost most of the stage's CPU) and the Prefect artifacts. An ablation's points keep
    none: the ablation reads their summaries and renders one report of its own."""


class GoldConfig(_Frozen):
    """Gold relevance kept beside the question set (judge-free agreement)."""

    qrels: Path | None = None
    """TREC qrels file (``qid 0 docid grade`` per line) grading the questions' contexts; grade 0
    is judged not relevant. Merged over any ``reference_context_grades`` of the question set."""
    allow_unknown_ids: bool = False
    """Accept a qrels file that grades question ids the question set lacks (they are dropped)
    or grades one (question, document) twice with different grades (the last is kept). Off:
    either is refused at load, naming them, as a qrels of another set or a bad merge."""


ONE_BATCH = 100_000
"""The default ``scale.batch_size``: a run's questions in one batch."""


class ScaleConfig(_Frozen):
    """How a run spreads over processes: question batches and the flow's task runner."""

    batch_size: int = Field(default=ONE_BATCH, ge=1)
    """Questions per batch; each batch of a stage (sort, ground_truth, score) is one task. The
    default keeps a run one batch per stage in this process; with the ``dask`` or ``ray``
    runner it means "one batch per worker" (see :meth:`sized_for`)."""
    task_runner: Literal["default", "dask", "ray"] = "default"
    """Where batch tasks run: ``default`` awaits them in the flow's process; ``dask``
    (prefect-dask) and ``ray`` (prefect-ray) submit them to a cluster."""
    workers: int = Field(default=2, ge=1, le=1024)
    """Local workers started by the dask or ray runner when no ``address`` is given (with a
    Dask ``address``, the flow counts the cluster's workers). They share
    ``models.global_limit`` equally."""
    address: str | None = None
    """Scheduler address of an existing Dask or Ray cluster; None starts a local one."""
    dask_processes: bool = True
    """Local Dask workers are processes (True) or threads of the flow's process."""

    def sized_for(self, n_questions: int) -> ScaleConfig:
        """These settings with the batch size a run of ``n_questions`` gets.

        A ``dask`` or ``ray`` runner left at the default batch size would get the run's
        questions as one batch, so one worker would do all the work: its batches are sized to
        give each worker one instead. A batch size that was set is kept.
        """
        if self.task_runner == "default" or self.batch_size != ONE_BATCH or n_questions < 2:
            return self
        size = max(1, -(-n_questions // self.workers))
        return self.model_copy(update={"batch_size": size})


class CacheConfig(_Frozen):
    """Where the LLM memo lives: a diskcache folder (``cache_dir``) or a shared Redis.

    A folder serves every process on one machine (diskcache is SQLite underneath, safe for
    concurrent readers and writers); Redis serves workers on many machines.
    """

    backend: Literal["disk", "redis"] = "disk"
    """``disk``: diskcache in ``cache_dir``; ``redis``: the server at ``redis_url`` or in the
    variable named by ``redis_url_env``."""
    redis_url: str | None = None
    """``redis://host:port/db`` (``rediss://`` for TLS, ``unix:///path.sock``) without a
    password: the config is stored in every manifest. A URL with a password goes in an
    environment variable named by ``redis_url_env``."""
    redis_url_env: str | None = None
    """Environment variable holding the Redis URL, password included (e.g. ``REDIS_URL``); the
    value is registered as a secret and never stored or shown."""
    redis_prefix: str = Field(default="ragaudit:memo", min_length=1)
    """Prefix of every memo key on the server; two prefixes are two separate memos."""
    ttl_s: int | None = Field(default=None, ge=1)
    """Seconds a Redis entry lives (None: until cleared, or evicted by the server's policy)."""

    @field_validator("redis_url")
    @classmethod
    def _url_without_password(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        if url_password(value):
            # The message never repeats the value: it holds the password.
            raise ValueError(
                "must not hold a password (it would be stored in the manifest): put the URL "
                "in an environment variable and name it in cache.redis_url_env"
            )
        return value

    @model_validator(mode="after")
    def _redis_is_configured(self) -> CacheConfig:
        if self.redis_url and self.redis_url_env:
            raise ValueError("give cache.redis_url or cache.redis_url_env, not both")
        if self.backend == "redis" and not (self.redis_url or self.redis_url_env):
            raise ValueError("backend 'redis' needs cache.redis_url or cache.redis_url_env")
        return self


class RunConfig(_Frozen):
    """Everything one evaluation run needs; stored whole in the run's manifest."""

    plugins: tuple[str, ...] = ()
    """The allow-list of plugins loaded when the config loads, before any name in it is
    checked: an installed package naming its modules under the ``ragaudit.*`` entry-point
    groups (its units are then ``<package>/<name>``), or a Python module, imported as it is,
    that registers plain names (search backends with ``ragaudit.search.register_backend``,
    answer sources with ``ragaudit.answers.register_source``, ordering strategies with
    ``ragaudit.ordering.strategy``, metrics with ``ragaudit.metrics.metric``). An installed
    package not listed is never imported. ``RAGAUDIT_PLUGINS=pkg-a,pkg-b`` sets it from the
    environment. A name another module already registered is refused, naming both modules."""
    questions: Path = Path("data/demo/questions.jsonl")
    """Question set: JSONL, CSV or Parquet (ragaudit or RAGAS field names)."""
    run_id: str | None = operational(None)
    """Run identifier, a folder name under ``runs_root`` (not a path); the same id resumes a
    run. None: derived from time."""
    runs_root: Path = operational(DEFAULT_RUNS_ROOT)
    """Folder holding one subfolder per run."""
    cache_dir: Path = operational(Path("data/cache"))
    """diskcache folder of the LLM memo (``cache.backend: disk``)."""
    cache: CacheConfig = operational(CacheConfig())
    """Which store holds the LLM memo: this folder, or a shared Redis."""
    limit: int | None = Field(default=None, ge=1)
    """Evaluate only the first N questions."""
    models: ModelsConfig = ModelsConfig()
    collect: CollectConfig = Field(default_factory=CollectConfig)
    sort: SortConfig = SortConfig()
    ground_truth: GroundTruthConfig = GroundTruthConfig()
    score: ScoreConfig = Field(default_factory=ScoreConfig)
    # Built when a config is, not on import: its thresholds come from the metric registry.
    report: ReportConfig = Field(default_factory=ReportConfig)
    gold: GoldConfig = GoldConfig()
    conversation: ConversationConfig = ConversationConfig()
    """A question that is a turn of a conversation: how much of its history the judge sees."""
    ablate: AblateConfig = AblateConfig()
    """``ragaudit ablate`` only: the reference pipeline's sweeps (ignored by evaluation runs)."""
    nightly: NightlyConfig = NightlyConfig()
    scale: ScaleConfig = operational(ScaleConfig())
    tune: TuneConfig = TuneConfig()
    """``ragaudit tune`` only: the collect variants compared (ignored by evaluation runs)."""
    audit: AuditSection | None = None
    """``ragaudit audit`` only: the production traffic audited (None: no audit)."""

    def resolved_run_id(self, given: str | None = None, prefix: str | None = None) -> str:
        """The run's id: ``given`` (a flow's argument), else ``run_id``, else a new one.

        The one place a run without an id gets one (from the time, :func:`new_run_id`).
        """
        return given or self.run_id or new_run_id(prefix)

    # Declared first, so that the plugins are imported before the sections naming their units
    # are validated (pydantic validates fields in the order they are declared).
    @field_validator("plugins", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        # RAGAUDIT_PLUGINS=a,b (as LLM_LOAD_PLUGINS): a list in one variable.
        if isinstance(value, str):
            return tuple(name.strip() for name in value.split(",") if name.strip())
        return value

    @field_validator("plugins")
    @classmethod
    def _load_plugins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        load_plugins(value)
        return value

    @field_validator("run_id")
    @classmethod
    def _run_id_is_a_name(cls, value: str | None) -> str | None:
        if value is None:
            return value
        return folder_name(value)

    @model_validator(mode="after")
    def _plugin_thresholds(self) -> RunConfig:
        # The default thresholds include those the config's own plugins declare; left at the
        # default, they are filled in here, where the plugins are known.
        plugins = (*self.plugins, *self.score.plugins)
        if plugins and "thresholds" not in self.report.model_fields_set:
            report = self.report.model_copy(update={"thresholds": default_thresholds(plugins)})
            object.__setattr__(self, "report", report)
        return self


MAX_CONFIG_BYTES = 1 << 20
"""Largest config file read: a config is settings, not data (a long query template fits)."""
MAX_CONFIG_SIZE = 1 << 22
"""Largest config once YAML's aliases are expanded, in nodes plus characters of text."""


def _expanded_size(data: Any, limit: int) -> int:
    """Nodes plus characters of ``data`` with every shared (aliased) part counted each time.

    PyYAML loads an alias as a second reference to one object, so an "alias bomb" (each level
    a list of ten aliases of the level below) loads small and explodes later, when the config
    is validated, dumped to JSON for the flow or rendered into a request. Counting stops once
    past ``limit``, so the walk itself stays bounded.
    """
    total = 0
    stack = [data]
    while stack and total <= limit:
        node = stack.pop()
        total += 1
        if isinstance(node, str | bytes):
            total += len(node)
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list | tuple | set):
            stack.extend(node)
    return total


def _read_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file {path}: not found")
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"config file {path}: {size:,} bytes, more than a config may hold "
            f"({MAX_CONFIG_BYTES:,}); keep data (questions, corpora) in their own files"
        )
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
        raise ConfigError(
            f"config file {path}: not valid {path.suffix[1:]}: {clip(str(exc), 300)}"
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path}: not UTF-8 text") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: the top level must be a mapping")
    if _expanded_size(data, MAX_CONFIG_SIZE) > MAX_CONFIG_SIZE:
        raise ConfigError(
            f"config file {path}: its aliases expand past {MAX_CONFIG_SIZE:,} values and "
            "characters (an alias bomb?); write the values out instead"
        )
    return data


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    """``RAGAUDIT_MODELS__JUDGE=x`` → ``{"models": {"judge": "x"}}``; values parsed as YAML.

    Only a variable whose first segment names a config field is an override: the project's
    other ``RAGAUDIT_*`` variables (``RAGAUDIT_HOME``, ``RAGAUDIT_PROJECT_DIR`` that a Prefect
    worker's pull step reads, a user's ``RAGAUDIT_QA_KEY`` credential …) are not config and are
    left alone. A nested name (``__``) under an unknown first segment is a typo of a section
    and fails, naming the variable (never its value, which may be a credential).
    """
    out: dict[str, Any] = {}
    fields = set(RunConfig.model_fields)
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        parts = [p.lower() for p in name[len(ENV_PREFIX) :].split("__") if p]
        if not parts or parts[0] not in fields:
            if len(parts) > 1:
                raise ConfigError(
                    f"environment variable {name}: '{parts[0]}' is not a config section "
                    f"(sections: {', '.join(sorted(fields))})"
                )
            continue
        try:
            value = yaml.safe_load(raw) if raw else raw
        except yaml.YAMLError:
            value = raw
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` laid on it: a mapping in both is merged key by key.

    Anything else in ``over`` replaces what ``base`` holds (the config's layers over each
    other; a tune variant's changes over its collect section).
    """
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
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
        # A message may quote the value, which may be megabytes (a --set, an env variable);
        # 2,000 characters still hold our own longest, the list of known metric names.
        # pydantic prefixes a validator's own message with "Value error, ": the field says it.
        message = str(err["msg"]).removeprefix("Value error, ")
        lines.append(f"{origin}: {clip(field, 120)}: {clip(message, 2000)}")
    return "\n".join(lines)


def load_config(
    path: Path | str | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> RunConfig:
    """Build the run configuration from a file, the environment and CLI overrides."""
    path = Path(path) if path else None
    data: dict[str, Any] = _read_file(path) if path else {}
    data = deep_merge(data, _env_overrides(dict(os.environ if environ is None else environ)))
    data = deep_merge(data, overrides or {})
    origin = f"config ({path})" if path else "config"
    if _expanded_size(data, MAX_CONFIG_SIZE) > MAX_CONFIG_SIZE:
        # The file passed its own check: the environment or a --set value is the large one.
        raise ConfigError(
            f"{origin}: with the environment's and the command line's values it expands past "
            f"{MAX_CONFIG_SIZE:,} values and characters; pass data in files, not settings"
        )
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, origin)) from None


__all__ = [
    # The sections beside their packages, composed here (importable from here as before).
    "DIMENSIONS",
    "AblateConfig",
    "AblationPoint",
    "NightlyConfig",
    "TuneConfig",
    "TuneRange",
    "parse_size",
    "migrate_score_options",
    "ENGLISH_ONLY_EMBEDDERS",
    "OFFLINE_EMBEDDER",
    "OFFLINE_JUDGE",
    "ONE_BATCH",
    "AnswerConfig",
    "CacheConfig",
    "CollectConfig",
    "EngineConfig",
    "FieldsConfig",
    "HttpAnswerConfig",
    "GroundTruthConfig",
    "ModelsConfig",
    "QueryForm",
    "ReportConfig",
    "RunConfig",
    "ScaleConfig",
    "LEGACY_SCORE_OPTIONS",
    "SAMPLING_TEMPERATURE",
    "ScoreConfig",
    "SecretRef",
    "Section",
    "SortConfig",
    "deep_merge",
    "default_thresholds",
    "load_config",
    "set_path",
]
