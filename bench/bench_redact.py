"""The audit's redaction (issue #55): personal data caught, ordinary text left alone, and speed.

Each figure is printed for the redactor of this branch and, side by side, for the one it
replaced (read from git at ``BEFORE``, measured in the same run). Printed, each met or not:

- (a) every planted datum is caught: e-mail addresses (ASCII and internationalised), phone
  numbers of China, the US, the UK, Germany, India and Japan in their national and
  international formats, with and without separators, next to English, CJK text and letters,
  Luhn-valid cards of each scheme in their printed groupings, IBANs; each in a sentence, and
  caught means the sentence comes back with exactly that datum replaced by its kind;
- (a) a real audit day (the bundled ``data/audit`` day through ``ragaudit audit`` with the fake
  judge, in a child process) with data planted in every query, answer and served document,
  a session id and a bad record: no file the day writes holds any of them — Parquet read back,
  HTML, JSON, the LLM call log, the memo (SQLite, MessagePack values decoded), the judgment
  store, the Prefect database — in its plain, JSON-escaped, HTML-escaped or separator-free form;
- (b) at most 0.5 % of ordinary documents changed: the bundled corpora (demo, ablation's 453
  Chinese web documents, calibration), their questions, and a generated set of dates, times,
  timestamps, years before an ellipsis, IPs, ISBNs, versions, prices, coordinates, order
  numbers, epoch times, year ranges and spaced thousands. The corpora hold some public contact
  data (a company's help address, hospital switchboards), read and listed below by hand in
  ``CONTACTS``: those documents count as caught, not as ordinary text changed, and are shown;
- redaction does not dominate a day's read: ``read_day`` of 20,000 requests (ten served
  documents each from the corpora, an answer of its own each) takes at most twice as long
  redacted as with ``defaults: false``; documents/s of both redactors printed.

    python bench/bench_redact.py            # everything (the audit day takes a minute or two)
    python bench/bench_redact.py --no-day   # without the audit day (no Prefect run)
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import html
import importlib.util
import json
import os
import random
import re
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import _util  # noqa: F401  (offline environment first; tests/ on the path)
import msgpack
import phonenumbers
import pyarrow.parquet as pq
from _util import REPO, load_average, scratch, table
from stdnum import iban as stdnum_iban
from support.audit_logs import DAY, FIELDS, audit_yaml

from ragaudit.audit import RedactOptions, SourceOptions, read_day
from ragaudit.audit._redact import Redactor

BEFORE = "1f3e7a5fface4bb30f8822ef20359356413c8cee"  # the last commit with the old redactor
CHANGED_GOAL = 0.005
READ_GOAL = 2.0  # a redacted read at most this many times as long as an unredacted one

# Public contact data in the bundled corpora, found by reading every change the redactor made
# to them (document id: what it holds). Redacting these is right: they count as caught.
CONTACTS = {
    "dr181582-1": "a video site's help e-mail address",
    "dr181582-3": "a video site's help e-mail address",
    "dr181582-4": "a video site's help e-mail address",
    "dr181601-1": "a training school's hotline, mobile and landline",
    "dr181601-1-1": "a training school's hotline, mobile and landline",
    "dr181603-2": "three hospitals' switchboards",
    "dr181622-2": "a payment service's overseas hotline (+86)",
    "dr181626-2": "a railway's complaints e-mail address",
    "dr181638-2": "a video site's support e-mail address",
    "dr181651-2": "a teacher's WeChat id, which is a mobile number",
    "dr181655-1": "a study agency's complaints mobile number",
}


# ------------------------------------------------------------------------------ redactors


def before() -> Any | None:
    """The module of the redactor this branch replaced, from git (None when git lacks it)."""
    try:
        source = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{BEFORE}:ragaudit/audit/_redact.py"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    spec = importlib.util.spec_from_loader("_redact_before", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the models' annotations through it
    exec(compile(source, "_redact_before.py", "exec"), module.__dict__)  # noqa: S102
    return module


def redactors() -> dict[str, tuple[Callable[[], Any], type]]:
    """This branch's redactor and the one it replaced: a factory of a fresh one, and its class."""
    out: dict[str, tuple[Callable[[], Any], type]] = {
        "new": (lambda: Redactor(RedactOptions()), Redactor)
    }
    old = before()
    if old is not None:
        out["before"] = (lambda: old.Redactor(old.RedactOptions()), old.Redactor)
    return out


