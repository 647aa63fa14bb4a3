"""The windowed writers' shared base: one check of packed groups, one call account."""

from __future__ import annotations

from ragaudit.judging import Judge
from ragaudit.nuggets import NuggetExtractor
from ragaudit.reference import ReferenceWriter
from ragaudit.windowing import QuestionJudge, pack, verified


def test_an_over_full_group_spills_its_smallest_items_to_the_emptiest_group_that_fits() -> None:
    # Three groups packed by summed sizes; the rendered check says "at most 10" but the first
    # group renders at its sum plus 2 (what packing could not see).
    sizes = {"a": 6, "b": 3, "c": 1, "d": 4, "e": 5}
    groups = [["a", "b", "c"], ["d"], ["e"]]

    def fits(group: list[str]) -> bool:
        return sum(sizes[x] for x in group) + (2 if "a" in group else 0) <= 10

    out = verified(groups, fits, sizes.__getitem__, "abcde".index)
    # The smallest of the over-full group ("c", then "b") leave it; "b" (largest spill first)
    # goes to the emptiest group that fits ("d", size 4), "c" then to the emptiest ("e").
    assert out == [["a"], ["b", "d"], ["c", "e"]]
    assert all(fits(g) for g in out)
    assert sorted(x for g in out for x in g) == sorted(sizes)


def test_a_spilled_item_no_group_takes_gets_a_group_of_its_own() -> None:
    sizes = {"a": 5, "b": 5}
    out = verified([["a", "b"]], lambda g: len(g) == 1, sizes.__getitem__, "ab".index)
    # Of equal sizes the first leaves; the group left holds only "b", so "a" stands alone.
    assert out == [["b"], ["a"]]


def test_pack_is_first_fit_decreasing_in_input_order() -> None:
    assert pack([3, 7, 2, 5], 10) == [[0, 1], [2, 3]]


def test_reference_writer_and_nugget_extractor_size_their_prompts_alike() -> None:
    # Sizing renders and counts prompts without a gateway (only asking uses it).
    judge = Judge(gateway=None, model="fake/judge", window=600, max_tokens=256)  # type: ignore[arg-type]
    setup = QuestionJudge(judge, "Who?", "en", answer_tokens=500)
    writer, extractor = ReferenceWriter(setup), NuggetExtractor(setup)
    for w in (writer, extractor):
        # The room one map prompt leaves for contexts, and the refusal when it is too small.
        assert w.usable == 600 - 500 - w.map_overhead
        assert (w.too_small() is None) == (w.usable >= 64)
        assert w.spent.calls == 0
    assert extractor.spent is extractor.result
