"""Does the audit's daily estimate hold the truth, at a bounded judge cost? 30 simulated days.

The simulated service (``_traffic.py``): 100,000 requests a day over 6 segments, Zipf-distributed
queries typed several ways, a fixed served top-10 per query with a planted grade 0-3 per served
document. Each day the audit's own code draws the sample (:func:`ragaudit.audit.draw_sample`,
salt "bench"), grades each drawn request's top 10 through a judgment store (a dict keyed by
normalised query + document id, kept across days; a miss is one call to a scripted judge that
is off by one grade 15 % of the time), scores the lists (:func:`ragaudit.audit.list_metrics`)
and estimates per segment (:func:`ragaudit.audit.estimate`). The truth is each segment's mean
over **every** request of the day with the planted grades, computed with numpy apart from the
audit's code.

The requests table is built by the simulator directly with the ``requests.parquet`` columns
(no reader yet on this branch); day 1 is also written as the service's JSONL log
(kept with ``--jsonl DIR``) for a reader to read back. Printed, each met or not:

- the 95 % intervals of each segment's daily nDCG@10 and relevant share hold the planted truth
  in >= 93 % of (day, segment) cells, over the main audit (salt "bench") and ``--salts`` (five)
  others: one audit's 30 days share most of their drawn queries (the coordinated sample), so a
  cell's error one day is mostly its error the day before and one 30-day figure is a handful of
  independent trials; the main audit's figure and each other's are printed beside;
- judge calls <= 2,000 a day, and from the second day on >= 70 % of grades come from the store;
- people's labels over ``--label-days`` days (six), one person labelling ``--asked`` items (300)
  a day on each day's labelling page through the viewer's API, labels kept in the runs root's
  judgment store: no item asked on days 2-6 is a (question, document) pair the person labelled
  before (beside the same days labelled as before the store: each day's first items, whatever
  was labelled the days before), and the PPI intervals with those labels hold the planted
  truth in >= 93 % of the days' segment cells (beside the coverage before the store).

Beside them, the same draws estimated with the planted grades instead of the judge's (what the
judge's noise costs the coverage), the PPI-corrected figure where people (who give the planted
grades) label ``--labels`` graded requests a day, coverage of the ``(all)`` cells too, the
intervals' half-widths and mean errors, and Kish's ESS over n.

``--salts N`` replays the days under N other salts (other audits of the same traffic, each a
fresh judge and store) and prints how far the 30-day coverage moves from salt to salt and how
much a cell's error on one day says of the next, with the judge's grades and the planted ones.

    python bench/bench_audit.py [--days 30] [--sample 160] [--requests 100000] [--labels 40]
        [--vocabulary 20000] [--zipf 1.0] [--jsonl DIR] [--replicates 40] [--salts 5]
        [--label-days 6] [--asked 300] [--label-salts 1]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from _traffic import RELEVANT, ScriptedJudge, Service, write_jsonl
from _util import scratch, table

from ragaudit.atomic import write_table
from ragaudit.audit import ALL, SampleOptions, draw_sample, estimate, list_metrics
from ragaudit.audit._labels import labelling_order, people_values, write_label_items
from ragaudit.audit._sample import permanent_random
from ragaudit.audit._served import Served
from ragaudit.schemas import AUDIT_SCORES, AUDIT_VERDICTS, to_table

COVERAGE_GOAL = 0.93
MAX_CALLS = 2000
MIN_STORED = 0.70
SALT = "bench"


def grade_day(
    sample: pl.DataFrame,
    requests: pl.DataFrame,
    service: Service,
    judge: ScriptedJudge,
    store: dict[tuple[str, str], int],
) -> tuple[pl.DataFrame, pl.DataFrame, int, int]:
    """List metrics of every drawn request: with the judge's grades (through the store) and
    with the planted ones; and the grades paid for and taken from the store."""
    k = service.k
    drawn = sample.select("request_id", "segment", "query_norm").join(
        requests.select("request_id", "docs"), on="request_id"
    )
    judged, planted = [], []
    paid = stored = 0
    for request_id, segment, query_norm, docs in drawn.iter_rows():
        grades, truth = [], []
        for doc in docs[:k]:
            key = (query_norm, doc["id"])
            grade = store.get(key)
            if grade is None:
                grade = store[key] = judge.grade(segment, doc["id"])
                paid += 1
            else:
                stored += 1
            grades.append(grade)
            _, query, pos = doc["id"].rsplit("-", 2)
            truth.append(service.planted(segment, int(query[1:]), int(pos[1:])))
        for rows, got in ((judged, grades), (planted, truth)):
            for metric, value in list_metrics(got, k, RELEVANT).items():
                status = "ok" if value is not None else "skipped"
                rows.append(
                    {"request_id": request_id, "metric": metric, "value": value, "status": status}
                )
    schema = {
        "request_id": pl.String,
        "metric": pl.String,
        "value": pl.Float64,
        "status": pl.String,
    }
    return pl.DataFrame(judged, schema=schema), pl.DataFrame(planted, schema=schema), paid, stored


def people(planted: pl.DataFrame, n: int) -> pl.DataFrame:
    """People's values of ``n`` graded requests a day (the planted grades' metrics): those
    with the smallest hash under their own salt, so the labelled ones are a random subsample."""
    ids = sorted(set(planted["request_id"]), key=lambda r: permanent_random("people", r))[:n]
    return planted.filter(pl.col("request_id").is_in(ids), pl.col("status") == "ok").select(
        "request_id", "metric", "value"
    )


def print_coverage(
    cells: dict[tuple[str, str], list[bool]],
    overall: dict[tuple[str, str], list[bool]],
    widths: dict[str, list[float]],
    errors: dict[str, list[float]],
    ess_ratio: list[float],
) -> None:
    """Coverage per kind of grades and metric, then the judge's widths, errors and ESS / n."""
    summary = [
        (kind, metric, f"{np.mean(held):.1%}", f"{np.mean(overall[(kind, metric)]):.1%}")
        for (kind, metric), held in cells.items()
    ]
    print(table(summary, ("grades", "metric", "segment cells held", "(all) cells held")))
    print(
        "judge, per segment cell: "
        + "; ".join(
            f"{m} mean half-width {np.nanmean(widths[m]):.3f}, mean error {np.mean(errors[m]):+.4f}"
            for m in widths
        )
        + f"; Kish ESS / n {np.nanmean(ess_ratio):.2f}"
    )