# ------------------------------------------------------------------------------ planted data

# Sentences a datum is planted in, per kind: next to English, CJK text, letters, brackets.
CONTEXTS = {
    "phone": ["call {} now", "手机号{}", "请拨打{}联系", "call{}", "電話{}まで", "({}),"],
    "card": ["paid with {} today", "卡号{}已冻结", "card{}", "({}),"],
    "iban": ["IBAN {} please", "账户{}转账", "Konto: {}.", "({}),"],
    # An address glued to Chinese on its left is one only when its own name is not Chinese:
    # "邮箱用户@例子.广告" cannot be told from a Chinese name "邮箱用户".
    "email": ["write to {} today", "邮箱:{}。", "邮箱{}联系", "mail {}."],
}
_HAN = re.compile(r"[\u4e00-\u9fff]")
SEPARATED = re.compile(r"[ \-./()]")


def _valid_numbers(region: str, kind: Any, n: int, rng: random.Random) -> list[Any]:
    """``n`` valid numbers of ``kind`` in ``region``: its example number, last digits drawn."""
    example = phonenumbers.example_number_for_type(region, kind)
    assert example is not None, (region, kind)
    national = str(example.national_number)
    out: list[Any] = []
    while len(out) < n:
        digits = national[:-4] + f"{rng.randrange(10_000):04d}"
        number = phonenumbers.parse("+" + str(example.country_code) + digits, None)
        same = phonenumbers.number_type(number) == phonenumbers.number_type(example)
        if phonenumbers.is_valid_number(number) and same:
            out.append(number)
    return out


def phones(rng: random.Random) -> list[tuple[str, str]]:
    """(country, phone as written) in the national and international formats of six countries.

    The formats are the library's (national, international, E.164), the national one with its
    spaces as dashes and with no separator at all, a mobile without its trunk "0" where people
    write it so (China, India), and the habits the library does not print (US dots, a German
    slash, a Chinese mobile in 3-4-4 dashes).
    """
    fmt = phonenumbers.PhoneNumberFormat
    written: list[tuple[str, str]] = []
    for region in ("CN", "US", "GB", "DE", "IN", "JP"):
        for kind in (phonenumbers.PhoneNumberType.MOBILE, phonenumbers.PhoneNumberType.FIXED_LINE):
            for number in _valid_numbers(region, kind, 3, rng):
                national = phonenumbers.format_number(number, fmt.NATIONAL)
                forms = {
                    national,
                    national.replace(" ", "-"),
                    re.sub(r"\D", "", national),
                    phonenumbers.format_number(number, fmt.INTERNATIONAL),
                    phonenumbers.format_number(number, fmt.E164),
                }
                nsn = phonenumbers.national_significant_number(number)
                if region in ("CN", "IN") and kind == phonenumbers.PhoneNumberType.MOBILE:
                    forms.add(nsn)
                    forms.add(f"{nsn[:5]} {nsn[5:]}" if region == "IN" else nsn)
                if region == "US":
                    forms.add(f"{nsn[:3]}.{nsn[3:6]}.{nsn[6:]}")
                    forms.add(f"1-{nsn[:3]}-{nsn[3:6]}-{nsn[6:]}")
                if region == "DE" and kind == phonenumbers.PhoneNumberType.FIXED_LINE:
                    forms.add(national.replace(" ", "/", 1))
                if region == "CN" and kind == phonenumbers.PhoneNumberType.MOBILE:
                    forms.add(f"{nsn[:3]}-{nsn[3:7]}-{nsn[7:]}")
                written += [(region, f) for f in sorted(forms)]
    return written


def _luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    body = prefix + "".join(str(rng.randrange(10)) for _ in range(length - len(prefix) - 1))
    for check in "0123456789":
        digits = body + check
        total = 0
        for i, c in enumerate(reversed(digits)):
            d = int(c) * (2 if i % 2 else 1)
            total += d - 9 if d > 9 else d
        if total % 10 == 0:
            return digits
    raise AssertionError("unreachable")


