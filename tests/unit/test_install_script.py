"""``make install``'s script: pip's package sources handed to uv, and a bad installer named."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TO_UV = REPO / "scripts" / "pip_config_for_uv.py"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This environment without pip's or uv's own variables, pip configured by one file."""
    conf = tmp_path / "pip.conf"
    conf.write_text(
        "[global]\n"
        "index-url = https://mirror.example/simple\n"
        "extra-index-url =\n"
        "    https://a.example/simple\n"
        "    https://b.example/simple\n",
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    return env | {"PIP_CONFIG_FILE": str(conf), "PIP_FIND_LINKS": str(tmp_path)} | extra


def _exports(env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(TO_UV)], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.splitlines()


def test_pips_sources_become_uvs_variables(tmp_path: Path) -> None:
    out = _exports(_env(tmp_path))
    assert "export UV_INDEX_URL=https://mirror.example/simple" in out
    # Several lines in pip's file: one space-separated list for uv.
    assert "export UV_EXTRA_INDEX_URL='https://a.example/simple https://b.example/simple'" in out
    assert f"export UV_FIND_LINKS={tmp_path}" in out  # PIP_FIND_LINKS: pip's variable
    # More than one source: uv takes the best version across them, as pip does.
    assert "export UV_INDEX_STRATEGY=unsafe-best-match" in out
    assert not [line for line in out if line.startswith("export UV_NO_INDEX=")]


def test_pips_no_index_keeps_uv_off_the_indexes(tmp_path: Path) -> None:
    out = _exports(_env(tmp_path, PIP_NO_INDEX="1", PIP_TRUSTED_HOST="a.example"))
    assert "export UV_NO_INDEX=1" in out
    assert "export UV_INSECURE_HOST=a.example" in out


def test_what_the_caller_set_for_uv_is_left_alone(tmp_path: Path) -> None:
    env = _env(
        tmp_path, UV_INDEX_URL="https://mine.example/simple", UV_INDEX_STRATEGY="first-index"
    )
    out = _exports(env)
    assert not [line for line in out if line.startswith("export UV_INDEX_URL=")]
    assert not [line for line in out if line.startswith("export UV_INDEX_STRATEGY=")]
    assert "export UV_EXTRA_INDEX_URL='https://a.example/simple https://b.example/simple'" in out


def test_the_exports_are_shell_that_sets_the_variables(tmp_path: Path) -> None:
    shell = f'eval "$("{sys.executable}" "{TO_UV}")"; printf %s "$UV_EXTRA_INDEX_URL"'
    done = subprocess.run(
        ["bash", "-c", shell], env=_env(tmp_path), capture_output=True, text=True, check=True
    )
    assert done.stdout == "https://a.example/simple https://b.example/simple"


def test_an_unknown_installer_is_named_before_anything_installs(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "install.sh")],
        env=_env(tmp_path, INSTALLER="conda", PYTHON=sys.executable, WHEELS=str(tmp_path / "w")),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == "install: INSTALLER must be uv or pip, not 'conda'"
    assert not (tmp_path / "w").exists()  # nothing built, nothing installed