def replicates(service: Service, opts: SampleOptions, n: int) -> None:
    """Coverage over independent draws of one day (``n`` salts), with the planted grades.

    The 30 days share most of their units (the hash sample is coordinated on purpose), so
    their errors are correlated and their coverage is a handful of independent trials; other
    salts draw independent samples of one day, which is what a 95 % interval promises about.
    """
    requests, truth = service.day(0), service.truth(0)
    metrics = (f"ndcg@{service.k}", "relevant share")
    held: dict[tuple[str, str], list[bool]] = {}
    for r in range(n):
        sample = draw_sample(requests.lazy(), opts, salt=f"replicate-{r}")
        _, planted, _, _ = grade_day(sample, requests, service, ScriptedJudge(service), {})
        for row in (
            estimate(planted, sample).filter(pl.col("metric").is_in(metrics)).iter_rows(named=True)
        ):
            scope = "(all)" if row["segment"] == ALL else "segment"
            target = truth[(row["segment"], row["metric"])]
            ok = row["ci_low"] is not None and row["ci_low"] <= target <= row["ci_high"]
            held.setdefault((scope, row["metric"]), []).append(ok)
    print(
        f"independent draws of day 1 ({n} salts, planted grades): "
        + "; ".join(f"{m} {s} cells {np.mean(v):.1%} of {len(v)}" for (s, m), v in held.items())
    )


