"""ragas on our gateway, in the question's language, with every parsed answer traced.

Its LLM and embeddings route every call through the gateway (memoised, logged, rate-limited).

Chinese questions get Chinese prompts by swapping a metric's prompt objects for ours (the
typed prompts in ``ragaudit.prompts``, rendered with Chinese framing); English questions keep
ragas's prompts untouched, so their wording and memo keys are exactly ragas's.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from functools import cache, lru_cache
from textwrap import dedent
from types import SimpleNamespace
from typing import Any, Literal

from instructor.core.exceptions import InstructorRetryException
from instructor.v2.core.function_calls import response_schema
from instructor.v2.core.registry import mode_registry
from pydantic import BaseModel, ValidationError
from ragas.embeddings.base import BaseRagasEmbedding
from ragas.llms import llm_factory
from ragas.llms.base import InstructorBaseRagasLLM
from ragas.prompt.metrics.base_prompt import BasePrompt

from ragaudit.cache import Gateway
from ragaudit.metrics._base import Deps, JudgeError, Window
from ragaudit.metrics._judge import record
from ragaudit.prompts._base import Prompt

RAGAS_PROMPTS = "ragas-0.4.3"
# Languages we have written ragas's prompts in; any other question language gets English.
LOCALISED = ("zh",)

# instructor logs every exhausted retry at ERROR; the score row already records the failure
# with the judge's replies, and a log line per failed row would bury the run's own log.
logging.getLogger("instructor.v2.retry").setLevel(logging.CRITICAL)


class GatewayEmbeddings(BaseRagasEmbedding):
    """ragas embeddings whose calls go through the gateway."""

    def __init__(self, gateway: Gateway, model: str) -> None:
        super().__init__()
        self.gateway, self.model = gateway, model

    def embed_text(self, text: str, **kwargs: Any) -> list[float]:  # noqa: D102
        raise NotImplementedError("ragaudit scores asynchronously; use aembed_text")

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:  # noqa: D102
        return (await self.gateway.aembed([text], model=self.model))[0]

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:  # noqa: D102
        return await self.gateway.aembed(list(texts), model=self.model)


@cache
def fast_schema(model: type[BaseModel]) -> type[BaseModel]:
    """``model`` with its JSON schema generated once, not on every call.

    instructor and ragas's prompts ask the reply model for its schema on every request, and
    pydantic builds it afresh each time: at the score stage's call rate that was a quarter of
    the process's CPU (bench/bench_score.py). The subclass has the same name, fields and schema
    (a fresh copy each time, so no caller can alter the cached one), and is already wrapped the
    way instructor wraps reply models.
    """
    text = json.dumps(model.model_json_schema())

    def model_json_schema(cls: type[BaseModel], *args: Any, **kwargs: Any) -> dict[str, Any]:
        if args or kwargs:
            return model.model_json_schema(*args, **kwargs)
        return json.loads(text)

    cached = type(
        model.__name__,
        (model,),
        {
            "__module__": model.__module__,
            "__doc__": model.__doc__,
            "model_json_schema": classmethod(model_json_schema),
        },
    )
    # instructor wraps the reply model in a new pydantic class on every call unless it is
    # wrapped already: a class per call cost about as much again as the schema.
    return response_schema(cached)


def _llm(gateway: Gateway, model: str, temperature: float, max_tokens: int, version: str) -> Any:
    # Kept on the gateway itself, not in a module cache keyed on it: a module cache would keep
    # every gateway (and its open memo) alive for the life of the process.
    llms: dict[tuple[str, float, int, str, int], Any] = gateway.__dict__.setdefault(
        "_ragas_llms", {}
    )
    # Invalid output is re-asked as often as the gateway's own structured calls re-ask it
    # (``Gateway.max_repairs``): one judge answer costs at most ``1 + max_repairs`` calls
    # whichever library parses it. (instructor re-asks three times unless told otherwise.)
    repairs = gateway.max_repairs
    key = (model, temperature, max_tokens, version, repairs)
    if key not in llms:
        # instructor's JSON mode: the schema travels in the system message, so any chat model
        # (and our fake and local providers) can answer it.
        llms[key] = llm_factory(
            model,
            provider="litellm",
            client=gateway.litellm_acompletion(version),
            temperature=temperature,
            max_tokens=max_tokens,
            max_retries=repairs,
        )
    return llms[key]


@lru_cache(maxsize=256)
def _instructor_system(
    provider: Any, mode: Any, schema: type[BaseModel]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The system message and request fields instructor's ``mode`` adds for ``schema``.

    Made by instructor's own request handler (the one its client uses), once per schema.
    """
    handlers = mode_registry.get_handlers(provider, mode)
    _, kwargs = handlers.request_handler(
        response_model=schema, kwargs={"messages": [{"role": "user", "content": ""}]}
    )
    messages = kwargs.pop("messages")
    if len(messages) != 2 or messages[0].get("role") != "system":
        raise ValueError(f"instructor mode {mode} does not add one system message")
    return messages[0], kwargs


