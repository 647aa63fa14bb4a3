"""A judged run folder to label: graded verdicts (0-3) and the two answer metrics scored."""

from __future__ import annotations

import random
from pathlib import Path

from ragaudit.runfolder import RunFolder
from ragaudit.schemas import CANDIDATES, SCORES, VERDICTS, to_table
from support.html_runs import write_full_run

HOSTILE = '<script>document.title="owned"</script><img src=x onerror=alert(1)>'
"""A candidate text that would run if any page put it into HTML."""
JUDGE_SAYS = "JUDGE-VERDICT-MARK"
"""Starts every reason of the judge: a blind item must never hold it."""


def write_label_run(
    root: Path, run_id: str = "r1", *, n_questions: int = 8, seed: int = 0, hostile: bool = True
) -> Path:
    """A run with every question's candidates graded 0-3 by the judge (a few verdicts failed).

    With ``hostile``, the first candidate of every question starts with a script tag. Each
    candidate's text ends with its id: the bundled pools repeat a question and a passage across
    questions, and a pair labelled once is never asked again (its own tests), while these runs
    count positions one item each.
    """
    run_dir = write_full_run(
        root,
        run_id,
        n_questions,
        ["faithfulness", "answer_relevancy", "context_precision"],
        top_k=3,
        n_candidates=10,
        seed=seed,
    )
    run = RunFolder(root, run_id)
    rng = random.Random(seed)
    verdicts = run.read("verdicts").to_pylist()
    for row in verdicts:
        if rng.random() < 0.05:
            row.update(grade=None, relevant=None, status="failed", error="JudgeError: no grade")
        else:
            # Skewed as a judge's grades are: few 3s, so an even allocation matters.
            grade = rng.choices([0, 1, 2, 3], weights=[5, 3, 2, 1])[0]
            row.update(grade=grade, relevant=grade >= 2, reason=f"{JUDGE_SAYS} grade {grade}")
    run.write("verdicts", to_table(verdicts, VERDICTS))
    scores = run.read("scores").to_pylist()
    for row in scores:
        if row["reason"]:
            row["reason"] = f'{{"why": "{JUDGE_SAYS} {row["value"]}"}}'
    run.write("scores", to_table(scores, SCORES))
    cands = run.read("candidates").to_pylist()
    for row in cands:
        row["text"] = f"{row['text']} [{row['context_id']}]"
        if hostile and row["engine_rank"] == 1:
            row["text"] = HOSTILE + row["text"]
    run.write("candidates", to_table(cands, CANDIDATES))
    return run_dir