def cards(rng: random.Random) -> list[tuple[str, str]]:
    """(scheme, card as written): Luhn-valid numbers of each scheme in their groupings."""
    schemes = [
        ("visa", "4", 16),
        ("visa-13", "4", 13),
        ("visa-19", "4", 19),
        ("mastercard", "53", 16),
        ("mastercard-2", "2221", 16),
        ("amex", "37", 15),
        ("diners", "36", 14),
        ("discover", "6011", 16),
        ("jcb", "3530", 16),
        ("unionpay", "62", 16),
        ("unionpay-19", "6222", 19),
    ]
    out = []
    for scheme, prefix, length in schemes:
        for _ in range(3):
            d = _luhn_complete(prefix, length, rng)
            if length in (14, 15):  # Diners 4-6-4, Amex 4-6-5
                groups = [d[:4], d[4:10], d[10:]]
            else:
                groups = [d[i : i + 4] for i in range(0, length, 4)]
            out += [(scheme, d), (scheme, " ".join(groups)), (scheme, "-".join(groups))]
    return out


# Example IBANs of ten countries (the European Committee for Banking Standards' where its
# national check holds).
IBAN_EXAMPLES = [
    "GB82WEST12345698765432",
    "DE89370400440532013000",
    "FR1420041010050500013M02606",
    "ES9121000418450200051332",
    "IT60X0542811101000000123456",
    "NL91ABNA0417164300",
    "CH9300762011623852957",
    "AT611904300234573201",
    "BE71096123456769",
    "PL61109010140000071219812874",
]


def ibans(rng: random.Random) -> list[tuple[str, str]]:
    """(country, IBAN as written): the examples and account numbers drawn for GB, DE and NL,
    compact and in groups of four."""
    numbers = list(IBAN_EXAMPLES)
    for example in ("GB82WEST12345698765432", "DE89370400440532013000", "NL91ABNA0417164300"):
        for _ in range(3):
            bban = example[4:-6] + f"{rng.randrange(10**6):06d}"
            check = stdnum_iban.calc_check_digits(example[:2] + "00" + bban)
            numbers.append(example[:2] + check + bban)
    out = []
    for number in numbers:
        assert stdnum_iban.is_valid(number), number
        grouped = " ".join(number[i : i + 4] for i in range(0, len(number), 4))
        out += [(number[:2], number), (number[:2], grouped)]
    return out


EMAILS = [
    ("ascii", "jane.roe@example.org"),
    ("ascii", "j.smith+billing@mail.example.co.uk"),
    ("ascii", "support_team-7@help.example.com"),
    ("ascii", "13912345678@qq.com"),
    ("ascii", "wang.li@163.com"),
    ("ascii", "ana@xn--mller-kva.de"),
    ("internationalised", "jürgen@müller.de"),
    ("internationalised", "josé.garcía@correo.es"),
    ("internationalised", "françois@exemple.fr"),
    ("internationalised", "用户@例子.广告"),
    ("internationalised", "उपयोगकर्ता@उदाहरण.कॉम"),
    ("internationalised", "почта@пример.рф"),
    ("internationalised", "δοκιμή@παράδειγμα.δοκιμή"),
    ("internationalised", "info@bücher.example"),
]


def planted(seed: int = 5) -> list[tuple[str, str, str]]:
    """(kind, group, datum) of every planted datum."""
    rng = random.Random(seed)
    return (
        [("email", g, e) for g, e in EMAILS]
        + [("phone", g, p) for g, p in phones(rng)]
        + [("card", g, c) for g, c in cards(rng)]
        + [("iban", g, i) for g, i in ibans(rng)]
    )


def caught(make: Callable[[], Any], data: list[tuple[str, str, str]]) -> tuple[Counter, list]:
    """Per (kind, group): data caught in every context, and the sentences missed."""
    red = make()
    hits: Counter[tuple[str, str]] = Counter()
    missed = []
    for kind, group, datum in data:
        ok = True
        for context in CONTEXTS[kind]:
            if context.startswith("邮箱{") and _HAN.match(datum):
                continue
            got = red(context.format(datum))
            if got != context.format(f"[{kind}]"):
                ok = False
                missed.append((kind, context.format(datum), got))
        hits[(kind, group)] += ok
    return hits, missed


# ------------------------------------------------------------------------------ an audit day

