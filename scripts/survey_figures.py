"""The survey statistics' figures, recorded and compared across a change to ``stats``/``audit``.

Three sources, all with the scripted fake judge (no provider call outside the memo):

- the bundled audit day (``data/audit/audit.yaml``, ``data/audit/logs/2026-11-26``): every row
  of its ``estimates.parquet``, and its people-corrected (PPI) rows once a person has labelled
  the first ``--labels`` requests of its labelling queue (a grade one below the judge's on the
  first document of every other request, the judge's own elsewhere);
- eight days of the support bot's log (``tests/support/audit_days.py``), audited in order:
  every day's estimates, ``series.parquet`` and each day's ``changes.parquet`` (the tests of a
  day against the day before and the trailing week);
- a labelled run (``tests/support/labelled_runs.py``: 40 questions, a pool of 60, 200 labels):
  every corrected figure of :func:`ragaudit.ppi.judge_vs_people`.

``record`` writes them to JSON; ``compare`` prints, figure by figure, what is identical and
what changed by how much::

    PYTHONPATH=OLD python scripts/survey_figures.py record --out /tmp/before.json
    PYTHONPATH=NEW python scripts/survey_figures.py record --out /tmp/after.json
    python scripts/survey_figures.py compare /tmp/before.json /tmp/after.json
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import inspect
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
BUNDLED_DAY = dt.date(2026, 11, 26)
TOLERANCE = 1e-12


def _fake(config: dict[str, Any], tmp: Path) -> dict[str, Any]:
    return {
        **config,
        "runs_root": str(tmp / "runs"),
        "cache_dir": str(tmp / "cache"),
        "models": {"judge": "fake/judge", "embedder": "fake/embed", "backoff_s": 0.0},
    }


async def _audit(path: Path, days: list[dt.date]) -> list[Path]:
    from ragaudit.audit import run_audit_day
    from ragaudit.cache import hold_gateway
    from ragaudit.config import load_config

    config = load_config(path)
    folders = []
    with hold_gateway(config) as gateway:
        for day in days:
            out = await run_audit_day(config, day, gateway=gateway)
            folders.append(out.folder)
    return folders


def _rows(frame: Any, keys: list[str]) -> dict[str, dict[str, Any]]:
    out = {}
    for row in frame.iter_rows(named=True):
        key = "/".join(str(row[k]) for k in keys)
        out[key] = {k: v for k, v in row.items() if k not in keys and _figure(v)}
    return out


def _figure(value: Any) -> bool:
    return isinstance(value, int | float | bool) or value is None


def _label_day(folder: Path, n: int) -> None:
    """A person labels the first ``n`` requests of the day's queue (see the module docstring)."""
    import polars as pl

    from ragaudit import labels
    from ragaudit.audit._labels import day_items, read_label_items

    items = read_label_items(folder)
    assert items is not None
    verdicts = pl.read_parquet(folder / "verdicts.parquet")
    grade = {(r["request_id"], r["doc_id"]): r["grade"] for r in verdicts.iter_rows(named=True)}
    rank = {(r["request_id"], r["doc_id"]): r["rank"] for r in verdicts.iter_rows(named=True)}
    requests = list(dict.fromkeys(r["request_id"] for r in items.to_pylist()))[:n]
    rows = []
    for it in items.to_pylist():
        if it["request_id"] not in requests:
            continue
        if it["kind"] == "grade":
            key = (it["request_id"], it["doc_id"])
            lower = requests.index(it["request_id"]) % 2 == 0 and rank[key] == 1
            value = float(max(grade[key] - 1, 0) if lower else grade[key])
        else:
            value = float(requests.index(it["request_id"]) % 3 != 0)
        rows.append(
            {
                "item_id": it["item_id"],
                "kind": it["kind"],
                "question_id": it["request_id"],
                "candidate_id": it["doc_id"],
                "annotator": "ann",
                "label": value,
            }
        )
    labels.append_labels(folder, rows, day_items(folder))


def bundled_day(tmp: Path, n_labels: int) -> dict[str, Any]:
    """The bundled day's estimates, then its PPI rows after ``n_labels`` labelled requests."""
    import polars as pl

    from ragaudit.audit._labels import people_estimates

    config = yaml.safe_load((REPO / "data" / "audit" / "audit.yaml").read_text("utf-8"))
    config["audit"]["source"]["path"] = str(REPO / config["audit"]["source"]["path"])
    path = tmp / "bundled.yaml"
    path.write_text(yaml.safe_dump(_fake(config, tmp)), encoding="utf-8")
    (folder,) = asyncio.run(_audit(path, [BUNDLED_DAY]))
    estimates = pl.read_parquet(folder / "estimates.parquet")
    _label_day(folder, n_labels)
    people = people_estimates(folder)
    return {
        "estimates": _rows(estimates, ["segment", "metric"]),
        "ppi": {} if people is None else _rows(people, ["segment", "metric"]),
    }


