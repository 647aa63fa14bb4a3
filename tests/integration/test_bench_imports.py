"""Every benchmark imports on a fresh install: a moved test helper or an optional package
missing fails here, not when someone runs the bench."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCHES = sorted(p.stem for p in (REPO / "bench").glob("bench_*.py"))

# In a child: importing a bench sets the offline environment and RAGAUDIT_HOME for its process
# (bench/_util.py), which this test session must not inherit. Each module is imported under its
# own name with importlib, so its ``if __name__ == "__main__"`` body does not run.
_IMPORT_ALL = """
import importlib, json, sys, traceback
bench, names = sys.argv[1], json.loads(sys.argv[2])
sys.argv = sys.argv[:1]  # some benches read their own arguments at import
sys.path.insert(0, bench)
failed = {}
for name in names:
    try:
        importlib.import_module(name)
    except BaseException:
        failed[name] = traceback.format_exc(limit=-3)
print(json.dumps(failed))
"""


def test_every_bench_module_imports() -> None:
    assert len(BENCHES) > 10
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL, str(REPO / "bench"), json.dumps(BENCHES)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    failed = json.loads(done.stdout.strip().splitlines()[-1])
    assert failed == {}, "\n".join(f"{k}:\n{v}" for k, v in failed.items())


def test_the_embedders_bench_skips_an_embedder_it_cannot_import() -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(REPO / 'bench')!r}); "
        "sys.modules['sentence_transformers'] = None; "
        "import bench_embedders as b; print(b.missing('minilm'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "minilm: skipped, sentence_transformers is not installed" in done.stdout
