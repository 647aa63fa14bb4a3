"""When the offline judge loads Gemma with llama.cpp's extra CPU buffers (weight repacking)."""

from __future__ import annotations

import pytest

from ragaudit.cache import _llama_patches as patches


@pytest.mark.parametrize(
    ("env", "amx", "wanted"),
    [
        ("", False, True),  # a build without AMX kernels keeps repacking
        ("", True, False),  # AMX kernels die with SIGILL where the kernel grants no tile state
        ("1", True, True),
        ("0", False, False),
    ],
)
def test_extra_buffers_follow_the_build_unless_forced(
    monkeypatch: pytest.MonkeyPatch, env: str, amx: bool, wanted: bool
) -> None:
    monkeypatch.setattr(patches, "EXTRA_BUFFERS_ENV", env)
    monkeypatch.setattr(patches, "build_has_amx", lambda: amx)
    assert patches.extra_buffers_wanted() is wanted