def eight_days(tmp: Path) -> dict[str, Any]:
    """Eight days of the support bot: estimates, the series, every day's changes."""
    import polars as pl

    sys.path.insert(0, str(REPO / "tests"))
    from support.audit_days import DAYS, FIRST, audit_config, write_logs

    corpus = write_logs(tmp)
    path = audit_config(tmp, corpus)
    raw = yaml.safe_load(path.read_text("utf-8"))
    path.write_text(yaml.safe_dump(_fake(raw, tmp)), encoding="utf-8")
    days = [FIRST + dt.timedelta(days=i) for i in range(DAYS)]
    folders = asyncio.run(_audit(path, days))
    out: dict[str, Any] = {"estimates": {}, "changes": {}}
    for day, folder in zip(days, folders, strict=True):
        est = pl.read_parquet(folder / "estimates.parquet")
        for key, row in _rows(est, ["segment", "metric"]).items():
            out["estimates"][f"{day}/{key}"] = row
        changes = pl.read_parquet(folder / "changes.parquet")
        if "against" in changes.columns:
            for key, row in _rows(changes, ["against", "segment", "metric"]).items():
                out["changes"][f"{day}/{key}"] = row
    series = pl.read_parquet(folders[0].parent / "series.parquet")
    out["series"] = _rows(series.drop("series"), ["day", "segment", "metric"])
    return out


def labelled_run(tmp: Path) -> dict[str, Any]:
    """A planted labelled run's corrected figures (relevant share, NDCG@10, agreement)."""
    import dataclasses

    sys.path.insert(0, str(REPO / "tests"))
    from support.labelled_runs import label_sample_with_truth, planted_pool_run

    from ragaudit import labels, ppi

    run, truth, _ = planted_pool_run(tmp / "runs", "labelled", questions=40, pool=60, seed=3)
    labels.ensure_sample(run, 200, seed=3)
    label_sample_with_truth(run, truth)
    people = ppi.judge_vs_people(run, seed=3)
    assert people is not None
    out = {}
    for c in people.corrected:
        fields = dataclasses.asdict(c)
        out[c.figure] = {k: v for k, v in fields.items() if _figure(v)}
    return out