SESSION_EMAIL = "ana.lee@example.com"
BAD_CARD = "4111 1111 1111 1111"


def plant_day(folder: Path, data: list[str]) -> None:
    """The bundled day's log with ``data`` planted in every query, answer and served document
    (a different few each), an e-mail as one session id, and one bad record whose time holds
    a card number past the first forty characters."""
    src = REPO / "data" / "audit" / "logs" / DAY / "requests.jsonl"
    records = [json.loads(line) for line in src.read_text("utf-8").splitlines() if line.strip()]
    out = []
    for i, rec in enumerate(records):
        pick = [data[(i * 3 + j) % len(data)] for j in range(3)]
        rec["request"]["q"] += f" 手机号{pick[0]}"
        rec["response"]["text"] += f" Contact {pick[1]}."
        for j, hit in enumerate(rec["retrieval"]["hits"]):
            hit["_source"]["content"] += f" 请拨打{pick[(j + 2) % 3]}联系"
        if i == 0:
            rec["session_id"] = SESSION_EMAIL
        out.append(rec)
    bad = dict(records[1], id="bad-1", ts=f"paid on the twenty-sixth with card {BAD_CARD}")
    out.insert(5, bad)
    target = folder / "logs" / DAY
    target.mkdir(parents=True)
    (target / "requests.jsonl").write_text(
        "\n".join(json.dumps(r, ensure_ascii=False) for r in out) + "\n", encoding="utf-8"
    )


def run_day(folder: Path) -> tuple[int, str]:
    """``ragaudit audit`` of the planted day in a child process: its exit code and output."""
    config = audit_yaml(folder)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGAUDIT_", "PREFECT_"))}
    env.update(
        RAGAUDIT_HOME=str(folder / "home"),
        PREFECT_HOME=str(folder / "home" / "prefect"),
        PYTHONPATH=str(REPO),
        NO_COLOR="1",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "ragaudit", "audit", "-c", str(config), "--day", DAY],
        capture_output=True,
        text=True,
        env=env,
        cwd=folder,
        timeout=1200,
        check=False,
    )
    return proc.returncode, proc.stdout + proc.stderr


def _sqlite_text(path: Path) -> str:
    """Every value of every table of a SQLite file; blobs also as MessagePack when they are."""
    parts: list[str] = []
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for name in tables:
            for row in con.execute(f'SELECT * FROM "{name}"'):  # noqa: S608
                for value in row:
                    if isinstance(value, bytes):
                        parts.append(value.decode("utf-8", "replace"))
                        try:
                            unpacked = msgpack.unpackb(value, raw=False, strict_map_key=False)
                            parts.append(json.dumps(unpacked, ensure_ascii=False, default=str))
                        except Exception:  # noqa: S110  (not MessagePack: the raw text is kept)
                            pass
                    elif value is not None:
                        parts.append(str(value))
    finally:
        con.close()
    return "\n".join(parts)


def every_text(path: Path) -> str:
    """A file's bytes as text, and what they hold decoded (Parquet rows, SQLite values)."""
    raw = path.read_bytes()
    text = raw.decode("utf-8", "replace")
    if path.suffix == ".parquet":
        text += json.dumps(pq.read_table(path).to_pylist(), default=str, ensure_ascii=False)
    elif raw.startswith(b"SQLite format 3"):
        text += _sqlite_text(path)
    return text


def forms(datum: str) -> set[str]:
    """The ways a datum can stand in a file: plain, JSON- and HTML-escaped, digits alone."""
    out = {datum, json.dumps(datum)[1:-1], html.escape(datum)}
    compact = SEPARATED.sub("", datum)
    if sum(c.isdigit() for c in compact) >= 7:
        out.add(compact)
    return out


def leaks(root: Path, data: Iterable[str]) -> tuple[list[str], list[Path]]:
    """(file: datum) for every planted datum found under ``root``, and the files read."""
    wanted = {d: forms(d) for d in data}
    found, files = [], []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        files.append(path)
        text = every_text(path)
        flat = SEPARATED.sub("", text)
        for datum, variants in wanted.items():
            compact = SEPARATED.sub("", datum)
            if any(v in text for v in variants) or (len(compact) >= 7 and compact in flat):
                found.append(f"{path.relative_to(root)}: {datum}")
    return found, files


