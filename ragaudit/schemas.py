"""The Parquet tables a run writes, each with a schema version in its metadata.

Every table is keyed by ``run_id`` + ``question_id`` (+ ids). Nested or free-form values
(filters, metadata, reasons, merge trees) are stored as JSON text so that any Parquet reader
can open them.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

SCHEMA_VERSION = 1
"""The version of a table whose columns have not changed since the first release."""

_str, _f64, _i64, _bool = pa.string(), pa.float64(), pa.int64(), pa.bool_()
_strs = pa.list_(pa.string())


def _schema(
    name: str, fields: list[tuple[str, pa.DataType]], version: int = SCHEMA_VERSION
) -> pa.Schema:
    # Each table has its own version: bumped when its own columns change.
    return pa.schema(fields, metadata={"schema_version": str(version), "table": name})


QUESTIONS = _schema(
    "questions",
    [
        ("run_id", _str),
        ("question_id", _str),
        ("question", _str),
        ("language", _str),
        ("filters", _str),
        ("reference", _str),
        ("reference_context_ids", _strs),
        ("reference_contexts", _strs),
        ("response", _str),
        ("retrieved_contexts", _strs),
        ("metadata", _str),
        ("reference_context_grades", _str),  # JSON object: context id → grade
        # JSON object, null for a question that stands alone: conversation_id, turn, history
        # (the earlier turns), rewrite, answerability, turn_kind; history_cut, the earlier
        # turns left out of the judge's prompts (conversation.max_history_turns, the window).
        ("conversation", _str),
    ],
    version=2,
)

CANDIDATES = _schema(
    "candidates",
    [
        ("run_id", _str),
        ("question_id", _str),
        ("context_id", _str),
        ("text", _str),
        ("engine_rank", _i64),
        ("engine_score", _f64),
        ("gold_relevant", _bool),
        ("source", _str),
    ],
)

ANSWERS = _schema(
    "answers",
    [
        ("run_id", _str),
        ("question_id", _str),
        ("response", _str),
        ("status", _str),
        ("error", _str),
        ("source", _str),
        ("latency_s", _f64),
        ("citation_ids", _strs),  # what the answer's numbered citations point at, when given
    ],
    version=2,
)

VERDICTS = _schema(
    "verdicts",
    [
        ("run_id", _str),
        ("question_id", _str),
        ("context_id", _str),
        ("grade", _i64),  # 0-3; null when the verdict failed
        ("relevant", _bool),  # grade at or above sort.relevant_grade
        ("reason", _str),
        ("status", _str),
        ("error", _str),
        # What was done to fit the judge's window (the candidate judged in parts), else null.
        ("note", _str),
        # Every sample's grade (null: that sample failed) and its model, in the plan's order
        # (each judge's repeats in turn); null with one sample (no repeats, no jury).
        ("grade_samples", pa.list_(_i64)),
        ("grade_judges", _strs),
    ],
    version=4,
)

# The relevance grades' own noise: Krippendorff's alpha of each judge's repeats (kind self)
# and of a jury's members (kind jury), on the grade and on the relevant cut (scale).
GRADE_NOISE = _schema(
    "grade_noise",
    [
        ("run_id", _str),
        ("kind", _str),  # self | jury
        ("judge", _str),  # the judge (self), the jury's members joined by ", " (jury)
        ("scale", _str),  # grade | relevant
        ("level", _str),  # Krippendorff's level of measurement
        ("alpha", _f64),  # null: not measurable (fewer than two items, or no spread at all)
        ("ci_low", _f64),
        ("ci_high", _f64),
        ("n_items", _i64),  # candidates with two answers or more
        ("n_raters", _i64),  # samples (self) or judges (jury) per candidate
        ("disagreed", _i64),  # candidates whose answers were not all the same
    ],
)

COMPARISONS = _schema(
    "comparisons",
    [
        ("run_id", _str),
        ("question_id", _str),
        ("method", _str),  # pairwise | setwise | listwise
        ("first_id", _str),
        ("second_id", _str),
        ("choice_ab", _str),
        ("choice_ba", _str),
        ("outcome", _str),
        ("reason_ab", _str),
        ("reason_ba", _str),
        ("status", _str),
        ("error", _str),
        # What was done to fit the judge's window (contexts cut to their heads), else null.
        ("note", _str),
        # Setwise and listwise calls: the ids in the order shown, and the chosen id or the
        # judge's order (null when the call failed).
        ("shown_ids", _strs),
        ("chosen_ids", _strs),
    ],
    version=3,
)

RANKING = _schema(
    "ranking",
    [
        ("run_id", _str),
        ("question_id", _str),
        ("ordered_ids", _strs),
        ("tie_group", pa.list_(_i64)),
        ("exact_k", _i64),
        ("irrelevant_ids", _strs),
        ("unjudged_ids", _strs),
        ("strategy", _str),
        ("comparisons", _i64),
        ("judge_calls", _i64),
        ("status", _str),
        ("error", _str),
        ("order_mode", _str),  # full | head | none
        ("method", _str),  # pairwise:<strategy> | head:<method> | grades
        # What the question's grading and ordering asked of the judge: answers used and the
        # first prompt of each as the gateway counts it before sending, memo hits and answers
        # shared with an identical call included, repairs and retries not: what the question
        # costs on an empty memo. What was paid is in llm_calls (rows with cache_hit false:
        # tokens_in as the provider reports it, repairs included, cost_usd).
        ("relevance_calls", _i64),
        ("relevance_tokens", _i64),
        ("ordering_calls", _i64),
        ("ordering_tokens", _i64),
        ("ordering_failed", _i64),  # ordering calls (pairs, for pairwise) without an answer
        # Version 3: where the head came from: reused (the previous run's, no call), inserted
        # (new candidates placed into the previous run's head), fresh; null without a judged
        # order. Absent from tables of version 2 (read as null).
        ("head_source", _str),
        # Version 4: why a head was ordered afresh rather than built on the previous run's
        # (no such run, another judge, the question's text changed, ...); null otherwise.
        ("head_note", _str),
    ],
    version=4,
)

AGREEMENT = _schema(
    "agreement",
    [
        ("run_id", _str),
        ("question_id", _str),
        ("comparison", _str),
        ("metric", _str),
        ("k", _i64),
        ("value", _f64),
        ("overlap_ids", _strs),
        ("n_questions", _i64),
        ("status", _str),
        ("reason", _str),
        # Positions of the judge's order that were ordered exactly (null: all of them).
        ("exact_k", _i64),
    ],
    version=2,
)

GROUND_TRUTH = _schema(
    "ground_truth",
    [
        ("run_id", _str),
        ("question_id", _str),
        ("reference", _str),
        ("origin", _str),
        ("mode", _str),
        ("status", _str),
        ("error", _str),
        ("supporting_ids", _strs),
        ("merge_tree", _str),
        ("calls", _i64),
        ("tokens_in", _i64),
        ("tokens_out", _i64),
        # Version 2: the turn's answerability (answerable | partial | unanswerable |
        # underspecified | conversational), where it came from (given: the question set;
        # judged: this stage's judge; null: neither) and the judge's reason, or why it gave no
        # label (then the label is null). A version-1 table reads as all null.
        ("answerability", _str),
        ("answerability_source", _str),
        ("answerability_reason", _str),
    ],
    version=2,
)

NUGGETS = _schema(
    "nuggets",
    [
        ("run_id", _str),
        ("question_id", _str),
        ("nugget_index", _i64),  # 0-based rank in the question's list (vital first); null: none
        ("text", _str),
        ("importance", _str),  # vital | okay
        ("context_ids", _strs),  # the contexts that state the nugget
        ("status", _str),  # the question's: ok | partial | insufficient | failed | skipped
        ("reason", _str),  # why the list may be incomplete, or why there is none
        ("calls", _i64),  # the question's extraction calls (on every row of the question)
        ("tokens_in", _i64),
        ("tokens_out", _i64),
    ],
)

SCORES = _schema(
    "scores",
    [
        ("run_id", _str),
        ("question_id", _str),
        ("metric", _str),
        ("value", _f64),
        ("status", _str),
        ("error", _str),
        ("reason", _str),
        ("k_used", _i64),
        ("judge", _str),
        ("metric_args", _str),
        # Every (judge, repeat) score of the row, null for a failed sample, and whose sample
        # each is; null with one sample (``value`` is then that sample).
        ("samples", pa.list_(_f64)),
        ("sample_judges", _strs),
        # Version 3: the answerability label an answer metric's row was scored under (null:
        # unconditioned, as every row of a set without labels), and why its value is the
        # conditioning rule's rather than the metric's own (null: the metric's own value).
        ("answerability", _str),
        ("conditioned", _str),
    ],
    version=3,
)

SUMMARY = _schema(
    "summary",
    [
        ("run_id", _str),
        ("metric", _str),
        ("mean", _f64),
        ("ci_low", _f64),
        ("ci_high", _f64),
        ("n_ok", _i64),
        ("n_failed", _i64),
        ("n_skipped", _i64),
        ("threshold", _f64),
        ("flagged", _bool),
        # Version 2: the mean corrected by people's labels (prediction-powered inference,
        # ``ragaudit.ppi``), null without labels of the metric; a version-1 table reads as
        # all null.
        ("ppi_mean", _f64),
        ("ppi_ci_low", _f64),
        ("ppi_ci_high", _f64),
        ("n_labels", _i64),  # labelled answers the correction rests on
        ("labels_to_halve", _i64),  # more labels that would halve its interval
        # Version 3: rows of kind ``figure`` beside the ``metric`` rows, one per figure of the
        # judged candidates people's grade labels correct (``ragaudit.ppi.FIGURES``: the
        # relevant share, NDCG@10): ``metric`` names it, ``mean``/``ci_*`` are the judge's,
        # ``n_ok`` counts its judged items (candidates, or questions for NDCG@10) and
        # ``n_labels`` its labelled ones. Written only with grade labels; an older table reads
        # as metric rows with a null note.
        ("kind", _str),  # metric | figure | breakdown
        ("ppi_note", _str),  # why the PPI columns are null, or how the labels were weighted
        # Version 4: rows of kind ``breakdown``, written only for a question set with
        # conversations: a metric's summary over the questions of one ``cell`` (``1``,
        # ``follow-up``, ``unanswerable`` …) of one ``breakdown`` (``turn_band``, ``turn_kind``,
        # ``answerability``; ``ragaudit.reporting``'s breakdowns), with the PPI columns null.
        # Null on every other row: a set of lone questions writes the rows it wrote before.
        ("breakdown", _str),
        ("cell", _str),
    ],
    version=4,
)

JUDGE_NOISE = _schema(
    "judge_noise",
    [
        ("run_id", _str),
        ("metric", _str),
        ("kind", _str),  # self (a judge's repeats) | jury (the judges' per-row means)
        ("judge", _str),
        ("alpha", _f64),  # Krippendorff's α, interval level
        ("ci_low", _f64),
        ("ci_high", _f64),
        ("n_items", _i64),
        ("n_raters", _i64),
    ],
)

RETRIEVAL = _schema(
    "retrieval",
    [
        ("run_id", _str),
        ("question_id", _str),
        ("backend", _str),
        ("status", _str),  # ok | empty | failed
        ("error", _str),
        ("n_candidates", _i64),
        ("top_n", _i64),
        ("latency_s", _f64),
        # What was searched (null: nothing was, the question set's own contexts): the text
        # sent, the query form asked (collect.query_form), where the text came from
        # (utterance | history | given | judge) and why a judge's rewrite is missing (the
        # history form searched instead).
        ("query", _str),
        ("query_form", _str),
        ("query_source", _str),
        ("query_error", _str),
    ],
    version=2,
)

CALIBRATION = _schema(
    "calibration",
    [
        ("run_id", _str),
        ("kind", _str),
        ("dataset", _str),
        ("metric", _str),
        ("family", _str),
        ("statistic", _str),
        ("value", _f64),
        ("ci_low", _f64),
        ("ci_high", _f64),
        ("n", _i64),
        ("note", _str),
        ("judge", _str),
        ("embedder", _str),
    ],
)
# Every item a calibration scored, as score rows (question_id is the item's id); version 2
# with the scores' version 3 columns (null: calibration items carry no answerability).
CALIBRATION_SCORES = _schema("calibration_scores", [(f.name, f.type) for f in SCORES], version=2)
# Per-grade calibration: one row per human grade label, with the judge's grade of its context.
CALIBRATION_GRADES = _schema(
    "calibration_grades",
    [
        ("run_id", _str),
        ("question_id", _str),
        ("context_id", _str),
        ("human_grade", _i64),
        ("judge_grade", _i64),
        ("status", _str),
        ("error", _str),
        ("reason", _str),
    ],
)

# Blind pairwise battles of B against A, written in B's folder: one row per judge answer.
LEADERBOARD = _schema(
    "leaderboard",
    [
        ("rank", _i64),
        ("run", _str),
        ("strength", _f64),  # Davidson log-strength, centred at 0
        ("ci_low", _f64),  # 95 % bootstrap interval over questions
        ("ci_high", _f64),
        ("unbounded", _bool),  # won or lost every battle: the strength is a bound, not a figure
        ("tie_param", _f64),  # the model's nu (the same on every row)
        ("verdicts", _i64),  # usable verdicts the fit used (the same on every row)
    ],
)

LABELS = _schema(
    "labels",
    [
        # A folder's view of people's labels (``labels.read_labels``), derived from the runs
        # root's judgment store: one row per label a person gave of an item of the folder, there
        # or wherever its pair appeared; the latest row of an (item, annotator) pair is that
        # person's label (``back`` then a new key corrects it). Version 1 (its first seven
        # columns) is also the layout of the per-folder files of runs labelled before the store.
        ("item_id", _str),  # "<kind>:<question_id>[:<candidate_id>]"
        ("kind", _str),  # "grade" (a candidate's 0-3 relevance) or a judged metric's name
        ("question_id", _str),
        ("candidate_id", _str),  # null for an answer-level item
        ("annotator", _str),
        ("label", _f64),  # a grade 0-3, or 1.0/0.0 for yes/no; null for "skipped"
        ("time", pa.timestamp("us", tz="UTC")),
        # Version 2: where it was given (a folder of the runs root, or ``imported: <source>``)
        # and the store's key of what it judged.
        ("given_in", _str),
        ("key", _str),
    ],
    version=2,
)

# The items people label, drawn once per run and shared by every annotator in this order: the
# stratum each was drawn from and its size, so that an estimate can weight the strata back.
LABEL_SAMPLE = _schema(
    "label_sample",
    [
        ("position", _i64),  # 0-based place in the labelling order
        ("item_id", _str),
        ("kind", _str),
        ("question_id", _str),
        ("candidate_id", _str),
        ("stratum", _str),  # grades: "top 10" or "rest, judge 2" within the question; answers:
        # the score bin ("low [0, 1/3)"); a sample of version 1: the judge's grade ("0".."3")
        ("stratum_size", _i64),  # items in that stratum (of the question, for a grade item)
        ("stratum_sampled", _i64),  # of which drawn
        ("seed", _i64),
        # Version 2: the design, so that every estimate can weight an item back.
        ("design", _str),  # "two-stage" (grades: questions, then strata) or "stratified"
        ("psu_size", _i64),  # grades: questions with a judged candidate (the first stage)
        ("psu_sampled", _i64),  # grades: questions drawn
        ("inclusion", _f64),  # the item's chance of being drawn (both stages together)
        ("run_signature", _str),  # the judged items it was drawn from (another run's: refused)
        ("sample_id", _str),  # this draw's id
        ("drawn_at", pa.timestamp("us", tz="UTC")),
    ],
    version=2,
)

BATTLES = _schema(
    "battles",
    [
        ("run_a", _str),
        ("run_b", _str),
        ("question_id", _str),
        ("order", _str),  # AB: A shown as answer 1; BA: B shown first
        ("verdict", _str),  # A | B | tie; null when the answer failed
        ("reason", _str),
        ("judge", _str),
        ("repeat", _i64),
        ("status", _str),
        ("error", _str),
    ],
)

# ``ragaudit tune``: the variant × metric table of a tune's folder, and the judgment store
# that every tune (and run) of the same questions reads before paying for a grade.
TUNE = _schema(
    "tune",
    [
        ("tune", _str),
        ("variant", _str),
        ("metric", _str),  # ndcg | precision | recall | mrr, at ``depth``
        ("depth", _i64),
        ("status", _str),  # ok | failed
        ("error", _str),
        ("rank", _i64),  # by the tuning questions' mean of the first metric, 1 = best
        ("n_tuning", _i64),
        ("mean", _f64),  # over the tuning questions
        ("ci_low", _f64),
        ("ci_high", _f64),
        ("diff", _f64),  # mean − baseline's, tuning questions
        ("p_value", _f64),  # paired permutation test against the baseline
        ("p_adjusted", _f64),  # across variants (report.adjustment)
        ("n_heldout", _i64),
        ("heldout_gain", _f64),  # mean − baseline's, held-out questions
        ("heldout_ci_low", _f64),
        ("heldout_ci_high", _f64),
        ("heldout_p", _f64),
        ("judged_at_k", _f64),  # share of its top-k with a grade
        ("condensed", _bool),  # metrics over judged documents only (a budget stopped grading)
        ("latency_p50_s", _f64),
        ("latency_p95_s", _f64),
        ("winner", _bool),  # picked on the tuning questions
        ("recommended", _bool),  # better than the baseline beyond noise on held-out questions
        ("params", _str),  # JSON: template parameters
        ("changes", _str),  # JSON: collect fields changed over the baseline
    ],
)

# ``ragaudit tune`` over query forms (``collect.query_form``) on conversations: each variant
# whose form differs from the baseline's, its gain per group of turns, paired by question.
TUNE_TURNS = _schema(
    "tune_turns",
    [
        ("tune", _str),
        ("variant", _str),
        ("query_form", _str),  # last | history | rewrite
        ("metric", _str),  # at ``depth``
        ("depth", _i64),
        ("breakdown", _str),  # turn_band | turn_kind
        ("group", _str),  # 1 | 2 | 3-5 | 6+; standalone | non-standalone
        ("n", _i64),  # questions paired (all of them: tuning and held out)
        ("labelled", _i64),  # turn_kind: groups the set gave (the rest by turn position)
        ("baseline", _f64),  # the baseline's mean over them
        ("mean", _f64),  # the variant's
        ("gain", _f64),  # mean − baseline
        ("ci_low", _f64),  # paired bootstrap 95% interval of the gain
        ("ci_high", _f64),
        ("p_value", _f64),  # paired permutation test
        ("p_adjusted", _f64),  # across the groups of the breakdown (report.adjustment)
    ],
)

JUDGMENTS = _schema(
    "judgments",
    [
        # Hash of everything that changes the grade: the judge (model, temperature, window,
        # answer budget), the prompt, the question's language and text, the document's text.
        ("key", _str),
        ("judge", _str),
        ("prompt", _str),  # name@version
        ("question_hash", _str),
        ("text_hash", _str),
        ("question_id", _str),
        ("context_id", _str),
        ("grade", _i64),
        ("reason", _str),
        ("source", _str),  # what paid for it: ``tune:<name>``
        ("created_at", _str),
        # Version 2: the rest of the key's inputs, kept readable beside it (absent from
        # version 1 parts, whose keys left them out and so match no version 2 key).
        ("temperature", _f64),
        ("window", _i64),
        ("max_tokens", _i64),
        ("language", _str),
        # Version 3: people's and imported judgments beside the judge's (absent from earlier
        # parts, whose rows are all the judge's). A person's or an imported row is keyed by its
        # question and document text alone (``judging.label_key``), or, when its document was
        # not resolved to a text, by the source's own reference (``judging.ref_key``).
        ("source_kind", _str),  # judge | person | imported (null: judge)
        ("annotator", _str),  # who gave it (a person, a rater's e-mail); null for the judge
        ("state", _str),  # graded | unrateable | later (null: graded); unjudged has no row
        ("source_value", _str),  # the grade as the source wrote it ("3.000", "0.9")
        ("scale", _str),  # the declared scale (canonical JSON) mapping source_value to grade
        ("query", _str),  # the query as the source (or the judge) saw it
        ("doc_index", _str),  # the document's index (``_index``), where the source names one
        ("role", _str),  # people | gold | seed (a grade standing in for the judge's)
        ("format", _str),  # the format it was imported from
        ("extra", _str),  # JSON object: what else the source said (positions, fields, features)
        # Version 4: a person's yes/no on an answer beside the grades (absent before: every row
        # is a document's relevance). The answer metric it is of (faithfulness,
        # answer_relevancy); null for a document's grade. Keyed apart (``answer_key``).
        ("metric", _str),
    ],
    version=4,
)

# The texts of the documents (and questions) the judgment store's people's and imported rows were
# resolved to, by hash: what a calibration or an export needs and the rows themselves hash away.
JUDGMENT_TEXTS = _schema(
    "judgment_texts",
    [
        ("text_hash", _str),
        ("text", _str),
    ],
)

# The production audit's grades of one day (``ragaudit audit``): one row per sampled request and
# served rank within the top k, whatever became of it.
AUDIT_VERDICTS = _schema(
    "verdicts",
    [
        ("audit", _str),
        ("day", _str),  # YYYY-MM-DD
        ("request_id", _str),
        ("unit", _str),  # the sampled unit the request represents
        ("rank", _i64),  # served order, from 1
        ("doc_id", _str),
        ("grade", _i64),  # 0-3; null unless status is ok
        ("status", _str),  # ok | failed | skipped
        ("reason", _str),  # the judge's reason, or why the grade failed or was skipped
        ("source", _str),  # store (graded earlier) | memo | paid
        ("changed", _bool),  # the document's text changed since it was served
        ("text_hash", _str),  # hash of the text graded: a later day tells a rewrite by it
        ("turn", _i64),  # the request's place in its session, from 1; null: no session
        ("history_incomplete", _bool),  # its session may have begun before the days read
    ],
    version=2,
)

# One row per sampled request and metric: the served list's metrics from its grades and the
# answer metrics, each ok, failed (with the error) or skipped (with the reason).
AUDIT_SCORES = _schema(
    "scores",
    [
        ("audit", _str),
        ("day", _str),
        ("request_id", _str),
        ("unit", _str),
        ("segment", _str),
        ("metric", _str),
        ("value", _f64),
        ("status", _str),
        ("error", _str),
        ("reason", _str),
        ("k_used", _i64),
        ("judge", _str),
        ("metric_args", _str),
        ("samples", pa.list_(_f64)),
        ("sample_judges", _strs),
        ("turn", _i64),  # the request's place in its session, from 1; null: no session
        ("history_incomplete", _bool),  # its session may have begun before the days read
    ],
    version=2,
)

# The production audit's one normalised table of a day's traffic (``ragaudit.audit``): one row
# per served request, whatever the source (request log, OTLP traces, UBI), every text redacted.
AUDIT_DOC = pa.struct(
    [
        ("rank", pa.int32()),  # served order, from 1
        ("id", _str),
        ("text", _str),  # null: the log carried only the id (fetched by id later)
        ("content_hash", _str),  # the hash the service logged of the text it served, if any
        ("score", _f64),
    ]
)
AUDIT_REQUESTS = _schema(
    "requests",
    [
        ("request_id", _str),
        ("time", pa.timestamp("us", tz="UTC")),
        ("session", _str),
        ("query", _str),
        ("filters", _str),  # JSON object
        ("segment", _str),  # audit.segment over the request; "(none)" when it finds nothing
        ("docs", pa.list_(AUDIT_DOC)),
        ("answer", _str),
        ("citations", _str),  # JSON list
        ("feedback", _str),
        ("origin", _str),  # "<file>:<line>" or "ubi:<query id>": where the record came from
    ],
)

# ``ragaudit audit``: the day's draw (one row per drawn unit: a segment's distinct normalised
# query) and the population estimates made from it.
AUDIT_SAMPLE = _schema(
    "audit_sample",
    [
        ("unit", _str),  # hash of segment + normalised query, no salt: the same every day
        ("request_id", _str),  # a request of the unit graded (one row each; ADR 21)
        ("segment", _str),
        ("band", _str),  # head | torso | tail, by the unit's requests that day
        ("stratum", _str),  # "<segment>/<band>"
        ("query_norm", _str),
        ("count", _i64),  # requests of the unit that day
        ("stratum_units", _i64),
        ("stratum_requests", _i64),
        ("pi", _f64),  # the unit's inclusion probability
        ("weight", _f64),  # requests this one represents: count / (pi * requests_drawn)
        ("requests_drawn", _i64),  # requests of the unit graded (the second stage)
        ("pi_within", _f64),  # a graded request's chance within its unit: requests_drawn / count
        # The request's place in its session, from 1 (a lower bound when history_incomplete);
        # null: no session. history_incomplete: the session may have begun before the earliest
        # day read, so earlier turns may be missing from its judge prompts.
        ("turn", _i64),
        ("history_incomplete", _bool),
    ],
    version=3,
)

AUDIT_ESTIMATES = _schema(
    "audit_estimates",
    [
        ("segment", _str),  # "(all)" for the whole traffic
        ("metric", _str),
        ("estimate", _f64),  # design-weighted (Hajek) mean over requests
        ("se", _f64),  # its standard error (the interval is estimate +- t se)
        ("ci_low", _f64),  # 95 %, Taylor linearisation over the strata
        ("ci_high", _f64),
        ("n", _i64),  # sampled units with an ok value
        ("requests", _f64),  # requests those units represent (sum of weights)
        ("ess", _f64),  # Kish's effective sample size
        ("method", _str),
        ("ppi_estimate", _f64),  # null without people's labels
        ("ppi_se", _f64),
        ("ppi_ci_low", _f64),
        ("ppi_ci_high", _f64),
        ("ppi_n", _i64),  # sampled units people labelled (with a judge value too)
    ],
)

# An audit day against its series (``changes.parquet``): one row per segment × metric ×
# comparison (the day before, the trailing week) × part — the whole change (``total``), then
# its split by cause (ADR 24). Version 1 (no ``part``) held the whole changes only.
AUDIT_CHANGES = _schema(
    "audit_changes",
    [
        ("segment", _str),  # "(all)" for the whole traffic
        ("metric", _str),
        ("against", _str),  # previous | baseline
        ("reference_days", _strs),
        ("part", _str),  # total | between | within | content | engine | new
        ("cause", _str),  # the cause the row's line names; null when it is no line's
        ("kind", _str),  # alarm | traffic | better | small; null: no line
        ("estimate", _f64),  # today's figure (total rows)
        ("reference", _f64),  # the reference's figure (total rows)
        ("diff", _f64),  # the change (total) or the part of it
        ("se", _f64),
        ("ci_low", _f64),  # 1 - report.alpha interval
        ("ci_high", _f64),
        ("p_value", _f64),
        ("p_adjusted", _f64),  # Benjamini-Hochberg within the comparison
        ("moved", _bool),  # beyond noise: adjusted p < alpha and the interval excludes 0
        ("small", _bool),  # beyond noise but under min_change
        ("min_change", _f64),  # the metric's audit.min_change
        ("regressed", _bool),  # moved, at least min_change, for the worse (a part: not traffic)
        ("higher_is_better", _bool),
        ("attribution", _str),  # total rows: the cause(s) of the change
        ("reasons", _strs),
        ("behind", _strs),  # overall parts: the segments behind it, each with its share
        ("pairs", _i64),  # queries drawn on both days
    ],
    version=2,
)

# An audit day's estimates broken down by the request's place in its session, over every segment:
# each cell a domain of the day's design (the same weights and strata, its own requests only).
AUDIT_TURN_ESTIMATES = _schema(
    "audit_turn_estimates",
    [
        ("breakdown", _str),  # turn_band | turn_kind
        ("cell", _str),  # 1, 2, 3-5, 6+ | standalone, follow-up, (unknown); (no session)
        ("metric", _str),
        ("estimate", _f64),
        ("se", _f64),
        ("ci_low", _f64),
        ("ci_high", _f64),
        ("n", _i64),  # graded requests of the cell with an ok value
        ("incomplete", _i64),  # of those, history incomplete (their turn a lower bound)
        ("requests", _f64),
        ("ess", _f64),
        ("method", _str),
        ("ppi_estimate", _f64),
        ("ppi_se", _f64),
        ("ppi_ci_low", _f64),
        ("ppi_ci_high", _f64),
        ("ppi_n", _i64),
    ],
)

# The items people may label of an audit day, in the one order every annotator follows: each
# sampled request's served documents (a grade 0-3) and its answer (yes/no per answer metric),
# with the texts shown, never the judge's grade or score (the labelling is blind).
AUDIT_LABEL_ITEMS = _schema(
    "audit_label_items",
    [
        ("position", _i64),  # 0-based place in the labelling order
        ("item_id", _str),  # "<kind>:<request_id>[:<doc_id>]"
        ("kind", _str),  # "grade" or an answer metric's name
        ("unit", _str),  # the sampled unit the request represents
        ("request_id", _str),
        ("doc_id", _str),  # null for an answer item
        ("query", _str),
        ("text", _str),  # the served document's text (grade items)
        ("answer", _str),  # the answer served (answer items)
        ("contexts", _strs),  # the served documents' texts the answer's judge read
        # Version 2: the question as the judge saw it (a turn: its session's conversation so
        # far, then the query), what a label of the item is keyed by; null: the query; and the
        # turn's conversation (JSON: history, history_cut), null for a request alone.
        ("asked", _str),
        ("conversation", _str),
    ],
    version=2,
)

TABLES: dict[str, pa.Schema] = {
    s.metadata[b"table"].decode(): s
    for s in (
        QUESTIONS,
        CANDIDATES,
        ANSWERS,
        VERDICTS,
        GRADE_NOISE,
        COMPARISONS,
        RANKING,
        AGREEMENT,
        GROUND_TRUTH,
        NUGGETS,
        SCORES,
        SUMMARY,
        JUDGE_NOISE,
        RETRIEVAL,
        CALIBRATION,
        CALIBRATION_SCORES,
        CALIBRATION_GRADES,
        BATTLES,
    )
}


def schema_version(schema: pa.Schema) -> int:
    """The ``schema_version`` in a table schema's metadata (0 when it has none)."""
    return int((schema.metadata or {}).get(b"schema_version", b"0"))