class TracedLLM(InstructorBaseRagasLLM):
    """A ragas LLM that records each parsed answer (or its failure) in the row's trace.

    A request whose answer is in the gateway's memo is answered from it directly, parsed by
    instructor's own response parser; anything else (a miss, a reply the parser rejects, so
    instructor would re-ask) goes through instructor as before. Through instructor a re-score
    of 200 rows x 6 metrics (4,400 memo hits) cost 3.2 s of CPU, most of it instructor's
    per-call reply-model checks and request preparation and a rebuilt ``ModelResponse``; this
    way 0.75 s, under ragas's own cached re-run (bench/bench_vs_ragas.py).
    """

    def __init__(
        self, inner: Any, gateway: Gateway | None = None, prompt_version: str | None = None
    ) -> None:
        self.inner, self.gateway, self.prompt_version = inner, gateway, prompt_version

    def generate(self, prompt: str, response_model: type[BaseModel]) -> Any:  # noqa: D102
        raise NotImplementedError("ragaudit scores asynchronously; use agenerate")

    def _from_memo(self, prompt: str, schema: type[BaseModel]) -> Any:
        """The parsed answer from the memo to the request instructor would send, or None."""
        inner, client = self.inner, getattr(self.inner, "client", None)
        mode, provider = getattr(client, "mode", None), getattr(client, "provider", None)
        if (
            self.gateway is None
            or mode is None
            or provider is None
            or getattr(inner, "system_prompt", None)  # instructor would merge the two
            or not hasattr(inner, "_map_provider_params")  # not ragas's InstructorLLM
        ):
            return None
        system, extra = _instructor_system(provider, mode, schema)
        parser = mode_registry.get_handlers(provider, mode).response_parser

        def parse(stored: dict[str, Any]) -> Any:
            choice = stored["choices"][0]
            response = SimpleNamespace(
                choices=[
                    SimpleNamespace(
                        finish_reason=choice.get("finish_reason"),
                        message=SimpleNamespace(**choice["message"]),
                    )
                ]
            )
            # strict=True: instructor's default for every create call.
            return parser(response=response, response_model=schema, strict=True)

        return self.gateway.memo_hit(
            parse,
            model=inner.model,
            messages=[dict(system), {"role": "user", "content": prompt}],
            prompt_version=self.prompt_version,
            **inner._map_provider_params(),
            **extra,
        )

    async def agenerate(self, prompt: str, response_model: type[BaseModel]) -> Any:  # noqa: D102
        step = response_model.__name__
        schema = fast_schema(response_model)
        try:
            out = self._from_memo(prompt, schema)
            if out is None:
                out = await self.inner.agenerate(prompt, schema)
        except InstructorRetryException as exc:
            # instructor re-asked with the validation error and still got nothing usable: say
            # that in one line (the replies themselves are kept on the row).
            last = exc.failed_attempts[-1].exception if exc.failed_attempts else exc.__cause__
            detail = " ".join(line.strip() for line in str(last or exc).splitlines()[:2])
            if isinstance(last, ValidationError):
                message = f"{step}: no valid reply in {exc.n_attempts} attempts ({detail})"
            else:  # the provider failed (after the gateway's retries): name what failed
                message = f"{step}: {type(last or exc).__name__}: {detail}"
            record(step, error=message)
            raise JudgeError(message) from None
        except Exception as exc:
            record(step, error=f"{type(exc).__name__}: {exc}"[:500])
            raise
        record(step, out)
        return out


