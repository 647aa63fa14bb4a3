"""The offline judge's llama.cpp options from RAGAUDIT_LOCAL_* variables (bench variants)."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_cpp")

from ragaudit.cache._local import llama_options  # noqa: E402


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
