"""The offline judge's llama.cpp options from RAGAUDIT_LOCAL_* variables, and its memo key."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

from ragaudit.cache import request_key  # noqa: E402
from ragaudit.cache._gateway import GatewayCore  # noqa: E402
from ragaudit.cache._local import (  # noqa: E402
    COMPLETION_MODEL,
    EMBEDDING_MODEL,
    answer_variant,
    llama_options,
)


def test_unset_keeps_llama_cpp_pythons_defaults() -> None:
    assert llama_options({"RAGAUDIT_LOCAL_N_BATCH": " "}) == {}


def test_each_variable_becomes_its_llama_argument() -> None:
    import llama_cpp

    options = llama_options(
        {
            "RAGAUDIT_LOCAL_N_BATCH": "1024",
            "RAGAUDIT_LOCAL_N_UBATCH": "256",
            "RAGAUDIT_LOCAL_FLASH_ATTN": "0",
            "RAGAUDIT_LOCAL_KV_TYPE": "Q8_0",
        }
    )
    assert options == {
        "n_batch": 1024,
        "n_ubatch": 256,
        "flash_attn": False,
        "type_k": llama_cpp.GGML_TYPE_Q8_0,
        "type_v": llama_cpp.GGML_TYPE_Q8_0,
    }


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RAGAUDIT_LOCAL_N_BATCH", "0"),
        ("RAGAUDIT_LOCAL_N_UBATCH", "many"),
        ("RAGAUDIT_LOCAL_FLASH_ATTN", "yes"),
        ("RAGAUDIT_LOCAL_KV_TYPE", "q9_9"),
    ],
)
def test_a_bad_value_names_its_variable(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=name):
        llama_options({name: value})


def test_the_options_set_name_the_judges_variant(tmp_path: Path) -> None:
    gguf = tmp_path / "gemma-q4_0.gguf"
    gguf.write_bytes(b"GGUF" + bytes(12))
    environ = {"RAGAUDIT_LOCAL_KV_TYPE": "q8_0", "RAGAUDIT_LOCAL_GGUF": str(gguf)}
    assert answer_variant(COMPLETION_MODEL, {}) is None
    assert answer_variant(COMPLETION_MODEL, environ) == (
        "RAGAUDIT_LOCAL_GGUF=gemma-q4_0.gguf:16;RAGAUDIT_LOCAL_KV_TYPE=q8_0"
    )
    # The embedders do not run on llama.cpp: their keys never move.
    assert answer_variant(EMBEDDING_MODEL, environ) is None


def test_a_bench_option_moves_the_judges_memo_key_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    request = {"model": COMPLETION_MODEL, "messages": [{"role": "user", "content": "q"}]}
    other = {**request, "model": "fake/judge"}
    shipped = GatewayCore._key(request, "v1", None)
    # No option set: the key is the request's alone, as it always was.
    assert shipped == request_key({**request, "prompt_version": "v1"})
    monkeypatch.setenv("RAGAUDIT_LOCAL_FLASH_ATTN", "1")
    assert GatewayCore._key(request, "v1", None) != shipped
    assert GatewayCore._key(other, "v1", None) == request_key({**other, "prompt_version": "v1"})