def ragas_llm(deps: Deps, language: str = "en", temperature: float | None = None) -> TracedLLM:
    """The ragas LLM for the judge, labelled in the call log with the prompt language used."""
    version = RAGAS_PROMPTS + ("+zh" if language in LOCALISED else "")
    temp = deps.temperature if temperature is None else temperature
    inner = _llm(deps.gateway, deps.judge, temp, deps.max_output_tokens, version)
    return TracedLLM(inner, deps.gateway, version)


def embeddings(deps: Deps) -> GatewayEmbeddings:
    """The configured embedder as ragas embeddings."""
    return GatewayEmbeddings(deps.gateway, deps.embedder)


# -- prompts in the question's language ----------------------------------------------------

_FRAME = {
    "en": {
        "schema": "Please return the output in a JSON format that complies with the following "
        "schema as specified in JSON Schema:\n",
        "quotes": "Do not use single quotes in your response but double quotes,properly escaped "
        "with a backslash.",
        "examples": "--------EXAMPLES-----------",
        "example": "Example",
        "input": "Input",
        "output": "Output",
        "now": "Now perform the same with the following input\ninput",
    },
    "zh": {
        "schema": "请以符合下面 JSON Schema 的 JSON 格式返回输出：\n",
        "quotes": "\n回复中不要使用单引号，请使用双引号，并按需用反斜杠转义。",
        "examples": "--------示例-----------",
        "example": "示例",
        "input": "输入",
        "output": "输出",
        "now": "现在请对下面的输入完成同样的任务\n输入",
    },
}

Picker = Callable[[list[Any], BaseModel], list[Any]]


class LocalisedPrompt(BasePrompt):
    """One of our typed prompts as a ragas prompt, framed in its language (ragas's layout)."""

    def __init__(
        self, prompt: Prompt[BaseModel, BaseModel], language: str, pick: Picker | None = None
    ) -> None:
        lang = prompt.language(language)
        self.source = prompt
        self.input_model = prompt.input_model
        self.output_model = fast_schema(prompt.output_model)
        self.instruction = prompt.instruction[lang]
        self.examples = list(prompt.examples.get(lang, []))
        self.language = lang
        self._pick = pick

    def to_string(self, data: BaseModel) -> str:
        """The full prompt for ``data``: instruction, schema, examples, input (ragas's layout)."""
        words = _FRAME.get(self.language, _FRAME["en"])
        examples = self._pick(self.examples, data) if self._pick else self.examples
        return (
            f"{self.instruction}\n{words['schema']}{_schema_text(self.output_model)}"  # type: ignore[arg-type]  # a class is hashable
            f"{words['quotes']}\n\n{_shown(self.language, examples)}\n"
            f"-----------------------------\n\n{words['now']}: "
            f"{data.model_dump_json(indent=4, exclude_none=True)}\n{words['output']}: "
        )


@lru_cache(maxsize=256)
def _schema_text(output_model: type[BaseModel]) -> str:
    return json.dumps(output_model.model_json_schema(), ensure_ascii=False)


