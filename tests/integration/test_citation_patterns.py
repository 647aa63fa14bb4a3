"""Citation patterns cannot hang a run: the default is linear, a user's is matched with a bound."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from ragaudit.cache import Gateway
from ragaudit.citations import DEFAULT_PATTERN, PatternTimeout, parse_citations
from ragaudit.config import ScoreConfig
from ragaudit.metrics import Deps, Sample, resolve
from ragaudit.tasks.score import score_rows

# The default before it was made linear: kept to show the rewrite reads the same citations.
BACKTRACKING_DEFAULT = (
    r"\[(?:doc)?\s*(\d+(?:\s*[,，]\s*(?:doc)?\s*\d+)*)\s*\]|【\s*(\d+(?:\s*[,，]\s*\d+)*)\s*】"
)

ADVERSARIAL = {
    "unclosed list, two spaces": "Fact [1" + ",  1" * 12500 + " x",
    "unclosed list, one space": "Fact [" + ", ".join(str(i) for i in range(1, 41)),
    "brackets": "[" * 50_000,
    "open items": "[1, " * 12_500,
    "fullwidth brackets": "【" * 50_000,
    "doc prefixes": "[doc" * 12_500,
}


@pytest.mark.parametrize("answer", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_default_pattern_finishes_on_adversarial_answers(answer: str) -> None:
    # A generous bound: the point is that the match ends, and a hang fails instead of hanging.
    parse_citations(answer, ["c0", "c1"], seconds=30.0)


def test_default_pattern_is_linear_under_the_standard_engine_too() -> None:
    # ``regex`` bounds the time; the pattern itself must not need it. Python's ``re`` cannot be
    # interrupted mid-match, so it runs in a child that a timeout can kill.
    code = (
        "import json, re, sys; from ragaudit.citations import DEFAULT_PATTERN; "
        "[re.findall(DEFAULT_PATTERN, a) for a in json.load(sys.stdin)]"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(list(ADVERSARIAL.values())),
        text=True,
        timeout=60,
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr


ORDINARY = [
    "The arch weighs 52800 tonnes [1]. The pylons are granite [2, 3].",
    "Steel [doc3]. Granite [doc 1 , doc2]. Lanes [1，2].",
    "桥长503米【1】。桥有八车道【2，3】。",
    "[1] Leading marker. Spaced [ 1 ,  2 ] list. Mixed [doc1,2].",
    "Unclosed [1, 2 and [doc. Nothing here.",
]


@pytest.mark.parametrize("answer", ORDINARY)
def test_default_pattern_reads_what_the_backtracking_one_read(answer: str) -> None:
    ids = [f"c{i}" for i in range(5)]
    old = [(c.text, c.cited, c.unknown) for c in parse_citations(answer, ids, BACKTRACKING_DEFAULT)]
    new = [(c.text, c.cited, c.unknown) for c in parse_citations(answer, ids, DEFAULT_PATTERN)]
    assert new == old
    assert [m.groups() for m in re.finditer(BACKTRACKING_DEFAULT, answer)] == [
        m.groups() for m in re.finditer(DEFAULT_PATTERN, answer)
    ]


CATASTROPHIC = r"(a|aa)+$"


def test_a_catastrophic_pattern_times_out_naming_itself() -> None:
    with pytest.raises(PatternTimeout, match=re.escape(repr(CATASTROPHIC))):
        parse_citations("a" * 200 + "!", ["c0"], CATASTROPHIC, seconds=0.2)


def test_a_pattern_is_checked_when_the_config_loads() -> None:
    with pytest.raises(ValidationError, match="not a regular expression"):
        ScoreConfig(citation_pattern=r"[1")
    with pytest.raises(ValidationError, match="capture group"):
        ScoreConfig(citation_pattern=r"\[\d+\]")


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    gw = Gateway(tmp_path / "memo", concurrency=16, backoff_s=0.0, max_retries=1)
    yield gw
    gw.close()


def _sample(qid: str, response: str) -> Sample:
    return Sample(qid, "Q?", "en", response, None, ["ctx"], ["c0"], None, None)


async def test_a_row_the_pattern_hangs_on_fails_and_the_rest_go_on(gateway: Gateway) -> None:
    deps = Deps.of(gateway, "fake/judge", "fake/embed", {"citation_pattern": CATASTROPHIC})
    samples = [_sample("hang", "a" * 200 + "!"), _sample("fine", "Granite [1].")]
    m = resolve("citation_uncited_share", deps.options)
    rows = {r["question_id"]: r for r in await score_rows(m, samples, deps, window=100_000)}
    assert rows["hang"]["status"] == "failed"
    assert "PatternTimeout" in rows["hang"]["error"] and CATASTROPHIC in rows["hang"]["error"]
    assert rows["fine"]["status"] == "skipped"  # cites nothing the pattern can read