# ------------------------------------------------------------------------------ ordinary text


def corpora() -> dict[str, list[tuple[str, str]]]:
    """(id, text) of the bundled corpora and question sets, by name."""
    data = REPO / "data"

    def jsonl(path: Path, fields: tuple[str, ...], prefix: str) -> list[tuple[str, str]]:
        out = []
        for i, line in enumerate(path.read_text("utf-8").splitlines()):
            rec = json.loads(line)
            name = rec.get("id") or rec.get("question_id") or f"{prefix}-{i}"
            for f in fields:
                if rec.get(f):
                    out.append((name if f == "text" else f"{name}:{f}", rec[f]))
        return out

    calibration = jsonl(
        data / "calibration" / "halueval" / "qa_samples.jsonl",
        ("knowledge", "question", "right_answer", "hallucinated_answer"),
        "halueval",
    )
    for name in ("ar", "cr", "ff"):
        with (data / "calibration" / "wikieval" / f"{name}.csv").open(encoding="utf-8") as fh:
            for i, row in enumerate(csv.DictReader(fh)):
                for f in ("question", "context", "answer"):
                    if row.get(f):
                        calibration.append((f"wikieval-{name}-{i}:{f}", row[f]))
    audit_log = REPO / "data" / "audit" / "logs" / DAY / "requests.jsonl"
    audit = []
    for line in audit_log.read_text("utf-8").splitlines():
        rec = json.loads(line)
        audit.append((rec["id"] + ":q", rec["request"]["q"]))
        audit.append((rec["id"] + ":a", rec["response"]["text"]))
        audit += [(h["_id"], h["_source"]["content"]) for h in rec["retrieval"]["hits"]]
    return {
        "demo corpus": jsonl(data / "demo" / "corpus.jsonl", ("text",), "demo"),
        "ablation corpus (zh)": jsonl(data / "ablation" / "corpus.jsonl", ("text",), "ablation"),
        "calibration (en)": calibration,
        "questions": jsonl(data / "demo" / "questions.jsonl", ("question", "reference"), "q")
        + jsonl(data / "ablation" / "questions.jsonl", ("question", "reference"), "q"),
        "audit day": audit,
    }


