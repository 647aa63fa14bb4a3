"""What a run records about the code that produced it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.paths import REPO_ROOT

import ragaudit
from ragaudit.manifest import git_info

REPO = REPO_ROOT


def test_git_info_names_the_checkouts_commit_and_dirty_flag() -> None:
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    info = git_info()
    assert info["commit"] == head and isinstance(info["dirty"], bool)


def test_git_info_outside_a_checkout_is_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ragaudit, "__file__", str(tmp_path / "ragaudit" / "__init__.py"))
    assert git_info() == {"commit": None, "dirty": None}
