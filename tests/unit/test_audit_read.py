"""The audit's readers: request logs mapped with JMESPath, redaction, served content by id."""

from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.audit_logs import FIELDS

from ragaudit.audit import RedactOptions, SourceOptions, read_day
from ragaudit.audit._content import changed_count, content_digest, resolve_texts
from ragaudit.audit._redact import Redactor
from ragaudit.audit._segments import NO_SEGMENT
from ragaudit.errors import ConfigError, InputError
from ragaudit.schemas import AUDIT_REQUESTS

DAY = dt.date(2026, 11, 26)
EMAIL = "jane.roe@example.org"


def record(i: int, **over: Any) -> dict[str, Any]:
    """One request of the service's own log layout (nested, its own names)."""
    rec: dict[str, Any] = {
        "id": f"r{i}",
        "ts": f"2026-11-26T10:{i % 60:02d}:00Z",
        "session_id": f"s{i % 3}",
        "request": {"q": f"how do refunds work {i}", "filters": {"collection": "acme"}},
        "retrieval": {
            "hits": [
                {"_id": f"d{i}-1", "_score": 2.5, "_source": {"content": "refunds take 5 days"}},
                {"_id": f"d{i}-2", "_score": 1.0, "_source": {"content": "contact support"}},
            ]
        },
        "response": {"text": "Refunds take 5 days [1].", "citations": ["d1"]},
        "feedback": {"thumb": "up"},
    }
    rec.update(over)
    return rec


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def source(path: Path, fmt: str = "jsonl", **fields: Any) -> SourceOptions:
    return SourceOptions(format=fmt, path=str(path), fields={**FIELDS, **fields})


def read(src: SourceOptions, out: Path, *, segment: str = "filters.collection", **kw: Any):
    kw.setdefault("max_bad_share", 0.05)
    return read_day(src, RedactOptions(), DAY, segment=segment, out=out, **kw)


def test_jsonl_mapped_with_jmespath_and_the_days_partition(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "logs" / "2026-11-26" / "a.jsonl", [record(i) for i in range(3)])
    write_jsonl(tmp_path / "logs" / "2026-11-26" / "b.jsonl", [record(9, request={"q": "x"})])
    write_jsonl(tmp_path / "logs" / "2026-11-25" / "a.jsonl", [record(i) for i in range(50, 60)])
    out = tmp_path / "out" / "requests.parquet"
    report = read(source(tmp_path / "logs" / "{day}" / "*.jsonl"), out)

    assert (report.records, report.bad) == (4, 0)
    assert [Path(f).parent.name for f in report.files] == ["2026-11-26", "2026-11-26"]
    table = pq.read_table(out)
    assert table.schema.names == AUDIT_REQUESTS.names
    assert table.schema.metadata[b"table"] == b"requests"
    assert table.cast(AUDIT_REQUESTS).schema.equals(AUDIT_REQUESTS)
    rows = table.to_pylist()
    first = rows[0]
    assert first["request_id"] == "r0"
    assert first["time"] == dt.datetime(2026, 11, 26, 10, 0, tzinfo=dt.UTC)
    assert first["query"] == "how do refunds work 0"
    assert json.loads(first["filters"]) == {"collection": "acme"}
    assert first["segment"] == "acme"
    assert [(d["rank"], d["id"], d["score"]) for d in first["docs"]] == [
        (1, "d0-1", 2.5),
        (2, "d0-2", 1.0),
    ]
    assert first["docs"][0]["text"] == "refunds take 5 days"
    assert json.loads(first["citations"]) == ["d1"]
    assert first["feedback"] == "up"
    assert first["origin"].endswith("2026-11-26/a.jsonl:1")
    # No filters in the record: its segment says so instead of dropping it.
    assert rows[-1]["segment"] == NO_SEGMENT and rows[-1]["query"] == "x"


def test_parquet_and_gzip_logs_read_the_same_requests(tmp_path: Path) -> None:
    records = [record(i) for i in range(5)]
    write_jsonl(tmp_path / "j" / "2026-11-26.jsonl", records)
    gz = tmp_path / "g" / "2026-11-26.jsonl.gz"
    gz.parent.mkdir()
    gz.write_bytes(gzip.compress((tmp_path / "j" / "2026-11-26.jsonl").read_bytes()))
    (tmp_path / "p").mkdir()
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "p" / "2026-11-26.parquet")

    frames = {}
    for name, fmt, pattern in (
        ("jsonl", "jsonl", "j/{day}.jsonl"),
        ("gzip", "jsonl", "g/{day}.jsonl.gz"),
        ("parquet", "parquet", "p/{day}.parquet"),
    ):
        out = tmp_path / name / "requests.parquet"
        assert read(source(tmp_path / pattern, fmt), out).records == 5
        frames[name] = pl.read_parquet(out).drop("origin")
    assert frames["jsonl"].equals(frames["gzip"])
    assert frames["jsonl"].equals(frames["parquet"])


