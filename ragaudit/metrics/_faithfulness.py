"""Faithfulness: the share of the answer's statements the retrieved contexts support."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from ragaudit.lang import sentences
from ragaudit.metrics._base import (
    CostSheet,
    Deps,
    JudgeError,
    Outcome,
    Sample,
    Skip,
    Window,
    metric,
)

if TYPE_CHECKING:
    from ragas.metrics import collections as rc


@cache
def _faithfulness_class() -> type[rc.Faithfulness]:
    from ragas.metrics import collections as rc
    from ragas.metrics.collections.faithfulness import util

    class _Faithfulness(rc.Faithfulness):
        """ragas's faithfulness; no statements, or a reply without verdicts, is said so.

        ragas returns NaN for both, which a script reading the score cannot tell apart from
        a parse failure.
        """

        async def _create_statements(self, question: str, response: str) -> list[str]:
            statements = await super()._create_statements(question, response)
            if not statements:
                raise Skip("the judge found no statements in the response")
            return statements

        async def _create_verdicts(
            self, statements: list[str], context: str
        ) -> util.NLIStatementOutput:
            verdicts = await super()._create_verdicts(statements, context)
            if not verdicts.statements:
                raise JudgeError("the judge returned no verdicts for the statements")
            return verdicts

    return _Faithfulness


def _window(s: Sample, deps: Deps) -> Window:
    from ragas.metrics.collections.faithfulness import util

    from ragaudit.metrics._ragas import prompt_for, ragas_window
    from ragaudit.prompts.statements import NLI_FAITHFULNESS

    # The verdict prompt holds every context and the statements (about the response's size).
    prompt = prompt_for(util.NLIStatementPrompt(), NLI_FAITHFULNESS, s.language)
    return ragas_window(
        prompt, util.NLIStatementInput(context="", statements=[s.response or ""]), "joined"
    )


def _cost(s: Sample, deps: Deps, sheet: CostSheet) -> None:
    from ragas.metrics.collections.faithfulness import util

    from ragaudit.metrics._ragas import prompt_for, ragas_call_tokens
    from ragaudit.prompts.statements import NLI_FAITHFULNESS, STATEMENTS_FAITHFULNESS

    # One call lists the answer's statements (about so many per sentence), one judges them all.
    found = sentences(s.response or "") or [s.response or ""]
    n = max(1, round(len(found) * sheet.assume.statements_per_sentence))
    statements = (found * n)[:n]
    statement_tokens = sheet.assume.statement_tokens
    gen = prompt_for(util.StatementGeneratorPrompt(), STATEMENTS_FAITHFULNESS, s.language)
    data = util.StatementGeneratorInput(question=s.question, answer=s.response or "")
    tokens = ragas_call_tokens(gen, data, sheet)
    sheet.tally("statements", "completion", 1, tokens, n * statement_tokens, "statement_tokens")
    nli = prompt_for(util.NLIStatementPrompt(), NLI_FAITHFULNESS, s.language)
    data2 = util.NLIStatementInput(context="\n".join(s.contexts), statements=statements)
    tokens = ragas_call_tokens(nli, data2, sheet)
    sheet.tally("verdicts", "completion", 1, tokens, 2 * n * statement_tokens, "statement_tokens")


@metric(
    "faithfulness",
    inputs=("question", "response", "contexts"),
    llm=True,
    window=_window,
    cost=_cost,
    order=10,
    conditioned=True,
    threshold=0.9,
)
async def faithfulness(s: Sample, deps: Deps) -> Outcome:
    """Share of the answer's statements that the retrieved contexts support."""
    from ragaudit.metrics._ragas import localise, ragas_llm
    from ragaudit.prompts.statements import NLI_FAITHFULNESS, STATEMENTS_FAITHFULNESS

    m = localise(
        _faithfulness_class()(llm=ragas_llm(deps, s.language)),
        s.language,
        statement_generator_prompt=STATEMENTS_FAITHFULNESS,
        nli_statement_prompt=NLI_FAITHFULNESS,
    )
    result = await m.ascore(
        user_input=s.question, response=s.response, retrieved_contexts=s.contexts
    )
    return Outcome(result.value)


__all__ = ["faithfulness"]
