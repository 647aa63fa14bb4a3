"""Prompts as typed data: an input model, an output model, an instruction and examples per language.

A prompt renders to chat messages; its ``version`` goes into every memo key, so editing a
prompt's text (and bumping the version) can never serve answers to the old wording.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

I = TypeVar("I", bound=BaseModel)  # noqa: E741
O = TypeVar("O", bound=BaseModel)  # noqa: E741

LANGUAGES = ("en", "zh")

_LABELS = {
    "en": {
        "examples": "Examples",
        "input": "Input",
        "output": "Output",
        "now": "Now the real input",
    },
    "zh": {"examples": "示例", "input": "输入", "output": "输出", "now": "下面是真实输入"},
}


@dataclass(frozen=True)
class Prompt(Generic[I, O]):
    """One judge prompt in every supported language."""

    name: str
    version: str
    input_model: type[I]
    output_model: type[O]
    instruction: dict[str, str]
    examples: dict[str, list[tuple[I, O]]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """``name@version``: what the memo key and the call log record."""
        return f"{self.name}@{self.version}"

    def language(self, lang: str) -> str:
        """The language used for ``lang``: itself when supported, else English."""
        return lang if lang in self.instruction else "en"

    def messages(self, inp: I, lang: str = "en") -> list[dict[str, Any]]:
        """System instruction, then examples and the input as JSON in the user message."""
        lang = self.language(lang)
        labels = _LABELS.get(lang, _LABELS["en"])
        parts: list[str] = []
        examples = self.examples.get(lang) or []
        if examples:
            parts.append(f"{labels['examples']}:")
            for ex_in, ex_out in examples:
                parts.append(
                    f"{labels['input']}: {_dump(ex_in)}\n{labels['output']}: {_dump(ex_out)}"
                )
            parts.append(f"{labels['now']}:")
        parts.append(f"{labels['input']}: {_dump(inp)}\n{labels['output']}:")
        return [
            {"role": "system", "content": self.instruction[lang]},
            {"role": "user", "content": "\n\n".join(parts)},
        ]


def _dump(model: BaseModel) -> str:
    return json.dumps(model.model_dump(mode="json"), ensure_ascii=False)


__all__ = ["LANGUAGES", "Prompt"]