def simulated_days(days: int = 3) -> dict[str, Any]:
    """Days of the bench's simulated service drawn at 160 units a day (strata, uncertain units).

    The estimates with people's values of 40 units (PPI), the changes (paired over the draws
    and as independent estimates), the mix splits and a probe's paired test.
    """
    import polars as pl

    sys.path.insert(0, str(REPO / "bench"))
    from _traffic import ScriptedJudge, Service

    import ragaudit.audit._watch as watch_module
    from ragaudit.audit import SampleOptions, draw_sample, estimate, list_metrics
    from ragaudit.audit._drift import DayDesign, day_changes, probe_changes
    from ragaudit.audit._sample import permanent_random
    from ragaudit.audit._watch import series_rows

    # The band-level mix split until ADR 24 put the mix into each change's split by cause.
    mix_splits = getattr(watch_module, "mix_splits", None)

    service = Service(requests_per_day=20_000, vocabulary=2_000, seed=7)
    judge = ScriptedJudge(service)
    opts = SampleOptions(sample=160, k=service.k)
    schema = {
        "unit": pl.String,
        "request_id": pl.String,
        "metric": pl.String,
        "value": pl.Float64,
        "status": pl.String,
    }
    out: dict[str, Any] = {"estimates": {}, "changes": {}, "mix": {}, "probe": {}}
    designs, series = {}, []
    for day in range(days):
        requests = service.day(day)
        sample = draw_sample(requests.lazy(), opts, salt="figures")
        drawn = sample.select("unit", "request_id", "segment").join(
            requests.select("request_id", "docs"), on="request_id"
        )
        judged, planted = [], []
        for unit, request_id, segment, docs in drawn.iter_rows():
            grades, truth = [], []
            for doc in docs[: service.k]:
                _, query, pos = doc["id"].rsplit("-", 2)
                grades.append(judge.grade(segment, doc["id"]))
                truth.append(service.planted(segment, int(query[1:]), int(pos[1:])))
            for rows, got in ((judged, grades), (planted, truth)):
                for metric, value in list_metrics(got, service.k, 2).items():
                    status = "ok" if value is not None else "skipped"
                    rows.append(
                        {
                            "unit": unit,
                            "request_id": request_id,
                            "metric": metric,
                            "value": value,
                            "status": status,
                        }
                    )
        values = pl.DataFrame(judged, schema=schema)
        truth_values = pl.DataFrame(planted, schema=schema)
        chosen = sorted(set(sample["unit"]), key=lambda u: permanent_random("people", u))[:40]
        people = truth_values.filter(pl.col("unit").is_in(chosen), pl.col("status") == "ok")
        est = estimate(values, sample, labels=people.select("unit", "metric", "value"))
        name = f"2026-11-{day + 1:02d}"
        for key, row in _rows(est, ["segment", "metric"]).items():
            out["estimates"][f"{name}/{key}"] = row
        designs[name] = DayDesign(sample, values)
        series.append(series_rows("s", name, est))
    frame = pl.concat(series)
    last = sorted(designs)[-1]
    for paired, given in (("paired", designs), ("independent", None)):
        for c in day_changes(frame, last, alpha=0.05, designs=given):
            key = f"{paired}/{c.against}/{c.segment}/{c.metric}"
            out["changes"][key] = {
                k: v for k, v in c.to_row().items() if _figure(v) and not isinstance(v, str)
            }
    first = sorted(designs)[0]
    # Before α was threaded through, the mix split took none and ran at 0.05.
    at = (
        {"alpha": 0.05}
        if mix_splits is not None and "alpha" in inspect.signature(mix_splits).parameters
        else {}
    )
    splits = mix_splits(designs[first], designs[last], **at) if mix_splits is not None else {}
    for (segment, metric), split in splits.items():
        out["mix"][f"{segment}/{metric}"] = {
            "mix": split.mix,
            "mix_low": split.mix_ci[0],
            "mix_high": split.mix_ci[1],
            "within": split.within,
            "within_low": split.within_ci[0],
            "within_high": split.within_ci[1],
        }
    probe = designs[first].values.filter(pl.col("status") == "ok").head(120)
    probe = probe.join(designs[first].sample.select("unit", "segment"), on="unit").select(
        pl.col("unit").alias("probe"), "segment", "metric", "value"
    )
    moved = probe.with_columns((pl.col("value") * 0.9).alias("value"))
    for p in probe_changes(moved, probe, alpha=0.05):
        out["probe"][f"{p.segment}/{p.metric}"] = {
            "diff": p.diff,
            "ci_low": p.ci_low,
            "ci_high": p.ci_high,
            "p_value": p.p_value,
            "moved": p.moved,
        }
    return out


def record(out: Path, n_labels: int) -> None:
    """Every figure of the four sources, from the ragaudit on ``PYTHONPATH``, to ``out``."""
    import ragaudit

    with tempfile.TemporaryDirectory(prefix="survey-figures-") as tmp:
        root = Path(tmp)
        for part in ("bundled", "days", "run"):
            (root / part).mkdir()
        found = {
            "code": str(Path(ragaudit.__file__).parent),
            "bundled day": bundled_day(root / "bundled", n_labels),
            "eight days": eight_days(root / "days"),
            "labelled run": labelled_run(root / "run"),
            "simulated days": simulated_days(),
        }
    out.write_text(json.dumps(found, indent=1, sort_keys=True), encoding="utf-8")
    print(f"recorded from {found['code']} to {out}")


def _flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict):
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(_flatten(v, f"{prefix}{k} :: " if not prefix else f"{prefix}{k} :: "))
        return out
    return {prefix.removesuffix(" :: "): tree}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= TOLERANCE * max(1, abs(a))
    return bool(a == b)


def compare(before: Path, after: Path) -> None:
    """Print per source how many figures are identical, and each one that changed."""
    a = json.loads(before.read_text("utf-8"))
    b = json.loads(after.read_text("utf-8"))
    print(f"before: {a.pop('code')}\nafter:  {b.pop('code')}")
    for source in a:
        fa, fb = _flatten(a[source]), _flatten(b.get(source, {}))
        keys = sorted(set(fa) | set(fb))
        changed = [k for k in keys if not _same(fa.get(k), fb.get(k))]
        print(f"\n{source}: {len(keys) - len(changed)} of {len(keys)} figures identical")
        for k in changed:
            old, new = fa.get(k), fb.get(k)
            delta = (
                f" ({new - old:+.6f})"
                if isinstance(old, int | float) and isinstance(new, int | float)
                else ""
            )
            print(f"  {k}: {old} -> {new}{delta}")


def main() -> None:
    """``record`` or ``compare``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="record the figures of the code on PYTHONPATH")
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--labels", type=int, default=7, help="requests a person labels")
    cmp = sub.add_parser("compare", help="print what changed between two records")
    cmp.add_argument("before", type=Path)
    cmp.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "record":
        record(args.out, args.labels)
    else:
        compare(args.before, args.after)


if __name__ == "__main__":
    main()