def salts(service: Service, opts: SampleOptions, days: int, n: int) -> list[bool]:
    """The days replayed under ``n`` other salts: each audit's 30-day coverage, the errors'
    day-to-day correlation; every judge cell's ``held``, pooled over the salts."""
    metrics = (f"ndcg@{service.k}", "relevant share")
    traffic = [service.day(d) for d in range(days)]
    truth = [service.truth(d) for d in range(days)]
    rows = []
    for s in range(n):
        judge, store = ScriptedJudge(service), dict[tuple[str, str], int]()
        for d in range(days):
            sample = draw_sample(traffic[d].lazy(), opts, salt=f"salt-{s}")
            judged, planted, _, _ = grade_day(sample, traffic[d], service, judge, store)
            for kind, values in (("judge", judged), ("planted grades", planted)):
                found = estimate(values, sample).filter(
                    pl.col("metric").is_in(metrics), pl.col("segment") != ALL
                )
                for r in found.iter_rows(named=True):
                    target = truth[d][(r["segment"], r["metric"])]
                    held = r["ci_low"] is not None and r["ci_low"] <= target <= r["ci_high"]
                    rows.append(
                        {
                            "salt": s,
                            "day": d,
                            "kind": kind,
                            "cell": f"{r['segment']}/{r['metric']}",
                            "held": held,
                            "error": r["estimate"] - target,
                        }
                    )
    frame = pl.DataFrame(rows)
    per_salt = frame.group_by("salt", "kind").agg(pl.col("held").sum(), pl.len()).sort("salt")
    lagged = frame.sort("salt", "kind", "cell", "day").with_columns(
        pl.col("error").shift(1).over("salt", "kind", "cell").alias("before")
    )
    for kind in ("judge", "planted grades"):
        mine = per_salt.filter(pl.col("kind") == kind)
        pairs = lagged.filter(pl.col("kind") == kind).drop_nulls("before")
        correlation = float(np.corrcoef(pairs["error"], pairs["before"])[0, 1])
        held, cells = mine["held"].to_numpy(), mine["len"].to_numpy()
        share = held / cells
        print(
            f"{n} other salts x {days} days, {kind}: segment cells held "
            + ", ".join(f"{h}/{c}" for h, c in zip(held, cells, strict=True))
            + f" ({share.min():.1%} to {share.max():.1%}, all {held.sum()}/"
            f"{cells.sum()}); a cell's error correlates {correlation:.2f} with its error "
            "the day before"
        )
    return frame.filter(pl.col("kind") == "judge")["held"].to_list()


# --- People's labels over six days, given through the viewer --------------------------------

ANNOTATOR = "ann"


def _served(sample: pl.DataFrame, requests: pl.DataFrame, k: int) -> list[Served]:
    """The drawn requests as the audit hands them to the labelling items (their top k)."""
    drawn = sample.select("request_id", "unit", "segment").join(
        requests.select("request_id", "query", "docs"), on="request_id"
    )
    return [
        Served(
            request_id=r["request_id"],
            unit=r["unit"],
            segment=r["segment"],
            query=r["query"],
            language="en",
            answer=None,
            citations=None,
            docs=[
                {"rank": d["rank"], "id": d["id"], "text": d["text"], "changed": False}
                for d in r["docs"][:k]
            ],
        )
        for r in drawn.iter_rows(named=True)
    ]


def _planted(service: Service, doc_id: str) -> int:
    segment, query, pos = doc_id.rsplit("-", 2)
    return service.planted(segment, int(query[1:]), int(pos[1:]))


Judged = tuple[list[dict[str, Any]], list[dict[str, Any]]]


def _judged(
    served: list[Served], service: Service, judge: ScriptedJudge, grades: dict[tuple[str, str], int]
) -> Judged:
    """The judge's verdicts and list metrics of every drawn request.

    A grade comes from ``grades`` (the judge's store, keyed by the query as typed and the
    document) or one call.
    """
    verdicts, scores = [], []
    for s in served:
        got = []
        for d in s.docs:
            key = (s.query, d["id"])
            if key not in grades:
                grades[key] = judge.grade(s.segment, d["id"])
            got.append(grades[key])
            verdicts.append(
                {
                    "request_id": s.request_id,
                    "unit": s.unit,
                    "rank": d["rank"],
                    "doc_id": d["id"],
                    "grade": got[-1],
                    "status": "ok",
                }
            )
        for metric, value in list_metrics(got, service.k, RELEVANT).items():
            scores.append(
                {
                    "request_id": s.request_id,
                    "unit": s.unit,
                    "segment": s.segment,
                    "metric": metric,
                    "value": value,
                    "status": "ok" if value is not None else "skipped",
                }
            )
    return verdicts, scores