def ordinary(n: int, seed: int = 11) -> list[tuple[str, str]]:
    """``n`` generated documents of numbers that are nobody's: three kinds each, in English or
    Chinese sentences."""
    rng = random.Random(seed)

    def day() -> dt.datetime:
        return dt.datetime(1990, 1, 1) + dt.timedelta(seconds=rng.randrange(40 * 365 * 86_400))

    def isbn13() -> str:
        body = "978" + "".join(str(rng.randrange(10)) for _ in range(9))
        check = (10 - sum(int(c) * (3 if i % 2 else 1) for i, c in enumerate(body)) % 10) % 10
        d = body + str(check)
        return rng.choice([d, f"{d[:3]}-{d[3]}-{d[4:6]}-{d[6:12]}-{d[12]}"])

    def order() -> str:
        return rng.choice(
            [
                f"#{rng.randrange(10**5, 10**8)}",
                "-".join(str(rng.randrange(10**k, 10 ** (k + 1))) for k in (2, 6, 6)),
                day().strftime("%Y%m%d%H%M%S") + f"{rng.randrange(10**4):04d}",
                f"ORD-{day().year}-{rng.randrange(10**6):06d}",
                str(rng.randrange(10**17, 10**19)),
            ]
        )

    kinds: dict[str, Callable[[], str]] = {
        "date": lambda: day().strftime(
            rng.choice(
                ["%Y-%m-%d", "%d.%m.%Y", "%m/%d/%Y", "%Y/%m/%d", "%Y年%m月%d日", "%b %d, %Y"]
            )
        ),
        "time": lambda: day().strftime(rng.choice(["%H:%M", "%H:%M:%S", "%I:%M %p"])),
        "timestamp": lambda: day().strftime(
            rng.choice(
                [
                    "%Y-%m-%d %H:%M:%S",
                    "%Y-%m-%dT%H:%M:%SZ",
                    "%d.%m.%Y %H:%M",
                    "%d.%m %H:%M",
                    "回答时间:%Y-%m-%d %H:%M:%S",
                    "%Y.%m.%d %H:%M",
                    "%Y/%m/%d %H:%M",
                ]
            )
        ),
        "year before an ellipsis": lambda: day().strftime("%b %-d, %Y") + " ... The",
        "ip": lambda: ".".join(str(rng.randrange(256)) for _ in range(4)),
        "isbn": lambda: "ISBN " + isbn13(),
        "version": lambda: rng.choice(
            [
                f"v{rng.randrange(10)}.{rng.randrange(30)}.{rng.randrange(200)}",
                f"10.0.{rng.randrange(10000, 30000)}.{rng.randrange(2000)}",
                f"Chrome {rng.randrange(80, 130)}.0.{rng.randrange(1000, 7000)}"
                f".{rng.randrange(200)}",
            ]
        ),
        "price": lambda: rng.choice(
            [
                f"${rng.randrange(1, 10**5):,}.{rng.randrange(100):02d}",
                f"¥{rng.randrange(1, 10**7):,}",
                f"{rng.randrange(1, 10**6)}元",
                f"€ {rng.randrange(1, 10**4)},{rng.randrange(100):02d}",
            ]
        ),
        "coordinates": lambda: f"{rng.uniform(-180, 180):.4f}, {rng.uniform(-90, 90):.4f}",
        "order number": order,
        "epoch": lambda: str(rng.randrange(10**9, 18 * 10**8) * rng.choice([1, 1000])),
        "year range": lambda: (
            f"{rng.randrange(1900, 2000)}{rng.choice(['-', '–', ' - '])}{rng.randrange(2000, 2030)}"
        ),
        "spaced thousands": lambda: " ".join(
            [str(rng.randrange(1, 999))]
            + [f"{rng.randrange(1000):03d}" for _ in range(rng.randrange(2, 4))]
        ),
    }
    names = sorted(kinds)
    templates = [
        "On {} the figure was {}, see {}.",
        "{} 记录显示 {},另见 {}。",
        "Posted {} — {} ({}).",
        "{}:{},{}",
    ]
    out = []
    for i in range(n):
        picked = rng.sample(names, 3)
        text = rng.choice(templates).format(*(kinds[k]() for k in picked))
        out.append((f"gen-{i}:{'+'.join(picked)}", text))
    return out


def changed(
    make: Callable[[], Any], docs: list[tuple[str, str]]
) -> tuple[list[tuple[str, str, str]], float]:
    """The documents the redactor changed (id, before, after) and its documents per second."""
    red = make()
    for _, text in docs[:50]:
        red(text)  # the phone library loads a country's metadata on first use: not timed
    red = make()
    start = time.perf_counter()
    after = [red(text) for _, text in docs]
    seconds = time.perf_counter() - start
    out = [(i, t, a) for (i, t), a in zip(docs, after, strict=True) if a != t]
    return out, len(docs) / seconds


def _diff(before: str, after: str) -> str:
    """The first place two texts differ, with a little context."""
    i = next((k for k, (a, b) in enumerate(zip(before, after, strict=False)) if a != b), 0)
    return f"{before[max(0, i - 12) : i + 24]!r} -> {after[max(0, i - 12) : i + 24]!r}"


# ------------------------------------------------------------------------------ a day's read


def write_day(path: Path, docs: list[str], n: int, seed: int = 3) -> None:
    """``n`` requests: a corpus question, ten served documents from the corpora, an answer of
    its own (a document's start and a ticket number)."""
    rng = random.Random(seed)
    questions = [t for _, t in corpora()["questions"]]
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            served = rng.sample(range(len(docs)), 10)
            rec = {
                "id": f"r{i}",
                "ts": f"{DAY}T{i * 86_400 // n // 3600:02d}:{i % 60:02d}:00Z",
                "session_id": f"s{rng.randrange(n // 4)}",
                "request": {"q": rng.choice(questions)[:200], "filters": {"collection": "c"}},
                "retrieval": {
                    "hits": [
                        {"_id": f"d{j}", "_score": 1.0, "_source": {"content": docs[j]}}
                        for j in served
                    ]
                },
                "response": {"text": docs[served[0]][:300] + f" (ticket {i})"},
            }
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")


