"""ragas on our gateway, in the question's language, with every parsed answer traced.

Its LLM and embeddings route every call through the gateway (memoised, logged, rate-limited).

Chinese questions get Chinese prompts by swapping a metric's prompt objects for ours (the
typed prompts in ``ragaudit.prompts``, rendered with Chinese framing); English questions keep
ragas's prompts untouched, so their wording is exactly ragas's.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from functools import cache, lru_cache
from typing import Any, Literal

from pydantic import BaseModel
from ragas.embeddings.base import BaseRagasEmbedding
from ragas.llms.base import InstructorBaseRagasLLM
from ragas.prompt.metrics.base_prompt import BasePrompt

from ragaudit.cache import Gateway, Judged
from ragaudit.judging import Judge
from ragaudit.metrics._base import CostSheet, Deps, Window
from ragaudit.metrics._judge import settled, structured_window
from ragaudit.prompts import Prompt

RAGAS_PROMPTS = "ragas-0.4.3"
# Languages we have written ragas's prompts in; any other question language gets English.
LOCALISED = ("zh",)


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

    ragas's prompts ask the reply model for its schema on every request, and pydantic builds
    it afresh each time: at the score stage's call rate that was a quarter of the process's
    CPU (bench/bench_score.py). The subclass has the same name, fields and schema (a fresh copy
    each time, so no caller can alter the cached one).
    """
    text = json.dumps(model.model_json_schema())

    def model_json_schema(cls: type[BaseModel], *args: Any, **kwargs: Any) -> dict[str, Any]:
        if args or kwargs:
            return model.model_json_schema(*args, **kwargs)
        return json.loads(text)

    return type(
        model.__name__,
        (model,),
        {
            "__module__": model.__module__,
            "__doc__": model.__doc__,
            "model_json_schema": classmethod(model_json_schema),
        },
    )


class TracedLLM(InstructorBaseRagasLLM):
    """A ragas LLM whose every answer is the gateway's structured call, traced on the row.

    ragas renders its prompt; the gateway's ``astructured`` sends it (its schema message and
    ``response_format``, the judge's prompt budget, at most ``max_repairs`` repairs) and parses
    the reply, so a ragas metric's answer costs what any other judge answer costs and is
    counted the same way (:func:`ragas_window`). Each parsed answer, or its failure, is
    appended to the row's trace.
    """

    def __init__(self, judge: Judge, prompt_version: str, *, temperature: float) -> None:
        self.judge, self.prompt_version, self.temperature = judge, prompt_version, temperature

    @property
    def gateway(self) -> Gateway:
        """The gateway the judge's calls go through."""
        return self.judge.gateway

    def generate(self, prompt: str, response_model: type[BaseModel]) -> Any:  # noqa: D102
        raise NotImplementedError("ragaudit scores asynchronously; use agenerate")

    @staticmethod
    def _messages(prompt: str) -> list[dict[str, Any]]:
        """The prompt ragas rendered, as the one user message it is sent as."""
        return [{"role": "user", "content": prompt}]

    async def agenerate(self, prompt: str, response_model: type[BaseModel]) -> Any:  # noqa: D102
        judged = await self.judge.send(
            self._messages(prompt),
            fast_schema(response_model),
            self.prompt_version,
            temperature=self.temperature,
        )
        return settled(response_model.__name__, judged)

    async def asamples(self, prompt: str, response_model: type[BaseModel], n: int) -> list[Judged]:
        """``n`` samples of ``prompt`` in sample order, as the judge's ``samples`` asks them."""
        return await self.judge.samples(
            n,
            self._messages(prompt),
            fast_schema(response_model),
            self.prompt_version,
            temperature=self.temperature,
        )


def ragas_llm(deps: Deps, language: str = "en", temperature: float | None = None) -> TracedLLM:
    """The ragas LLM for the judge, labelled in the call log with the prompt language used."""
    return TracedLLM(
        deps.llm,
        RAGAS_PROMPTS + ("+zh" if language in LOCALISED else ""),
        temperature=deps.temperature if temperature is None else temperature,
    )


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


def ragas_window(prompt: Any, data: BaseModel, mode: Literal["joined", "each"]) -> Window:
    """The request a ragas metric sends for ``data`` through ``prompt`` (contexts left empty)."""
    return structured_window(
        fast_schema(prompt.output_model),
        [{"role": "user", "content": prompt.to_string(data)}],
        mode,
    )


def ragas_call_tokens(prompt: Any, data: BaseModel, sheet: CostSheet) -> int:
    """Prompt tokens of one ragas judge call for ``data``: the schema message, then the prompt."""
    system, user = ragas_window(prompt, data, "joined").messages[:2]
    return sheet.chat_tokens(system, user)


__all__ = [
    "LOCALISED",
    "RAGAS_PROMPTS",
    "GatewayEmbeddings",
    "LocalisedPrompt",
    "TracedLLM",
    "embeddings",
    "fast_schema",
    "localise",
    "prompt_for",
    "ragas_call_tokens",
    "ragas_llm",
    "ragas_window",
]
