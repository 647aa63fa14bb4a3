"""ragas's metric prompts with a Chinese side: English as ragas writes it, Chinese ours."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ragaudit.prompts._base import Prompt

Example = tuple[dict[str, Any], dict[str, Any]]


def typed(
    example: Example,
    input_model: type[BaseModel],
    output_model: type[BaseModel],
    rename: dict[str, str] | None = None,
) -> tuple[BaseModel, BaseModel]:
    """One example as instances of the given models, renaming input fields (``answer``→``text``)."""
    inp = {(rename or {}).get(k, k): v for k, v in example[0].items()}
    return input_model.model_validate(inp), output_model.model_validate(example[1])


def translated(
    name: str,
    source: Any,
    zh: str,
    examples_zh: list[Example],
    *,
    input_model: type[BaseModel] | None = None,
    output_model: type[BaseModel] | None = None,
    rename: dict[str, str] | None = None,
    version: str = "1",
) -> Prompt:
    """A prompt whose English side is the ragas prompt class ``source``, its Chinese side ours.

    ``input_model``/``output_model`` default to ``source``'s; give them when ragas declares the
    same wording again for another metric's models (``rename`` maps the example fields).
    """
    inp = input_model or source.input_model
    out = output_model or source.output_model
    english = [
        typed((i.model_dump(), o.model_dump()), inp, out, rename) for i, o in source.examples
    ]
    return Prompt(
        name=name,
        version=version,
        input_model=inp,
        output_model=out,
        instruction={"en": source.instruction, "zh": zh},
        examples={"en": english, "zh": [typed(e, inp, out, rename) for e in examples_zh]},
    )


__all__ = ["Example", "translated", "typed"]