def read_seconds(pattern: Path, out: Path, redactor: type | None, defaults: bool = True) -> float:
    """``read_day`` of the day at ``pattern``, with ``redactor`` in place of this branch's."""
    import ragaudit.audit._source as source_module

    src = SourceOptions(format="jsonl", path=str(pattern), fields=FIELDS)
    kept = source_module.Redactor
    if redactor is not None:
        source_module.Redactor = redactor  # type: ignore[assignment,misc]
    try:
        start = time.perf_counter()
        read_day(
            src,
            RedactOptions(defaults=defaults),
            dt.date.fromisoformat(DAY),
            segment="filters.collection",
            out=out,
            max_bad_share=0.01,
        )
        return time.perf_counter() - start
    finally:
        source_module.Redactor = kept  # type: ignore[misc]


# ------------------------------------------------------------------------------ main


def verdict(ok: bool, why: str) -> str:
    return "met" if ok else f"not met: {why}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-day", action="store_true", help="skip the audit day (Prefect)")
    parser.add_argument("--generated", type=int, default=2000, help="generated ordinary docs")
    parser.add_argument("--requests", type=int, default=20_000, help="requests in the read")
    args = parser.parse_args()
    makers = redactors()
    names = list(makers)
    print(f"load average {load_average()}; redactors: {', '.join(names)}")
    if "before" not in makers:
        print(f"(the redactor before, at {BEFORE[:10]}, is not in this checkout's git history)")
    goals: list[str] = []

    # (a) planted data, one sentence at a time.
    data = planted()
    print(f"\n(a) {len(data)} planted data, each in every sentence of its kind:")
    for kind, contexts in CONTEXTS.items():
        print(f"  {kind}: {contexts}")
    results = {name: caught(make, data) for name, (make, _) in makers.items()}
    groups = sorted({(k, g) for k, g, _ in data})
    totals = Counter((k, g) for k, g, _ in data)
    rows = [
        (kind, group, totals[(kind, group)], *(results[n][0][(kind, group)] for n in names))
        for kind, group in groups
    ]
    all_new = sum(results["new"][0].values())
    rows.append(("all", "", len(data), *(sum(results[n][0].values()) for n in names)))
    print(table(rows, ("kind", "group", "planted", *(f"caught ({n})" for n in names))))
    for kind, sentence, got in results["new"][1][:10]:
        print(f"  missed {kind}: {sentence!r} -> {got!r}")
    goals.append(
        f"goal: every planted datum caught — {all_new} of {len(data)}: "
        + verdict(all_new == len(data), f"{len(data) - all_new} missed")
    )

    # (a) a real audit day with the data planted.
    if not args.no_day:
        root = scratch("redact-day")
        day_data = [d for _, _, d in data]
        rng = random.Random(2)
        sample = rng.sample(day_data, 60)
        plant_day(root, sample)
        start = time.perf_counter()
        code, output = run_day(root)
        seconds = time.perf_counter() - start
        print(f"\n(a) the audit day: ragaudit audit exited {code} after {seconds:.0f} s")
        if code:
            print(output[-3000:])
        planted_day = [*sample, SESSION_EMAIL, BAD_CARD]
        found, files = leaks(root, planted_day)
        # The search itself is checked on the day's own log, which holds every datum.
        in_log = {f.split(": ", 1)[1] for f in found if f.startswith("logs/")}
        found = [f for f in found if not f.startswith("logs/")]
        files = [f for f in files if (root / "logs") not in f.parents]
        print(f"  the search finds {len(in_log)} of the {len(planted_day)} data in the day's log")
        # The call log keeps no prompt: what the judge graded is the sample's rows.
        graded = " ".join(every_text(p) for p in files if p.name == "labels.sample.parquet")
        seen = {k: graded.count(f"[{k}]") for k in ("phone", "email", "card", "iban")}
        read = " ".join(every_text(p) for p in files if p.name == "requests.parquet")
        print(
            "  placeholders in requests.parquet: "
            f"{ {k: read.count(f'[{k}]') for k in ('phone', 'email', 'card', 'iban')} }"
        )
        manifest = next((p for p in files if p.name == "manifest.json"), None)
        bad = json.loads(manifest.read_text())["read"]["bad_samples"] if manifest else []
        kinds = Counter(p.suffix or p.name for p in files)
        listed = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        print(f"  files read back: {len(files)} ({listed})")
        print(f"  placeholders in the texts the judge graded (labels.sample.parquet): {seen}")
        print(f"  manifest read.bad_samples: {bad}")
        for leak in found[:10]:
            print(f"  found {leak}")
        ok = code == 0 and not found and sum(seen.values()) > 0
        ok = ok and len(in_log) == len(planted_day)
        why = (
            f"exit {code}"
            if code
            else f"{len(found)} found"
            if found
            else f"the search found {len(in_log)} in the log"
            if len(in_log) < len(planted_day)
            else "nothing graded"
        )
        goals.append(
            f"goal: no file of the audit day holds a planted datum — {len(sample) + 2} planted, "
            f"{len(found)} found in {len(files)} files: " + verdict(bool(ok), why)
        )

    # (b) ordinary text.
    sets = corpora()
    sets["generated numbers"] = ordinary(args.generated)
    print("\n(b) ordinary text: documents changed (the contact data listed below apart)")
    rows = []
    speed: dict[str, list[float]] = {n: [] for n in names}
    worst = 0.0
    contact_seen: set[str] = set()
    shown: list[str] = []
    for set_name, docs in sets.items():
        cells = []
        for name in names:
            diff, per_s = changed(makers[name][0], docs)
            speed[name].append(len(docs) / per_s)
            plain = [d for d in diff if d[0] not in CONTACTS]
            if name == "new":
                contact_seen |= {d[0] for d in diff if d[0] in CONTACTS}
                share = len(plain) / len(docs)
                worst = max(worst, share)
                shown += [f"  changed ({set_name}) {i}: {_diff(b, a)}" for i, b, a in plain[:8]]
            cells.append(f"{len(plain) / len(docs):.2%} ({len(plain)})")
        rows.append((set_name, len(docs), *cells))
    print(table(rows, ("set", "documents", *(f"changed ({n})" for n in names))))
    print("\n".join(shown))
    print(f"  contact data in the corpora, caught by new: {len(contact_seen)} of {len(CONTACTS)}")
    for doc_id in sorted(CONTACTS):
        print(
            f"    {doc_id}: {CONTACTS[doc_id]}{'' if doc_id in contact_seen else '  (NOT caught)'}"
        )
    goals.append(
        f"goal: at most {CHANGED_GOAL:.1%} of ordinary documents changed — worst set "
        f"{worst:.2%}: " + verdict(worst <= CHANGED_GOAL, f"{worst:.2%} in a set")
    )

    # Speed: documents per second on all the ordinary text, and a day's read.
    total = sum(len(d) for d in sets.values())
    rates = {n: total / sum(speed[n]) for n in names}
    ratio = f" ({rates['new'] / rates['before']:.2f}× before)" if "before" in rates else ""
    print(
        f"\nredaction throughput on the {total:,} ordinary documents: "
        + ", ".join(f"{n} {r:,.0f} documents/s" for n, r in rates.items())
        + ratio
    )
    root = scratch("redact-read")
    all_docs = [t for name, d in sets.items() if name != "generated numbers" for _, t in d]
    write_day(root / f"{DAY}.jsonl", all_docs, args.requests)
    pattern = root / "{day}.jsonl"
    unredacted = read_seconds(pattern, root / "plain.parquet", None, defaults=False)
    times = {"new": read_seconds(pattern, root / "new.parquet", None)}
    if "before" in makers:
        times["before"] = read_seconds(pattern, root / "before.parquet", makers["before"][1])
    read_rows = [("no redaction", f"{unredacted:.1f}", "1.00")] + [
        (n, f"{s:.1f}", f"{s / unredacted:.2f}") for n, s in times.items()
    ]
    print(f"read_day of {args.requests:,} requests ({len(all_docs):,} distinct documents served):")
    print(table(read_rows, ("redactor", "read s", "× unredacted")))
    share = times["new"] / unredacted
    goals.append(
        f"goal: a redacted read at most {READ_GOAL:.0f}× an unredacted one — {share:.2f}×: "
        + verdict(share <= READ_GOAL, f"{share:.2f}×")
    )
    print()
    print("\n".join(goals))


if __name__ == "__main__":
    main()
