"""``ragaudit view``'s app through FastAPI's TestClient: paths, folder states, guards, escaping."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from support.reporting_runs import write_run
from support.viewer_runs import write_summary

from ragaudit.reporting import CALIBRATION_META
from ragaudit.runlock import hold_run
from ragaudit.viewer.app import TOKEN_COOKIE, create_app
from ragaudit.viewer.server import is_loopback

HOSTILE = "<script>alert(1)</script>"
LOOPBACK = "http://127.0.0.1"


def _run(root: Path, run_id: str, values: list[float | None], **kw) -> Path:
    path = write_run(root, run_id, {"faithfulness": values, "rouge_l": values}, **kw)
    write_summary(path)
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    _run(root, "a", [0.5, 0.6, 0.7, 0.6, 0.5, 0.4])
    _run(root, "b", [0.9, 0.8, 0.9, 0.7, 0.9, 0.8])
    return root


@pytest.fixture
def client(root: Path) -> TestClient:
    return TestClient(create_app(root), base_url=LOOPBACK)


def test_the_pages_answer(client: TestClient) -> None:
    listing = client.get("/")
    assert listing.status_code == 200
    assert 'href="/runs/a"' in listing.text and 'href="/runs/b"' in listing.text
    assert "script-src 'self';" in listing.headers["content-security-policy"]
    report = client.get("/runs/a")
    assert report.status_code == 200 and 'id="drill"' in report.text
    # The viewer's bar sits inside the report's body, linking back to the list.
    assert report.text.index("<body>") < report.text.index('class="ra-nav"')
    question = client.get("/runs/a/questions/q0001")
    assert question.status_code == 200 and "answer q0001" in question.text
    compare = client.get("/compare", params={"a": "a", "b": "b"})
    assert compare.status_code == 200 and "faithfulness" in compare.text
    trend = client.get("/trend", params={"metric": "faithfulness"})
    assert trend.status_code == 200
    assert (
        "<svg" in trend.text and 'href="/runs/a"' in trend.text and 'href="/runs/b"' in trend.text
    )
    assert client.get("/static/runs.js").status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "/runs/%2e%2e",
        "/runs/..%2F..%2Fetc",
        "/runs/.hidden",
        "/runs/a%2F..%2F..",
        "/runs/outside",
        "/runs/nosuchrun",
        "/runs/a/questions/nosuch",
        "/compare?a=..&b=a",
        "/compare?a=a&b=%2Fetc",
        "/compare?a=a&b=outside",
        "/runs/%2Fetc%2Fpasswd",
    ],
)
def test_a_path_that_leaves_the_root_is_404(client: TestClient, root: Path, path: str) -> None:
    (root / ".hidden").mkdir()
    secret = root.parent / "secret"
    _run(root.parent, "secret", [0.1, 0.2])
    os.symlink(secret, root / "outside")
    response = client.get(path)
    assert response.status_code == 404
    assert "reference of" not in response.text


def test_every_folder_state_is_listed_and_none_crashes_a_page(client: TestClient, root: Path):
    (root / "foreign").mkdir()
    (root / "foreign" / "notes.txt").write_text("not a run")
    # Killed half-way: manifest still "running", no live lock, one table never written.
    killed = write_run(root, "killed", {"rouge_l": [0.5, 0.4]})
    manifest = json.loads((killed / "manifest.json").read_text())
    (killed / "manifest.json").write_text(json.dumps({**manifest, "status": "running"}))
    live = write_run(root, "live", {"rouge_l": [0.5, 0.4]})
    (live / "manifest.json").write_text(json.dumps({**manifest, "status": "running"}))
    damaged = write_run(root, "damaged", {"rouge_l": [0.5, 0.4]})
    (damaged / "scores.parquet").write_bytes(b"PAR1 cut short")
    garbled = write_run(root, "garbled", {"rouge_l": [0.5]})
    (garbled / "manifest.json").write_text("{not json")
    alien = write_run(root, "alien", {"rouge_l": [0.5]})
    (alien / "manifest.json").write_text(json.dumps({"config": "a string", "models": []}))
    (root / "calib").mkdir()
    (root / "calib" / CALIBRATION_META).write_text("{}")
    with hold_run(live):
        page = client.get("/")
        live_page = client.get("/runs/live")
    assert page.status_code == 200
    rows = {
        run_id: page.text.split(f'data-run="{run_id}"', 1)[1].split("</tr>", 1)[0]
        for run_id in ("a", "foreign", "killed", "live", "damaged", "garbled", "alien", "calib")
    }
    assert "not a run folder" in rows["foreign"]
    assert "interrupted" in rows["killed"] and "no live lock" in rows["killed"]
    assert "running" in rows["live"] and "live process" in rows["live"]
    assert "damaged" in rows["damaged"] and "scores.parquet" in rows["damaged"]
    assert "damaged" in rows["garbled"]
    assert "unreadable" in rows["alien"] and "AttributeError" in rows["alien"]
    assert "calibration" in rows["calib"]
    assert "completed" in rows["a"]
    # Only complete-enough runs can be picked for a comparison.
    assert 'name="a"' in rows["a"] and 'name="a"' not in rows["damaged"]
    assert live_page.status_code == 200
    for run_id in ("foreign", "damaged", "garbled", "alien"):
        response = client.get(f"/runs/{run_id}")
        assert response.status_code == 409, run_id
        assert "Traceback" not in response.text
    assert client.get("/runs/calib").status_code == 422  # marker without a calibration table
    assert client.get("/compare", params={"a": "a", "b": "damaged"}).status_code == 409
    assert client.get("/compare", params={"a": "a", "b": "a"}).status_code == 400
    assert client.get("/trend").status_code == 200


def test_a_run_folder_text_stays_text(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    _run(root, "x", [0.5, 0.7], prefixes=[HOSTILE, HOSTILE])
    _run(root, "y", [0.6, 0.8], prefixes=[HOSTILE, HOSTILE])
    path = root / "x" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["models"]["judge"] = HOSTILE
    manifest["config"]["questions"] = HOSTILE
    path.write_text(json.dumps(manifest))
    client = TestClient(create_app(root), base_url=LOOPBACK)
    pages = {
        "list": client.get("/").text,
        "question": client.get("/runs/x/questions/q0000").text,
        "report": client.get("/runs/x").text,
        "compare": client.get("/compare", params={"a": "x", "b": "y"}).text,
        "trend": client.get("/trend", params={"metric": "faithfulness"}).text,
    }
    for name, text in pages.items():
        assert HOSTILE not in text, name
    assert pages["list"].count("&lt;script&gt;alert(1)&lt;/script&gt;") == 2  # judge, set name
    assert "&lt;script&gt;alert(1)&lt;/script&gt;question q0000?" in pages["question"]


def test_a_changed_folder_is_read_again(client: TestClient, root: Path) -> None:
    before = client.get("/runs/a").text
    assert client.get("/runs/a").text == before  # kept while unchanged
    _run(root, "a", [0.125] * 6)
    after = client.get("/runs/a").text
    assert after != before and "0.125" in after
    assert "0.125" in client.get("/").text


def test_a_token_guards_every_request(root: Path) -> None:
    app = create_app(root, token="s3cret-token")
    # Any host name: off loopback the token, not the name, is the guard.
    client = TestClient(app, base_url="http://192.0.2.7:8765")
    for path in ("/", "/runs/a", "/static/runs.js", "/trend", "/compare?a=a&b=b"):
        refused = client.get(path)
        assert refused.status_code == 401 and "token" in refused.text
    assert client.get("/", params={"token": "wrong"}).status_code == 401
    first = client.get("/runs/a", params={"token": "s3cret-token"}, follow_redirects=False)
    assert first.status_code == 303
    assert TOKEN_COOKIE in first.headers["set-cookie"]
    assert "httponly" in first.headers["set-cookie"].lower()
    assert client.get(first.headers["location"]).status_code == 200
    # The cookie carries the token from then on (links on the pages have none).
    assert client.get("/").status_code == 200
    client.cookies.clear()
    assert client.get("/").status_code == 401


def test_loopback_answers_loopback_names_only(root: Path) -> None:
    app = create_app(root)
    assert TestClient(app, base_url="http://localhost:8765").get("/").status_code == 200
    assert TestClient(app, base_url="http://[::1]:8765").get("/").status_code == 200
    # A DNS name rebound to 127.0.0.1 by a page elsewhere is refused.
    assert TestClient(app, base_url="http://evil.example:8765").get("/").status_code == 400


def test_a_post_from_another_origin_is_refused(client: TestClient) -> None:
    refused = client.post("/labels", headers={"origin": "http://evil.example"})
    assert refused.status_code == 403
    assert client.post("/labels", headers={"origin": LOOPBACK}).status_code != 403


def test_loopback_hosts() -> None:
    assert all(map(is_loopback, ["127.0.0.1", "127.1.2.3", "::1", "localhost"]))
    assert not any(map(is_loopback, ["0.0.0.0", "192.168.1.4", "::", "example.com"]))


def test_the_labelling_pages_are_part_of_the_app(client: TestClient, root: Path) -> None:
    from ragaudit import labels

    page = client.get("/runs/a").text
    assert "ragaudit label a --sample 100" in page
    assert 'action="/runs/a/label/draw?n=100"' in page
    assert client.get("/runs/a/label").status_code == 200
    # The link shows once a sample exists (what it holds is the labelling page's business).
    pq.write_table(pa.table({"item": ["x"]}), root / "a" / labels.SAMPLE_FILE)
    assert 'href="/runs/a/label"' in client.get("/runs/a").text
    assert client.get("/runs/..%2Fa/label").status_code == 404


def test_the_token_leaves_the_address_at_once(root: Path) -> None:
    # An address holding the token stays in the history and is sent on as a Referer: the
    # first request moves it into the cookie and sends the browser to the address without it.
    client = TestClient(create_app(root, token="s3cret-token"), base_url="http://192.0.2.7:8765")
    first = client.get(
        "/compare", params={"a": "a", "token": "s3cret-token", "b": "b"}, follow_redirects=False
    )
    assert first.status_code == 303
    assert first.headers["location"] == "/compare?a=a&b=b"
    assert "s3cret-token" not in first.headers["location"]
    assert first.headers["referrer-policy"] == "no-referrer"
    landed = client.get(first.headers["location"])
    assert landed.status_code == 200
    assert landed.headers["referrer-policy"] == "no-referrer"
    assert "s3cret-token" not in landed.text