def test_records_that_do_not_map_are_named_and_counted(tmp_path: Path) -> None:
    good = [record(i) for i in range(40)]
    bad = [
        "{not json",
        json.dumps(record(99, request={"filters": {}})),  # no query
        json.dumps(record(98, retrieval={"hits": [{"_score": 1}]})),  # a hit without an id
        json.dumps([1, 2]),
    ]
    path = write_jsonl(tmp_path / "2026-11-26.jsonl", [*good[:10], *bad, *good[10:]])
    out = tmp_path / "requests.parquet"
    report = read(source(tmp_path / "{day}.jsonl"), out, max_bad_share=0.1)

    assert (report.records, report.bad) == (40, 4)
    origins = [o for o, _ in report.bad_samples]
    assert origins == [f"{path}:{n}" for n in (11, 12, 13, 14)]
    reasons = [r for _, r in report.bad_samples]
    assert reasons[0].startswith("not valid JSON") and reasons[1] == "no query"
    assert "id in docs[0]" in reasons[2] and "not an object" in reasons[3]
    assert pq.read_metadata(out).num_rows == 40

    # Past the day's limit: one message naming the file and the lines, and nothing written.
    out2 = tmp_path / "strict" / "requests.parquet"
    with pytest.raises(InputError) as err:
        read(source(tmp_path / "{day}.jsonl"), out2, max_bad_share=0.05)
    message = str(err.value)
    assert "4 of 44 records" in message and f"{path}:11" in message and str(path) in message
    assert not out2.exists() and list(out2.parent.iterdir()) == []


def test_a_bad_records_reason_is_redacted_before_it_is_cut(tmp_path: Path) -> None:
    # The time field holds a card number past the reason's cut: cut first, the card's first
    # digits would no longer pass its check and would be reported as they are.
    card = "4111 1111 1111 1111"
    value = f"paid on the twenty-sixth, card {card}, call 13912345678"
    write_jsonl(tmp_path / "2026-11-26.jsonl", [record(1, ts=value), record(2)])
    report = read(source(tmp_path / "{day}.jsonl"), tmp_path / "r.parquet", max_bad_share=0.5)
    [(_, reason)] = report.bad_samples
    assert "ISO 8601" in reason and "paid on" in reason
    assert "4111" not in reason and "1111" not in reason and "139" not in reason
    assert report.redactions == {"card": 1, "phone": 1}
    # A megabyte of it is still one short reason.
    write_jsonl(tmp_path / "2026-11-26.jsonl", [record(1, ts="x" * 2**20), record(2)])
    report = read(source(tmp_path / "{day}.jsonl"), tmp_path / "r.parquet", max_bad_share=0.5)
    assert len(report.bad_samples[0][1]) < 300


