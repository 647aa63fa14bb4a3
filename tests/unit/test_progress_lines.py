"""Progress as plain lines when the output is not a terminal: a stage shows life every ~10 s."""

from __future__ import annotations

import threading

import pytest

from ragaudit import progress
from ragaudit.progress import LineReporter


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_long_stage_prints_a_line_every_interval_and_its_end() -> None:
    lines: list[str] = []
    clock = _Clock()
    progress.set_reporter(LineReporter(lines.append, every_s=10.0, clock=clock))
    try:
        with progress.bar("score:faithfulness", 30) as bar:
            for _ in range(30):
                clock.now += 1.0
                bar.advance()
    finally:
        progress.set_reporter(None)
    assert lines[0] == "score:faithfulness: started, 0/30"
    assert lines[1:-1] == [
        "score:faithfulness: 10/30, 10 s",
        "score:faithfulness: 20/30, 20 s",
        "score:faithfulness: 30/30, 30 s",
    ]
    assert lines[-1] == "score:faithfulness: done, 30/30 in 30 s"


def test_a_quick_stage_prints_its_start_and_end_only() -> None:
    lines: list[str] = []
    clock = _Clock()
    reporter = LineReporter(lines.append, every_s=10.0, clock=clock)
    handle = reporter.start("sort", 3)
    for _ in range(3):
        clock.now += 0.5
        reporter.advance(handle)
    reporter.finish(handle)
    assert lines == ["sort: started, 0/3", "sort: done, 3/3 in 2 s"]


def test_two_stages_at_once_keep_their_own_counts() -> None:
    lines: list[str] = []
    clock = _Clock()
    reporter = LineReporter(lines.append, every_s=10.0, clock=clock)
    a, b = reporter.start("score:a", 5), reporter.start("score:b", 5)
    clock.now += 11.0
    reporter.advance(a, 2)
    reporter.advance(b, 4)
    assert lines[2:] == ["score:a: 2/5, 11 s", "score:b: 4/5, 11 s"]


def test_a_stalled_stage_still_prints_its_count_every_interval() -> None:
    """One slow call holds a stage's count still; the log must show it is alive."""
    lines: list[str] = []
    clock = _Clock()
    reporter = LineReporter(lines.append, every_s=10.0, clock=clock)
    handle = reporter.start("sort: relevance", 19)
    reporter.advance(handle, 8)
    clock.now += 5.0
    reporter.tick()
    assert lines == ["sort: relevance: started, 0/19"]
    clock.now += 6.0
    reporter.tick()
    clock.now += 10.0
    reporter.tick()
    reporter.tick()
    assert lines[1:] == ["sort: relevance: 8/19, 11 s", "sort: relevance: 8/19, 21 s"]
    reporter.finish(handle)
    reporter.tick()
    assert lines[-1] == "sort: relevance: done, 8/19 in 21 s"


def test_the_heartbeat_thread_ticks_until_its_block_ends() -> None:
    lines: list[str] = []
    printed = threading.Event()

    def write(line: str) -> None:
        lines.append(line)
        if line.endswith("s") and "started" not in line:
            printed.set()

    reporter = LineReporter(write, every_s=0.0)
    handle = reporter.start("score:faithfulness", 4)
    with reporter.heartbeat(period_s=0.01):
        assert printed.wait(timeout=30), "no heartbeat line"
    # The block's end joins the thread: no heartbeat outlives the run.
    assert not any(t.name == "ragaudit-progress" for t in threading.enumerate())
    reporter.finish(handle)
    assert lines[1].startswith("score:faithfulness: 0/4, ")


def test_a_bar_ended_by_a_signal_says_stopped_not_done() -> None:
    import asyncio

    lines: list[str] = []
    progress.set_reporter(LineReporter(lines.append, every_s=3600.0))
    try:
        with pytest.raises(asyncio.CancelledError), progress.bar("score: faithfulness", 5) as b:
            b.advance(2)
            raise asyncio.CancelledError
        with progress.bar("score: answer_relevancy", 1) as b:
            b.advance()
    finally:
        progress.set_reporter(None)
    assert lines[1].startswith("score: faithfulness: stopped at 2/5 in "), lines
    assert not any("faithfulness: done" in line for line in lines)
    assert lines[3].startswith("score: answer_relevancy: done, 1/1 in "), lines


async def test_rows_cancelled_by_a_signal_are_not_counted_as_scored(fake, gateway) -> None:
    # Two rows score, three are still waiting on their judge when the run is stopped: the bar
    # ends "stopped at 2/5", never "5/5" (cancelled rows are not scored rows, and no score
    # file is written for them).
    import asyncio
    import dataclasses

    from support.metrics import sample

    from ragaudit.metrics import METRICS, Deps
    from ragaudit.scoring import score_rows

    jaccard = METRICS["jaccard"]
    waiting = asyncio.Event()

    async def scorer(s, deps):  # type: ignore[no-untyped-def]
        if s.question_id in {"q0", "q1"}:
            return await jaccard.scorer(s, deps)
        waiting.set()
        await asyncio.Event().wait()  # a judge call that never answers

    metric = dataclasses.replace(jaccard, scorer=scorer)
    samples = [sample(qid=f"q{i}") for i in range(5)]
    deps = Deps.of(gateway=gateway, judge="fake/judge", embedder="fake/embed", options={})
    lines: list[str] = []
    progress.set_reporter(LineReporter(lines.append, every_s=3600.0))
    try:

        async def stage() -> None:
            with progress.bar("score: jaccard", len(samples)) as bar:
                await score_rows(metric, samples, deps, window=10_000, on_row=bar.advance)

        task = asyncio.ensure_future(stage())
        await asyncio.wait_for(waiting.wait(), 60)  # guards a hang only
        for _ in range(20):  # let the two quick rows finish
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        progress.set_reporter(None)
    assert lines[-1].startswith("score: jaccard: stopped at 2/5 in "), lines


def test_with_rate_a_line_says_items_a_second_and_the_time_left() -> None:
    lines: list[str] = []
    clock = _Clock()
    reporter = LineReporter(lines.append, every_s=5.0, clock=clock, rate=True)
    handle = reporter.start("index: local", 100)
    clock.now += 5.0
    reporter.advance(handle, 20)
    clock.now += 5.0
    reporter.advance(handle, 20)
    reporter.finish(handle)
    assert lines == [
        "index: local: started, 0/100",
        "index: local: 20/100, 5 s, 4.0/s, about 20 s left",
        "index: local: 40/100, 10 s, 4.0/s, about 15 s left",
        "index: local: done, 40/100 in 10 s",
    ]