def to_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Rows (dicts) to a table of ``schema``; missing keys become nulls, extra keys are an error."""
    names = set(schema.names)
    for row in rows[:1]:
        extra = set(row) - names
        if extra:
            raise ValueError(
                f"{schema.metadata[b'table'].decode()}: unknown columns {sorted(extra)}"
            )
    return pa.Table.from_pylist([{n: r.get(n) for n in schema.names} for r in rows], schema=schema)


def dumps(obj: Any) -> str:
    """Compact JSON text for a Parquet string column."""
    return json.dumps(obj, ensure_ascii=False, default=str)


__all__ = ["SCHEMA_VERSION", "TABLES", "dumps", "schema_version", "to_table"] + [
    "AGREEMENT",
    "ANSWERS",
    "AUDIT_DOC",
    "AUDIT_CHANGES",
    "AUDIT_ESTIMATES",
    "AUDIT_LABEL_ITEMS",
    "AUDIT_REQUESTS",
    "AUDIT_SAMPLE",
    "AUDIT_SCORES",
    "AUDIT_TURN_ESTIMATES",
    "AUDIT_VERDICTS",
    "BATTLES",
    "CANDIDATES",
    "COMPARISONS",
    "GRADE_NOISE",
    "GROUND_TRUTH",
    "JUDGE_NOISE",
    "JUDGMENTS",
    "JUDGMENT_TEXTS",
    "NUGGETS",
    "QUESTIONS",
    "RANKING",
    "RETRIEVAL",
    "SCORES",
    "SUMMARY",
    "TUNE",
    "TUNE_TURNS",
    "VERDICTS",
]