def _write_day(
    folder: Path, sample: pl.DataFrame, served: list[Served], judged: Judged, k: int, salt: str
) -> None:
    """An audit day's folder as the audit leaves it: manifest, tables, the items to label."""
    folder.mkdir(parents=True)
    manifest = {
        "kind": "audit",
        "status": "completed",
        "day": folder.name,
        "config": {"audit": {"k": k}, "sort": {"relevant_grade": RELEVANT}},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    sample.write_parquet(folder / "sample.parquet")
    write_table(to_table(judged[0], AUDIT_VERDICTS), folder / "verdicts.parquet")
    write_table(to_table(judged[1], AUDIT_SCORES), folder / "scores.parquet")
    write_label_items(folder, served, [], salt)


def _by_request(served: list[Served], salt: str) -> list[Served]:
    """The labelling order of a day before units had one (request by request)."""
    return sorted(
        served, key=lambda s: (permanent_random(f"{salt}:labels", s.request_id), s.request_id)
    )


@dataclass
class Arm:
    """One way of labelling the days: what the person was asked, and the PPI's coverage."""

    name: str
    viewer: bool
    """Labels given through the viewer into a runs root's judgment store (else: each day's
    first items as the page asked them before the store, in ``order``)."""
    order: Callable[[list[Served], str], list[Served]] = labelling_order
    labelled: set[tuple[str, str]] = field(default_factory=set)
    """(question as judged, document text) pairs the person labelled so far."""
    units: set[tuple[str, str]] = field(default_factory=set)
    """(unit, document) pairs the person labelled so far: the same query however typed."""
    asked: list[int] = field(default_factory=list)
    repeats: list[int] = field(default_factory=list)
    same_query: list[int] = field(default_factory=list)
    ppi_n: list[int] = field(default_factory=list)
    held: list[bool] = field(default_factory=list)
    held_all: list[bool] = field(default_factory=list)
    missing: int = 0
    widths: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def ask(self, unit: str, question: str, doc_id: str, text: str) -> None:
        """Note one item asked of the person, and whether they had labelled it before."""
        self.repeats[-1] += (question, text) in self.labelled
        self.same_query[-1] += (unit, doc_id) in self.units
        self.labelled.add((question, text))
        self.units.add((unit, doc_id))
        self.asked[-1] += 1


def _through_viewer(
    arm: Arm, client: Any, api: str, budget: int, units: dict[str, str], service: Service
) -> None:
    """The person labels up to ``budget`` items of the day on its page, as the page asks them."""
    who = {"annotator": ANNOTATOR}
    start = client.get(api + "/start", params=who).json()
    position, total = start["resume"], start["total"]
    while position < total and arm.asked[-1] < budget:
        item = client.get(f"{api}/items/{position}", params=who).json()
        assert not item["labelled"], f"{api}: item {position} asked though labelled"
        _, request_id, doc_id = item["item_id"].split(":")
        arm.ask(units[request_id], item["question"], doc_id, item["candidate"])
        body = {"position": position, "item_id": item["item_id"], "annotator": ANNOTATOR}
        label = float(_planted(service, doc_id))
        position = client.post(api + "/labels", json={**body, "label": label}).json()["next"]


def _before(
    arm: Arm, served: list[Served], budget: int, service: Service, salt: str
) -> pl.DataFrame:
    """The person on the day's page before the store: its first ``budget`` items in the
    arm's order, labelled anew whatever they labelled before; their requests' values."""
    items = [(s, d) for s in arm.order(served, salt) for d in s.docs][:budget]
    for s, d in items:
        arm.ask(s.unit, s.query, d["id"], d["text"])
    per_request: dict[str, int] = {}
    for s, _ in items:
        per_request[s.request_id] = per_request.get(s.request_id, 0) + 1
    rows = []
    for s in served:
        if per_request.get(s.request_id) != len(s.docs):
            continue  # a request some of whose documents were not labelled has no value
        grades = [_planted(service, d["id"]) for d in s.docs]
        for metric, value in list_metrics(grades, service.k, RELEVANT).items():
            rows.append({"request_id": s.request_id, "metric": metric, "value": value})
    return pl.DataFrame(
        rows, schema={"request_id": pl.String, "metric": pl.String, "value": pl.Float64}
    )


def _cover(arm: Arm, figures: pl.DataFrame, truth: dict[tuple[str, str], float]) -> None:
    rows = figures.filter(
        (pl.col("metric") == "relevant share") | pl.col("metric").str.starts_with("ndcg")
    )
    arm.ppi_n.append(int(rows.filter(pl.col("segment") == ALL)["ppi_n"].max() or 0))
    for row in rows.iter_rows(named=True):
        target = truth[(row["segment"], row["metric"])]
        low, high = row["ppi_ci_low"], row["ppi_ci_high"]
        held = low is not None and high is not None and low <= target <= high
        if row["segment"] == ALL:
            arm.held_all.append(held)
            continue
        arm.held.append(held)
        arm.missing += low is None
        if low is not None:
            arm.widths.append((high - low) / 2)


def replay_labels(
    service: Service, opts: SampleOptions, days: int, budget: int, salts: int
) -> None:
    """Days of an audit labelled by one person: as before the store, and through the viewer now.

    Each day is drawn by the audit's own code (salt: the audit's name) and written as the audit
    leaves it; the judge grades through a store (a dict) as in the main replay; the person gives
    the planted grades. Before the store, the person was asked the first ``budget`` items of each
    day's page whatever they labelled the days before: in the order the page had (request by
    request), and in the order of units it has now (the same queries first every day). Now they
    label each day's page through the viewer's API, the labels kept in the runs root's judgment
    store, and are asked only what they have not labelled. Printed per day: items asked, those
    that were pairs the person had labelled before (and of the same query however typed),
    requests with people's values; then each arm's PPI coverage of the planted truth. With
    ``salts`` above one, as many audits (each its own salt) are replayed.
    """
    from fastapi.testclient import TestClient

    from ragaudit.viewer.app import create_app

    arms = [
        Arm("before the store, by request", False, _by_request),
        Arm("before the store, by unit", False),
        Arm("judgment store", True),
    ]
    per_day = []
    for n in range(salts):
        salt = "bench" if n == 0 else f"bench-{n}"
        work = scratch(f"audit-labels-{salt}")
        client = TestClient(create_app(work), base_url="http://127.0.0.1")
        judge = ScriptedJudge(service)
        grades: dict[tuple[str, str], int] = {}
        for arm in arms:
            arm.labelled, arm.units = set(), set()
        for d in range(days):
            requests = service.day(d)
            sample = draw_sample(requests.lazy(), opts, salt=salt)
            served = _served(sample, requests, service.k)
            day = (dt.date(2026, 11, 1) + dt.timedelta(days=d)).isoformat()
            judged = _judged(served, service, judge, grades)
            values = pl.DataFrame(judged[1]).select("request_id", "metric", "value", "status")
            for arm in arms:
                t0 = time.perf_counter()
                arm.asked.append(0)
                arm.repeats.append(0)
                arm.same_query.append(0)
                if arm.viewer:
                    folder = work / f"audit-{salt}" / day
                    _write_day(folder, sample, served, judged, service.k, salt)
                    api = f"/runs/audit-{salt}/days/{day}/label/api"
                    units = {s.request_id: s.unit for s in served}
                    _through_viewer(arm, client, api, budget, units, service)
                    people = people_values(folder, service.k, RELEVANT)
                else:
                    people = _before(arm, served, budget, service, salt)
                _cover(arm, estimate(values, sample, labels=people), service.truth(d))
                arm.seconds += time.perf_counter() - t0
            per_day.append(
                (
                    salt,
                    d + 1,
                    sample.height,
                    *(
                        f"{a.asked[-1]} / {a.repeats[-1]} ({a.same_query[-1]}) / {a.ppi_n[-1]}"
                        for a in arms
                    ),
                )
            )
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"labelling replay: {days} days x {salts} audit(s), one person labels up to {budget} "
        "items a day. Per arm: asked / pairs they had labelled before (of the same query "
        "however typed) / requests with people's values"
    )
    print(table(per_day, ("audit", "day", "drawn", *(a.name for a in arms))))
    for arm in arms:
        print(
            f"{arm.name}: PPI intervals hold the planted truth in {sum(arm.held)}/"
            f"{len(arm.held)} segment cells ({np.mean(arm.held):.1%}; {arm.missing} without an "
            f"interval), (all) {sum(arm.held_all)}/{len(arm.held_all)}; mean half-width "
            f"{np.mean(arm.widths):.3f}; {arm.seconds:.0f} s"
        )
    later = [i for i in range(len(per_day)) if per_day[i][1] > 1]
    store = arms[-1]

    def repeated(arm: Arm) -> str:
        asked = sum(arm.asked[i] for i in later)
        return f"{sum(arm.repeats[i] for i in later)} of {asked}"

    day2 = [i for i in range(len(per_day)) if per_day[i][1] == 2]
    print(
        f"items asked on days 2-{days} that the person had labelled before: {repeated(store)} "
        f"with the store; before it {repeated(arms[0])} (by request), {repeated(arms[1])} (by "
        f"unit); day 2: {sum(store.repeats[i] for i in day2)} of "
        f"{sum(store.asked[i] for i in day2)} against "
        + ", ".join(
            f"{sum(a.repeats[i] for i in day2)} of {sum(a.asked[i] for i in day2)}"
            for a in arms[:2]
        )
        + " (goal 0): "
        + ("met" if not any(store.repeats[i] for i in later) else "not met: pairs asked again")
    )
    coverage = float(np.mean(store.held))
    print(
        f"PPI coverage of the planted truth with the store's labels: {coverage:.1%} of "
        f"{len(store.held)} segment cells, against {np.mean(arms[0].held):.1%} and "
        f"{np.mean(arms[1].held):.1%} before it (goal >= {COVERAGE_GOAL:.0%}): "
        + ("met" if coverage >= COVERAGE_GOAL else f"not met: {coverage:.1%} < {COVERAGE_GOAL:.0%}")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--sample", type=int, default=160, help="expected draws a day")
    parser.add_argument("--requests", type=int, default=100_000, help="requests a day")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--vocabulary", type=int, default=20_000, help="queries per segment")
    parser.add_argument("--zipf", type=float, default=1.0, help="Zipf exponent of the queries")
    parser.add_argument("--labels", type=int, default=40, help="requests people label a day")
    parser.add_argument("--jsonl", type=Path, default=None, help="keep day 1's JSONL log here")
    parser.add_argument(
        "--replicates", type=int, default=40, help="independent draws of day 1 (other salts)"
    )
    parser.add_argument(
        "--label-days", type=int, default=6, help="days one person labels through the viewer"
    )
    parser.add_argument("--asked", type=int, default=300, help="items the person labels a day")
    parser.add_argument(
        "--label-salts", type=int, default=1, help="audits (salts) the labelling replay runs"
    )
    parser.add_argument(
        "--salts", type=int, default=5, help="other audits (salts) the coverage goal is judged over"
    )
    args = parser.parse_args()

    started = time.perf_counter()
    service = Service(
        requests_per_day=args.requests, vocabulary=args.vocabulary, zipf=args.zipf, seed=args.seed
    )
    judge = ScriptedJudge(service)
    opts = SampleOptions(sample=args.sample, k=service.k)
    store: dict[tuple[str, str], int] = {}
    metrics = (f"ndcg@{service.k}", "relevant share")
    print(
        f"service: {args.requests:,} requests/day, {len(service.segments)} segments, "
        f"{service.vocabulary:,} queries/segment (Zipf s={service.zipf}), top-{service.k}; "
        f"judge off by one {judge.off_by_one:.0%}; sample {args.sample}/day; people label "
        f"{args.labels} graded requests/day; built in {time.perf_counter() - started:.1f} s"
    )
    kinds = ("judge", "planted grades", "PPI (judge + labels)")
    cells: dict[tuple[str, str], list[bool]] = {(k, m): [] for m in metrics for k in kinds}
    overall: dict[tuple[str, str], list[bool]] = {(k, m): [] for m in metrics for k in kinds}
    widths: dict[str, list[float]] = {m: [] for m in metrics}
    errors: dict[str, list[float]] = {m: [] for m in metrics}
    rows, calls, shares, ess_ratio = [], [], [], []
    t_draw = t_estimate = 0.0
    for day in range(args.days):
        requests = service.day(day)
        if day == 0:
            out = args.jsonl or scratch("audit")
            t0 = time.perf_counter()
            path = write_jsonl(requests, out / "day-00.jsonl")
            print(
                f"day 1 as JSONL: {requests.height:,} lines, {path.stat().st_size / 1e6:.1f} MB "
                f"in {time.perf_counter() - t0:.1f} s" + (f" ({path})" if args.jsonl else "")
            )
            if args.jsonl is None:
                shutil.rmtree(out)
        t0 = time.perf_counter()
        sample = draw_sample(requests.lazy(), opts, salt=SALT)
        t_draw += time.perf_counter() - t0
        judged, planted, paid, stored = grade_day(sample, requests, service, judge, store)
        t0 = time.perf_counter()
        with_labels = estimate(judged, sample, labels=people(planted, args.labels))
        t_estimate += time.perf_counter() - t0
        estimates = {
            "judge": with_labels,
            "planted grades": estimate(planted, sample),
            "PPI (judge + labels)": with_labels.select(
                "segment",
                "metric",
                pl.col("ppi_estimate").alias("estimate"),
                pl.col("ppi_ci_low").alias("ci_low"),
                pl.col("ppi_ci_high").alias("ci_high"),
                "n",
                "ess",
            ),
        }
        truth = service.truth(day)
        held_today = 0
        for kind, frame in estimates.items():
            for row in frame.filter(pl.col("metric").is_in(metrics)).iter_rows(named=True):
                target = truth[(row["segment"], row["metric"])]
                low, high = row["ci_low"], row["ci_high"]
                held = low is not None and low <= target <= high
                (overall if row["segment"] == ALL else cells)[(kind, row["metric"])].append(held)
                if kind == "judge" and row["segment"] != ALL:
                    held_today += held
                    widths[row["metric"]].append((high - low) / 2 if low is not None else np.nan)
                    errors[row["metric"]].append(row["estimate"] - target)
                    ess_ratio.append(row["ess"] / row["n"] if row["n"] else np.nan)
        calls.append(paid)
        shares.append(stored / (paid + stored) if paid + stored else 0.0)
        rows.append(
            (
                day + 1,
                sample.height,
                paid,
                f"{shares[-1]:.0%}",
                f"{held_today}/{2 * len(service.segments)}",
            )
        )
    if rows:
        print(table(rows, ("day", "drawn", "judge calls", "from store", "cells held")))
        print()
        print_coverage(cells, overall, widths, errors, ess_ratio)
    print(
        f"draw {t_draw / max(args.days, 1):.2f} s/day, estimate "
        f"{t_estimate / max(args.days, 1):.2f} s/day; total {time.perf_counter() - started:.0f} s"
    )
    if args.replicates:
        replicates(service, opts, args.replicates)
    if args.label_days:
        print()
        replay_labels(service, opts, args.label_days, args.asked, args.label_salts)
    others = salts(service, opts, args.days, args.salts) if args.salts else []
    print()
    if calls:
        goals(cells, calls, shares, metrics, others)


def goals(
    cells: dict[tuple[str, str], list[bool]],
    calls: list[int],
    shares: list[float],
    metrics: tuple[str, ...],
    others: list[bool],
) -> None:
    """The main replay's goals, each met or not; the coverage over every audit replayed."""
    main = [h for m in metrics for h in cells[("judge", m)]]
    held = main + others
    coverage = float(np.mean(held))
    audits = 1 + len(others) // max(len(main), 1)
    scope = (
        f"over {audits} audits (salt {SALT!r} alone: {sum(main)}/{len(main)}, {np.mean(main):.1%})"
        if others
        else "one audit, whose 30 days are a handful of independent trials (--salts: several)"
    )
    print(
        f"intervals hold the truth in {sum(held)}/{len(held)} (day, segment, metric) cells, "
        f"{scope} ({coverage:.1%}; goal >= {COVERAGE_GOAL:.0%}): "
        + ("met" if coverage >= COVERAGE_GOAL else f"not met: {coverage:.1%} < {COVERAGE_GOAL:.0%}")
    )
    worst = max(calls)
    print(
        f"judge calls a day: max {worst:,}, mean {np.mean(calls):,.0f} (goal <= {MAX_CALLS:,}): "
        + ("met" if worst <= MAX_CALLS else f"not met: day {calls.index(worst) + 1} made {worst:,}")
    )
    later = shares[1:]
    if later:
        low = min(later)
        print(
            f"grades from the store from day 2 on: min {low:.0%}, mean {np.mean(later):.0%} "
            f"(goal >= {MIN_STORED:.0%}, store: a dict keyed by normalised query + document id): "
            + (
                "met"
                if low >= MIN_STORED
                else f"not met: day {later.index(low) + 2} took {low:.0%} from the store"
            )
        )


if __name__ == "__main__":
    main()
