"""What a day would ask, counted from the algorithms' own plans; no call, nothing written."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragaudit.audit._grade import pairs_of, skip_reason
from ragaudit.audit._reading import (
    draw,
    fetch_missing_texts,
    judge_of,
    read_traffic,
    sampled_rows,
    sampled_served,
)
from ragaudit.audit._served import REQUESTS, AuditDay, audit_root, audit_section, judgment_store
from ragaudit.config import RunConfig
from ragaudit.dataset import Question
from ragaudit.judging import grade_plan, lookup_pairs, pair_key, plan_grades, sample_judges


@dataclass
class DryRun:
    """What a day would ask, counted from the algorithms' own plans, no call made."""

    pairs: int = 0
    """Served (request, document) pairs to grade in the top k."""
    in_store: int = 0
    grade_calls: int = 0
    grade_tokens: int = 0
    metric_calls: dict[str, float] = field(default_factory=dict)
    metric_tokens: dict[str, float] = field(default_factory=dict)

    @property
    def judge_tokens(self) -> int:
        """Prompt tokens of every judge call the day would make."""
        return self.grade_tokens + round(sum(self.metric_tokens.values()))


async def dry_run_day(config: RunConfig, day: dt.date, tmp: Path) -> AuditDay:
    """Read and sample the day into ``tmp``; count the grading and scoring plans; no call."""
    from ragaudit.dryrun import Assumptions, Plan, estimate_score

    section = audit_section(config)
    read = read_traffic(section, day, tmp / REQUESTS)
    judge = judge_of(config, None)
    root = audit_root(config)
    sample, strata = draw(section, root, config.conversation, day, tmp / REQUESTS, judge)
    out = AuditDay(config, day, tmp, read, sample, strata=strata, plan=DryRun())
    rows = await fetch_missing_texts(config, sampled_rows(tmp / REQUESTS, sample))
    out.served = sampled_served(section, root, day, tmp / REQUESTS, rows, sample)
    plan = out.plan
    assert plan is not None
    # A follow-up's prompts hold its session's earlier turns: counted as they will be sent.
    questions, candidates = pairs_of(out.served, config.conversation, judge)
    plan.pairs = sum(len(s.docs) for s in out.served)
    found = lookup_pairs(judge, questions, candidates, judgment_store(config))
    plan.in_store = len(found)
    # One request per key, as the grading asks it.
    todo: dict[str, tuple[Question, dict[str, Any]]] = {}
    for qid, docs in candidates.items():
        for c in docs:
            if (qid, c["context_id"]) not in found:
                key = pair_key(judge, questions[qid], c["text"])
                todo.setdefault(key, (questions[qid], {"id": c["context_id"], "text": c["text"]}))
    models = config.models
    samples = grade_plan(
        models.graders, models.judge_repeats, models.temperature, config.score.sampling_temperature
    )
    graders = sample_judges(judge, samples, models)
    for q, doc in todo.values():
        for r in await plan_grades(
            graders,
            {q.question_id: q},
            {q.question_id: [{"context_id": doc["id"], "text": doc["text"]}]},
        ):
            plan.grade_calls += 1
            plan.grade_tokens += _prompt_tokens(r.model, r.messages)
    # The score stage's own estimator over the sampled requests, as a run of their metrics.
    scored = config.model_copy(
        update={"score": config.score.model_copy(update={"metrics": section.metrics})}
    )
    est = Plan(scored, Assumptions(), [s.judged(config.conversation, judge) for s in out.served])
    est.candidates = {
        s.request_id: [(d["id"], d["text"]) for d in s.docs if skip_reason(d) is None]
        for s in out.served
    }
    est.responses = {s.request_id: s.answer for s in out.served}
    await estimate_score(est)
    for line in est.lines:
        name = line.stage.split(":", 1)[-1]
        if line.kind == "completion":
            plan.metric_calls[name] = plan.metric_calls.get(name, 0.0) + line.calls
            plan.metric_tokens[name] = plan.metric_tokens.get(name, 0.0) + line.tokens_in
    return out


def _prompt_tokens(model: str, messages: list[dict[str, Any]]) -> int:
    from ragaudit.cache import usage_counter

    return usage_counter(model).prompt(messages)


__all__ = ["DryRun", "dry_run_day"]
