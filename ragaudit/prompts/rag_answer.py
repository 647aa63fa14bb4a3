"""The reference RAG pipeline's generator: answer a question from retrieved chunks only."""

from __future__ import annotations

from pydantic import BaseModel, Field

from ragaudit.prompts._base import Prompt


class RagAnswerInput(BaseModel):
    """A question and the chunks the retriever returned, best first."""

    question: str
    contexts: list[str]


class RagAnswer(BaseModel):
    """The answer, written from the contexts alone."""

    answer: str = Field(min_length=1)


RAG_ANSWER = Prompt(
    name="rag_answer",
    version="1",
    input_model=RagAnswerInput,
    output_model=RagAnswer,
    instruction={
        "en": (
            "You answer questions for a retrieval-augmented assistant. Answer the question "
            "using only the information in the contexts, in a few sentences. If the contexts "
            "do not contain the answer, say that you do not know; never add facts from memory."
        ),
        "zh": (
            "你是检索增强问答助手。只根据给定的文档片段回答问题，用几句话作答。如果片段中没有答案，就回答"
            "不知道；不要加入片段以外的事实。"
        ),
    },
    examples={
        "en": [
            (
                RagAnswerInput(
                    question="When was the Eiffel Tower built?",
                    contexts=[
                        "The Eiffel Tower was built from 1887 to 1889 for the World's Fair.",
                        "The tower is 330 metres tall.",
                    ],
                ),
                RagAnswer(answer="It was built from 1887 to 1889, for the World's Fair."),
            )
        ],
        "zh": [
            (
                RagAnswerInput(
                    question="埃菲尔铁塔是哪一年建成的？",
                    contexts=[
                        "埃菲尔铁塔于1887年至1889年建造，为世界博览会而建。",
                        "铁塔高330米。",
                    ],
                ),
                RagAnswer(answer="埃菲尔铁塔于1887年至1889年建造，1889年建成，为世界博览会而建。"),
            )
        ],
    },
)

__all__ = ["RAG_ANSWER", "RagAnswer", "RagAnswerInput"]
