"""Hostile inputs get one clear message before any work: grades, config files, corpora."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragaudit.config import MAX_CONFIG_BYTES, load_config
from ragaudit.dataset import load_questions
from ragaudit.errors import ConfigError, InputError


@pytest.mark.parametrize("grade", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_grade_names_file_row_and_column(tmp_path: Path, grade: str) -> None:
    path = tmp_path / "q.jsonl"
    rows = [
        '{"question_id": "a", "question": "q?", "reference_context_grades": {"c1": 1}}',
        f'{{"question_id": "b", "question": "q?", "reference_context_grades": {{"c1": {grade}}}}}',
    ]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_questions(path)
    message = str(caught.value)
    assert str(path) in message and "line 2" in message
    assert "reference_context_grades" in message and "expected an integer" in message


def _bomb(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for n in range(1, levels):
        lines.append(f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 10) + "]")
    lines.append(
        "collect:\n  answers:\n    http:\n      body:\n        payload: *a" + str(levels - 1)
    )
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_is_refused_when_the_config_loads(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(_bomb(10), encoding="utf-8")
    with pytest.raises(ConfigError, match="alias bomb") as caught:
        load_config(path, environ={})
    assert len(str(caught.value)) < 400


def test_a_few_aliases_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(
        "models:\n  judge: &judge fake/judge\n  generator: *judge\n",
        encoding="utf-8",
    )
    assert load_config(path, environ={}).models.generator == "fake/judge"


def test_a_huge_config_file_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text("run_id: x\nnote: " + "y" * (MAX_CONFIG_BYTES + 10) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="more than a config may hold") as caught:
        load_config(path, environ={})
    assert len(str(caught.value)) < 400


def test_a_huge_value_from_the_command_line_is_not_echoed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, {"collect": {"answers": {"http": {"body": "z" * 10_000_000}}}}, {})
    assert len(str(caught.value)) < 400
    # An invalid huge value is named, not echoed.
    with pytest.raises(ConfigError) as caught:
        load_config(None, {"models": {"judge": ["q" * 100_000]}}, {})
    assert "models.judge" in str(caught.value) and len(str(caught.value)) < 1000


def test_grades_of_json_text_in_csv_are_checked_too(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    grades = json.dumps({"c1": 1}).replace("1}", "NaN}")
    path.write_text(
        'question_id,question,reference_context_grades\na,q?,"' + grades.replace('"', '""') + '"\n',
        encoding="utf-8",
    )
    with pytest.raises(InputError, match="line 2.*reference_context_grades"):
        load_questions(path)


@pytest.mark.parametrize(("junk", "at"), [(b"\xff\xfe junk", 0), (b"ok\x00\x01binary", 2)])
@pytest.mark.parametrize("suffix", [".jsonl", ".txt"])
def test_a_corpus_with_binary_junk_names_the_line_and_byte(
    tmp_path: Path, junk: bytes, at: int, suffix: str
) -> None:
    from ragaudit.search import read_corpus

    path = tmp_path / f"corpus{suffix}"
    good = b'{"id": "d1", "text": "fine"}\n{"id": "d2", "text": "fine too"}\n'
    prefix = b'{"id": "d3", "text": "'
    path.write_bytes(good + prefix + junk + b'"}\n')
    with pytest.raises(InputError) as caught:
        list(read_corpus(path))
    message = str(caught.value)
    assert str(path) in message
    assert f"at line 3, byte {len(prefix) + at + 1} of the line" in message


def _cli(tmp_path: Path, *extra: str):
    from support.cli import run_args
    from typer.testing import CliRunner

    from ragaudit.cli import app

    return CliRunner().invoke(app, run_args(tmp_path, "--run-id", "h", "--limit", "2", *extra))


def test_a_corpus_with_binary_junk_fails_before_the_run_starts(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(b'{"id": "d1", "text": "fine"}\n{"id": "d2", "text": "\xc3\x28"}\n')
    result = _cli(tmp_path, "--set", f"collect.corpus={corpus}")
    assert result.exit_code == 2, result.output
    assert "line 2, byte 23 of the line" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "runs").exists()


def test_an_unreachable_redis_memo_fails_before_the_run_starts(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = _cli(
        tmp_path,
        "--set",
        "cache.backend=redis",
        "--set",
        f"cache.redis_url=redis://127.0.0.1:{port}/0",
    )
    assert result.exit_code == 2, result.output
    assert f"127.0.0.1:{port}" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "runs").exists()


def test_an_unwritable_runs_root_is_one_line_naming_path_and_errno(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the runs root should be\n", encoding="utf-8")
    result = _cli(tmp_path, "--runs-root", str(blocker / "runs"))
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "ENOTDIR" in errors[0] and str(blocker) in errors[0]
    assert "Traceback" not in result.output


def test_a_full_disk_mid_run_is_one_line_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from ragaudit.runfolder import RunFolder

    real = RunFolder.write

    def full_after_collect(self: RunFolder, name: str, table):  # type: ignore[no-untyped-def]
        if name.startswith(("verdicts", "ranking", "comparisons")):
            raise OSError(errno.ENOSPC, "No space left on device", str(self.table_path(name)))
        return real(self, name, table)

    from support.cli import DEMO_CORPUS

    monkeypatch.setattr(RunFolder, "write", full_after_collect)
    result = _cli(tmp_path, "--set", f"collect.corpus={DEMO_CORPUS}")
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "ENOSPC" in errors[0] and "runs/h/" in errors[0], result.output
    assert "Traceback" not in result.output
    # What was written before the disk filled is still there, and the run can resume.
    run = RunFolder(tmp_path / "runs", "h")
    assert run.has("questions") and run.has("answers")
    assert run.read_manifest()["status"] == "failed"
