"""Judgments exchanged with the relevance tools teams already use, kept in the judgment store.

``ragaudit judgments import`` reads a team's judgments (Quepid's ratings CSV, book CSV and JSON,
RRE and LTR files; SRW's import bodies and stored lists; ``_rank_eval`` requests; Relevance
Studio's judgements; RankLib/SVMrank, the LTR plugin's CSV, TREC and BEIR qrels), from files or
live from an index, with a declared grade scale, and stores every row once with its source,
annotator, time, state and rationale (``_import.py``), resolving queries to questions and
documents to texts so a stored pair can spare a tune its grade and calibrate the judge
(``_resolve.py``). ``export`` writes the store's rows (or a run's or a tune's) in any format with
a loss report of what the format cannot hold (``_export.py``, ``_bodies.py``); ``stats`` sums the
store up (``_stats.py``). Each format is a registered unit (``register_format``), one module each.
"""

from ragaudit.judgments import (  # noqa: F401, I001  (register the built-in formats, in list order)
    _quepid_csv,
    _quepid_book_csv,
    _quepid_book,
    _quepid_hash,
    _rre,
    _ltr,
    _srw,
    _rank_eval,
    _esrs,
    _ranklib,
    _ltr_csv,
    _trec,
    _beir,
)
from ragaudit.judgments._bodies import graded_rows, run_rows, with_requests
from ragaudit.judgments._esrs import scenarios_file
from ragaudit.judgments._export import (
    Exported,
    Selection,
    as_frame,
    export_frame,
    grade_labels,
    store_rows,
    with_texts,
)
from ragaudit.judgments._format import (
    FRAME,
    JudgmentFormat,
    Read,
    Written,
    file_bytes,
    format_names,
    make_format,
    register_format,
)
from ragaudit.judgments._import import ImportReport, import_read
from ragaudit.judgments._live import read_index
from ragaudit.judgments._resolve import BackendTexts, CorpusTexts, match_questions
from ragaudit.judgments._scale import SCALES, GradeScale, scale_of
from ragaudit.judgments._stats import StoreStats, store_stats

__all__ = [
    "FRAME",
    "SCALES",
    "BackendTexts",
    "CorpusTexts",
    "Exported",
    "GradeScale",
    "ImportReport",
    "JudgmentFormat",
    "Read",
    "Selection",
    "StoreStats",
    "Written",
    "as_frame",
    "export_frame",
    "file_bytes",
    "format_names",
    "grade_labels",
    "graded_rows",
    "import_read",
    "make_format",
    "match_questions",
    "read_index",
    "register_format",
    "run_rows",
    "scale_of",
    "scenarios_file",
    "store_rows",
    "store_stats",
    "with_requests",
    "with_texts",
]