# A prompt's examples block, rendered once per prompt kind and choice of examples: every row
# shows the same few pairs, and dumping them as indented JSON on every call was a tenth of a
# re-score's CPU. Keyed by the pairs' identity; an entry holds its pairs, so no id is reused
# while it is kept. The examples are module and class constants: a handful of entries.
_SHOWN: dict[tuple[Any, tuple[int, ...]], tuple[list[Any], str]] = {}
_SHOWN_MAX = 512


def _rendered_once(kind: Any, examples: list[Any], render: Callable[[], str]) -> str:
    key = (kind, tuple(id(part) for pair in examples for part in pair))
    found = _SHOWN.get(key)
    if found is None:
        if len(_SHOWN) >= _SHOWN_MAX:
            _SHOWN.clear()
        found = _SHOWN[key] = (list(examples), render())
    return found[1]


def _shown(language: str, examples: list[Any]) -> str:
    def render() -> str:
        if not examples:
            return ""
        words = _FRAME.get(language, _FRAME["en"])
        return (
            words["examples"]
            + "\n"
            + "\n\n".join(
                f"{words['example']} {n}\n{words['input']}: {i.model_dump_json(indent=4)}\n"
                f"{words['output']}: {o.model_dump_json(indent=4)}"
                for n, (i, o) in enumerate(examples, start=1)
            )
        )

    return _rendered_once(language, examples, render)


def _own_prompt(prompt: Any) -> Any:
    """A ragas prompt with its wording untouched, its schema and examples made once."""
    prompt.output_model = fast_schema(prompt.output_model)
    examples = getattr(prompt, "examples", None)
    if isinstance(examples, list) and hasattr(prompt, "_generate_examples"):
        # ragas's own rendering, kept: the instance answers with it instead of re-rendering.
        kind = type(prompt)
        text = _rendered_once(kind, examples, lambda: kind._generate_examples(prompt))
        with contextlib.suppress(AttributeError):
            prompt._generate_examples = lambda: text
    return prompt


def localise(
    metric: Any, language: str, pick: dict[str, Picker] | None = None, **prompts: Prompt
) -> Any:
    """Swap ``metric``'s prompt attributes for ours when the question's language needs it.

    ``prompts`` maps the metric's attribute names (``statement_generator_prompt``) to our
    typed prompts; English leaves ragas's prompts in place.
    """
    for attr, prompt in prompts.items():
        if language in LOCALISED:
            setattr(metric, attr, LocalisedPrompt(prompt, language, (pick or {}).get(attr)))
        else:
            _own_prompt(getattr(metric, attr))
    return metric


def prompt_for(ragas_prompt: Any, ours: Prompt, language: str, pick: Picker | None = None) -> Any:
    """The prompt object a metric uses for ``language``: ragas's own, or ours localised."""
    if language in LOCALISED:
        return LocalisedPrompt(ours, language, pick)
    # As localise() leaves it on the metric: the same text, its schema and examples made once.
    return _own_prompt(ragas_prompt)


@lru_cache(maxsize=256)
def instructor_system(output_model: type[BaseModel]) -> str:
    """The system message instructor's JSON mode adds (what the judge reads besides the prompt)."""
    schema = json.dumps(fast_schema(output_model).model_json_schema(), indent=2, ensure_ascii=False)
    return dedent(
        f"""
        As a genius expert, your task is to understand the content and provide
        the parsed objects in json that match the following json_schema:\n

        {schema}

        Make sure to return an instance of the JSON, not the schema itself
        """
    )


def ragas_window(prompt: Any, data: BaseModel, mode: Literal["joined", "each"]) -> Window:
    """The request a ragas metric sends for ``data`` through ``prompt`` (contexts left empty)."""
    return Window([instructor_system(prompt.output_model), prompt.to_string(data)], mode)


__all__ = [
    "LOCALISED",
    "RAGAS_PROMPTS",
    "GatewayEmbeddings",
    "LocalisedPrompt",
    "TracedLLM",
    "embeddings",
    "fast_schema",
    "instructor_system",
    "localise",
    "prompt_for",
    "ragas_llm",
    "ragas_window",
]