def test_a_day_without_files_and_a_bad_expression_fail_with_one_message(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no file matches .*2026-11-26"):
        read(source(tmp_path / "{day}.jsonl"), tmp_path / "r.parquet")
    write_jsonl(tmp_path / "2026-11-26.jsonl", [record(1)])
    with pytest.raises(ConfigError, match="audit.segment"):
        read(source(tmp_path / "{day}.jsonl"), tmp_path / "r.parquet", segment="filters.[")
    with pytest.raises(ValueError, match="query"):
        source(tmp_path / "{day}.jsonl", query="request.[")


def _every_text(path: Path) -> str:
    """Every byte of a file, and when it is Parquet every value decoded (it is compressed)."""
    raw = path.read_bytes().decode("utf-8", "replace")
    if path.suffix == ".parquet":
        raw += json.dumps(pq.read_table(path).to_pylist(), default=str, ensure_ascii=False)
    return raw


async def test_nothing_unredacted_reaches_a_file(tmp_path: Path) -> None:
    planted = record(
        1,
        session_id=EMAIL,
        request={"q": f"why was {EMAIL} charged twice?", "filters": {"owner": EMAIL}},
        retrieval={
            "hits": [
                {"_id": "d1", "_score": 1.0, "_source": {"content": f"write to {EMAIL} today"}},
                {"_id": "d2"},  # served by id only: its text is fetched later
            ]
        },
        response={"text": f"We mailed {EMAIL}; card 4111-1111-1111-1111.", "citations": [EMAIL]},
        feedback={"thumb": f"call me: {EMAIL}"},
    )
    unmapped = {"id": f"bad-{EMAIL}"}  # no query: its origin and reason are reported
    write_jsonl(tmp_path / "logs" / "2026-11-26.jsonl", [planted, record(2), unmapped])
    out_dir = tmp_path / "audit"
    report = read(
        source(tmp_path / "logs" / "{day}.jsonl"), out_dir / "requests.parquet", max_bad_share=0.5
    )

    assert report.redactions["email"] == 7 and report.redactions["card"] == 1
    # The fetched text of the id-only document is redacted as well.
    requests = pl.read_parquet(out_dir / "requests.parquet")

    async def fetch(ids: Any) -> dict[str, str]:
        return {i: f"{i} belongs to {EMAIL}" for i in ids}

    resolved = await resolve_texts(requests, fetch, redact=RedactOptions())
    resolved.write_parquet(out_dir / "resolved.parquet")
    (out_dir / "report.json").write_text(json.dumps(report.__dict__, default=str))

    files = [p for p in out_dir.rglob("*") if p.is_file()]
    assert {p.name for p in files} == {"requests.parquet", "resolved.parquet", "report.json"}
    for path in files:
        text = _every_text(path)
        assert EMAIL not in text and "example.org" not in text, path.name
    assert "[email]" in _every_text(out_dir / "resolved.parquet")


def test_a_pattern_that_runs_out_of_time_replaces_its_text_whole() -> None:
    red = Redactor(
        RedactOptions(
            defaults=False,
            patterns=[
                {"name": "slow", "pattern": r"(a|aa)+$"},
                {"name": "acct", "pattern": r"ACCT-\d+"},
            ],
            timeout_s=0.05,
        )
    )
    assert red("see ACCT-42") == "see [acct]"
    assert red("a" * 40 + "!") == "[timeout]"
    assert red.counts == {"acct": 1, "timeout": 1}
    with pytest.raises(ValueError, match="pattern 'x'"):
        RedactOptions(patterns=[{"name": "x", "pattern": "(unclosed"}])


def test_default_redaction_keeps_dates_counts_and_order_numbers() -> None:
    red = Redactor(RedactOptions())
    kept = "on 2026-11-26 we shipped 12345 units, order 1234567812345678"
    assert red(kept) == kept
    assert (
        red("call +1 (202) 456-1414, 13812345678 or a@b.co") == "call [phone], [phone] or [email]"
    )
    assert red("pay with 4111 1111 1111 1111") == "pay with [card]"
    # Two numbers side by side are one run too long for a phone: each is found within it.
    assert red("+1 (202) 456-1414 13812345678") == "[phone] [phone]"


async def test_served_content_by_id_and_the_changed_flag(tmp_path: Path) -> None:
    served, now = "refunds take 5 days", "refunds take 10 days"
    docs = [
        {"id": "same", "content_hash": "sha256:" + content_digest(served)},
        {"id": "edited", "content_hash": content_digest(served).upper()},
        {"id": "nohash"},
        {"id": "gone", "content_hash": content_digest(served)},
        {"id": "logged", "text": "served with the log"},
    ]
    write_jsonl(tmp_path / "2026-11-26.jsonl", [record(1, retrieval={"hits": docs})])
    out = tmp_path / "requests.parquet"
    read(source(tmp_path / "{day}.jsonl", docs="retrieval.hits"), out)
    requests = pl.read_parquet(out)
    assert requests["docs"][0].struct.field("text").to_list()[:4] == [None] * 4

    from ragaudit.search import Document, make_backend

    backend = make_backend("local", path=tmp_path / "index")
    backend.index([Document("same", served), Document("edited", now), Document("nohash", now)])
    asked: list[list[str]] = []

    async def fetch(ids: Any) -> dict[str, str]:
        asked.append(list(ids))
        return await backend.fetch_texts(ids)  # type: ignore[attr-defined]

    resolved = await resolve_texts(requests, fetch)
    got = {d["id"]: (d["text"], d["changed"]) for d in resolved["docs"][0].to_list()}
    assert got == {
        "same": (served, False),
        "edited": (None, True),  # not graded against a text the user never saw
        "nohash": (now, None),
        "gone": (None, None),
        "logged": ("served with the log", None),
    }
    assert asked == [["edited", "gone", "nohash", "same"]]
    assert changed_count(resolved) == 1


def test_plain_paths_give_what_jmespath_gives() -> None:
    import jmespath

    from ragaudit.audit._source import getter

    exprs = [
        *FIELDS.values(),
        "retrieval.hits[*]",
        "retrieval.hits[*]._id",
        "a.b.c",
        '"a.b"',
        "retrieval.hits[0]._id",  # an index: left to jmespath
        "length(retrieval.hits)",
    ]
    records: list[Any] = [
        record(1),
        record(2, retrieval={"hits": "not a list"}),
        record(3, retrieval={"hits": [None, 5, {"_id": "x"}]}),
        record(4, request=None, response=[1, 2]),
        {"a": {"b": {"c": 0}}, "a.b": False, "retrieval": {"hits": []}},
        {},
    ]
    for expr in exprs:
        fn = getter(expr, "t")
        for rec in records:
            try:
                want = jmespath.search(expr, rec)
            except jmespath.exceptions.JMESPathError:
                continue  # a function on a wrong type: jmespath's own error either way
            assert fn(rec) == want, (expr, rec)


def test_ids_that_look_like_personal_data_stay_apart(tmp_path: Path) -> None:
    # Ids holding a caller's number or address: a placeholder would make them one id.
    ids = [f"call-1391234567{i}" for i in range(5)] + ["ana.lee@example.com"]
    write_jsonl(
        tmp_path / "logs" / "2026-11-26" / "a.jsonl",
        [record(i, id=rid, session_id=rid) for i, rid in enumerate(ids)],
    )
    out = tmp_path / "requests.parquet"
    read(source(tmp_path / "logs" / "{day}" / "*.jsonl"), out)
    rows = pq.read_table(out).to_pylist()
    got = [r["request_id"] for r in rows]
    assert len(set(got)) == len(ids)
    assert all(g.startswith("id:") for g in got)
    assert "ana.lee@example.com" not in out.read_bytes().decode("utf-8", "replace")
    # A dated id is no personal data: it is kept as it is.
    write_jsonl(tmp_path / "logs" / "2026-11-26" / "a.jsonl", [record(1, id="2026-11-26-000001")])
    read(source(tmp_path / "logs" / "{day}" / "*.jsonl"), out)
    assert pq.read_table(out).to_pylist()[0]["request_id"] == "2026-11-26-000001"


def test_the_same_log_twice_is_read_once_and_said(tmp_path: Path) -> None:
    day = tmp_path / "logs" / "2026-11-26"
    write_jsonl(day / "a.jsonl", [record(i) for i in range(6)])
    (day / "copy.jsonl").write_bytes((day / "a.jsonl").read_bytes())
    out = tmp_path / "requests.parquet"
    report = read(source(tmp_path / "logs" / "{day}" / "*.jsonl"), out)

    assert (report.records, report.duplicates, report.bad) == (6, 6, 0)
    assert pq.read_metadata(out).num_rows == 6
    assert "6 of the requests read had an id read before that day" in " ".join(report.notes)
    origin, why = report.dropped_samples[0]
    assert origin.endswith("copy.jsonl:1") and "read before" in why
    assert report.summary()["duplicates"] == 6


def test_requests_of_another_day_are_left_out_and_counted(tmp_path: Path) -> None:
    week_ago = [record(i, ts=f"2026-11-19T10:{i:02d}:00Z") for i in range(3)]
    path = write_jsonl(tmp_path / "2026-11-26.jsonl", [record(1), *week_ago, record(2)])
    out = tmp_path / "requests.parquet"
    report = read(source(tmp_path / "{day}.jsonl"), out)

    assert (report.records, report.off_day, report.bad) == (2, 3, 0)
    assert [r["request_id"] for r in pq.read_table(out).to_pylist()] == ["r1", "r2"]
    origin, why = report.dropped_samples[0]
    assert origin == f"{path}:2" and "outside 2026-11-26 (UTC)" in why
    assert "3 of the requests read were timestamped outside the day" in " ".join(report.notes)

    # A file of another day entirely: one message, nothing written.
    write_jsonl(tmp_path / "old" / "2026-11-26.jsonl", week_ago)
    with pytest.raises(InputError, match="no request of 2026-11-26 was read: 3 timestamped"):
        read(source(tmp_path / "old" / "{day}.jsonl"), tmp_path / "old.parquet")
    assert not (tmp_path / "old.parquet").exists()


def test_the_day_is_a_calendar_day_of_the_configured_zone(tmp_path: Path) -> None:
    # 23:30 UTC on the 25th is 00:30 on the 26th in Berlin; 23:30 UTC on the 26th is the 27th.
    rows = [record(1, ts="2026-11-25T23:30:00Z"), record(2, ts="2026-11-26T23:30:00Z")]
    write_jsonl(tmp_path / "2026-11-26.jsonl", rows)
    src = SourceOptions(path=str(tmp_path / "{day}.jsonl"), fields=FIELDS, timezone="Europe/Berlin")
    report = read(src, tmp_path / "requests.parquet", max_bad_share=0.0)
    assert (report.records, report.off_day) == (1, 1)
    assert pq.read_table(tmp_path / "requests.parquet").column("request_id").to_pylist() == ["r1"]
    with pytest.raises(ValueError, match="not a time zone"):
        SourceOptions(path="x", timezone="Mars/Olympus")


def test_a_deeply_nested_line_and_times_out_of_range_are_each_one_bad_record(
    tmp_path: Path,
) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    # Filters logged as JSON text, nested as deep inside its string.
    deep_filters = json.dumps(record(90, request={"q": "deep", "filters": "[" * 100_000}))
    times = ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-05:00", -90000000000]
    bad = [deep, deep_filters, *(json.dumps(record(80 + i, ts=t)) for i, t in enumerate(times))]
    good = [record(i) for i in range(40)]
    write_jsonl(tmp_path / "2026-11-26.jsonl", [*good[:20], *bad, *good[20:]])
    out = tmp_path / "requests.parquet"
    report = read(source(tmp_path / "{day}.jsonl"), out, max_bad_share=0.2)

    assert (report.records, report.bad) == (40, 5)
    reasons = [r for _, r in report.bad_samples]
    assert reasons[0] == "nested too deeply to read as JSON"
    assert reasons[1] == "filters is JSON nested too deeply to read"
    assert all(r.startswith("time ") and "out of range" in r for r in reasons[2:])
    assert pq.read_metadata(out).num_rows == 40


def test_a_truncated_gzip_counts_its_unreadable_rest_as_bad(tmp_path: Path) -> None:
    day = tmp_path / "logs" / "2026-11-26"
    day.mkdir(parents=True)
    whole = ("\n".join(json.dumps(record(i)) for i in range(200)) + "\n").encode()
    (day / "a.jsonl.gz").write_bytes(gzip.compress(whole))
    cut = gzip.compress("\n".join(json.dumps(record(i)) for i in range(200, 400)).encode())
    (day / "b.jsonl.gz").write_bytes(cut[: len(cut) // 2])
    out = tmp_path / "requests.parquet"
    report = read(source(tmp_path / "logs" / "{day}" / "*.jsonl.gz"), out, max_bad_share=0.5)

    assert report.records >= 200 and report.bad >= 1
    origin, reason = report.bad_samples[-1]
    assert origin.startswith(str(day / "b.jsonl.gz")) and reason.startswith("cannot be read past")
    assert pq.read_metadata(out).num_rows == report.records
    # Past the day's limit it is the share of bad records that fails the day, as any other.
    with pytest.raises(InputError, match="do not map, more than audit.max_bad_share"):
        read(source(day / "b.jsonl.gz"), tmp_path / "strict.parquet", max_bad_share=0.0)


def test_a_record_larger_than_the_bound_is_a_bad_record(tmp_path: Path) -> None:
    big = record(90, request={"q": "why " * 100_000})  # 400 kB in one query
    records = [record(1), big, record(2)]
    write_jsonl(tmp_path / "j" / "2026-11-26.jsonl", records)
    (tmp_path / "p").mkdir()
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "p" / "2026-11-26.parquet")
    bound = {"fields": FIELDS, "max_record_bytes": 350_000}
    jsonl = SourceOptions(path=str(tmp_path / "j" / "{day}.jsonl"), **bound)
    parquet = SourceOptions(format="parquet", path=str(tmp_path / "p" / "{day}.parquet"), **bound)

    for src, reason in (
        # A JSONL line past the bound is refused without being read whole.
        (jsonl, f"{len(json.dumps(big)) + 1:,} bytes long, more than 350,000"),
        # A request of any format past it by its texts, once mapped.
        (parquet, " bytes of text, more than audit.source.max_record_bytes 350,000"),
    ):
        out = tmp_path / f"{src.format}.parquet"
        report = read(src, out, max_bad_share=0.5)
        assert (report.records, report.bad) == (2, 1)
        said = report.bad_samples[0][1]
        assert said.endswith(reason) and int(said.split()[0].replace(",", "")) > 400_000
        assert pq.read_table(out).column("request_id").to_pylist() == ["r1", "r2"]
    assert SourceOptions(path="x").max_record_bytes == 1 << 20
