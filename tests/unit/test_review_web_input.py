"""What the review web lets in: the class-name rule, run ids in paths, the bearer header, the
finalize race, and the page's headers and static files. The web runs in-process on fakes of the
reviewer and its book; the real servers are exercised in tests/e2e/test_review_web_security.py.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr
from review_fixtures import VIEW_KEY, landmarks
from skyqa.blob import LocalBlobStore
from skyqa.contracts import InstanceReview, InstancesFile, ReviewState
from skyqa.servers import ServedApp
from skyqa.settings import Settings

from services.landmark import review
from services.landmark.web import mount_review_web

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "unit-t0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def state_of(doc: InstancesFile, run_id: str = "r1") -> ReviewState:
    return ReviewState(
        run_id=run_id,
        scene_id=doc.scene_id,
        mode="human",
        source_instances_json="k",
        instances={i.instance_id: InstanceReview(class_name=i.class_name) for i in doc.instances},
    )


# -- the class-name rule ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("office_tower", "office_tower"),
        ("  Bus stop (north)  ", "Bus stop (north)"),
        ("class 3.1/b-2", "class 3.1/b-2"),
        ("教堂", "教堂"),
        ("x" * 64, "x" * 64),
    ],
)
def test_class_name_accepts_plain_text_and_syncs_the_class(given: str, stored: str) -> None:
    doc = landmarks()
    state = state_of(doc)
    assert review.set_class_name(state, doc, "4_3", given) == ["4_3", "4_7"]
    assert state.instances["4_3"].class_name == state.instances["4_7"].class_name == stored
    assert state.instances["5_1"].class_name == "tree"


@pytest.mark.parametrize(
    "given",
    [
        "",
        "   ",
        "x" * 65,
        '"><img src=x onerror=alert(document.domain)>',
        '<img src=x onerror="window.__xss=1">',
        "<b>bold</b>",
        "it's",
        'a "quoted" name',
        "a & b",
        "a;b",
        "a\nb",
        "a\tb",
        "javascript:alert(1)",
        "left\u202eright",  # a bidi override reorders what the reviewer reads
        "zero\u200bwidth",
    ],
)
def test_class_name_refuses_anything_but_plain_text(given: str) -> None:
    doc = landmarks()
    state = state_of(doc)
    before = state.model_copy(deep=True)
    with pytest.raises(review.ReviewError):
        review.set_class_name(state, doc, "4_3", given)
    assert state == before


# -- the web on fakes ---------------------------------------------------------------------


class FakeBook:
    def __init__(self, states: dict[str, ReviewState]) -> None:
        self.states = states
        self.asked: list[str] = []

    async def get(self, run_id: str) -> ReviewState | None:
        self.asked.append(run_id)
        return self.states.get(run_id)

    async def runs(self) -> list[str]:
        return list(self.states)

    async def change(self, run_id: str, fn: Any) -> ReviewState:
        state = self.states[run_id].model_copy(deep=True)
        fn(state)
        self.states[run_id] = state
        return state


class FakeReviewer:
    """The reviewer's reads and book; finalizing is tested on real servers
    (tests/integration/test_review_recovery.py)."""

    def __init__(self, doc: InstancesFile) -> None:
        self.doc = doc
        self.book = FakeBook({"r1": state_of(doc)})

    async def instances(self, state: ReviewState) -> InstancesFile:
        return self.doc


def web(tmp_path: Path, token: str = TOKEN) -> tuple[TestClient, FakeReviewer]:
    store = LocalBlobStore(tmp_path / "store")
    store.put(VIEW_KEY, b"\xff\xd8\xff jpeg bytes", "image/jpeg")
    svc = SimpleNamespace(app=FastAPI(), settings=Settings(review_token=SecretStr(token)), store=store)
    reviewer = FakeReviewer(landmarks())
    mount_review_web(svc, reviewer)  # type: ignore[arg-type]
    return TestClient(svc.app), reviewer


@pytest.mark.parametrize("bad", ["a.%2A", "a%20b", "a.b", "a%3Eb", "-a", "_a", "x" * 97])
def test_run_ids_that_are_not_ids_get_400_before_the_book_is_asked(tmp_path: Path, bad: str) -> None:
    client, reviewer = web(tmp_path)
    for method, path, body in [
        ("GET", f"/review/api/runs/{bad}", None),
        ("POST", f"/review/api/runs/{bad}/instances/4_3/decide", {"action": "drop"}),
        ("POST", f"/review/api/runs/{bad}/instances/4_3/class_name", {"class_name": "house"}),
        ("POST", f"/review/api/runs/{bad}/instances/4_3/auto_label", None),
        ("POST", f"/review/api/runs/{bad}/finalize", {}),
    ]:
        r = client.request(method, path, json=body, headers=AUTH)
        assert r.status_code == 400, (method, path, r.text)
        assert "run id" in r.json()["detail"] and "\n" not in r.json()["detail"]
    assert reviewer.book.asked == []
    # without the token nothing about run ids is revealed
    assert client.get(f"/review/api/runs/{bad}").status_code == 401


def test_bearer_scheme_is_required_and_case_insensitive(tmp_path: Path) -> None:
    client, _ = web(tmp_path)
    assert client.get("/review/api/runs", headers={"Authorization": TOKEN}).status_code == 401
    assert client.get("/review/api/runs", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/review/api/runs").status_code == 401
    assert client.get("/review/api/runs", headers={"authorization": f"bearer {TOKEN}"}).status_code == 200
    assert client.get("/review/api/runs", headers={"Authorization": f"BEARER {TOKEN}"}).status_code == 200
    r = client.get("/review/api/runs/r1", headers=AUTH)
    assert r.status_code == 200 and [i["instance_id"] for i in r.json()["instances"]] == ["4_3", "4_7", "5_1"]


def test_disabled_review_web_answers_503_even_to_an_empty_media_token(tmp_path: Path) -> None:
    client, _ = web(tmp_path, token="")
    assert client.get("/review/api/runs", headers=AUTH).status_code == 503
    assert client.get("/review/api/media", params={"key": VIEW_KEY}).status_code == 503


def test_media_takes_the_bearer_header_never_a_query_token(tmp_path: Path) -> None:
    client, _ = web(tmp_path)
    by_header = client.get("/review/api/media", params={"key": VIEW_KEY}, headers=AUTH)
    assert by_header.status_code == 200 and by_header.content.startswith(b"\xff\xd8")
    assert by_header.headers["x-content-type-options"] == "nosniff"
    # a token in a URL ends up in logs and histories: the query form is not accepted
    assert client.get("/review/api/media", params={"key": VIEW_KEY, "token": TOKEN}).status_code == 401
    assert client.get("/review/api/media", params={"key": VIEW_KEY}).status_code == 401
    no_scheme = client.get("/review/api/media", params={"key": VIEW_KEY}, headers={"Authorization": TOKEN})
    assert no_scheme.status_code == 401


def test_class_name_markup_is_refused_by_the_api(tmp_path: Path) -> None:
    client, reviewer = web(tmp_path)
    path = "/review/api/runs/r1/instances/4_3/class_name"
    r = client.post(path, json={"class_name": '"><img src=x onerror=alert(document.domain)>'}, headers=AUTH)
    assert r.status_code == 400 and "class name" in r.json()["detail"]
    assert reviewer.book.states["r1"].instances["4_3"].class_name == "house"
    r = client.post(path, json={"class_name": " low house "}, headers=AUTH)
    assert r.status_code == 200 and r.json()["class_name"] == "low house"
    assert reviewer.book.states["r1"].instances["4_7"].class_name == "low house"


def test_a_finalized_review_takes_no_auto_label_request(tmp_path: Path) -> None:
    # a finalized review is part of a sealed release: a late label would change its files
    client, reviewer = web(tmp_path)
    reviewer.book.states["r1"].finalized = True
    before = reviewer.book.states["r1"].model_copy(deep=True)
    r = client.post("/review/api/runs/r1/instances/4_3/auto_label", headers=AUTH)
    assert r.status_code == 409 and "finalized" in r.json()["detail"]
    assert reviewer.book.states["r1"] == before


# -- the pages ----------------------------------------------------------------------------


def csp_directives(header: str) -> dict[str, str]:
    return {d.split(" ", 1)[0]: d.partition(" ")[2] for d in (p.strip() for p in header.split(";")) if d}


def test_review_page_and_static_files_carry_a_strict_policy(tmp_path: Path) -> None:
    client, _ = web(tmp_path)
    page = client.get("/review")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = csp_directives(page.headers["content-security-policy"])
    assert csp["default-src"] == "'none'" and csp["script-src"] == "'self'" and csp["style-src"] == "'self'"
    assert csp["frame-ancestors"] == "'none'" and csp["base-uri"] == "'none'"
    assert "unsafe" not in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "no-referrer"
    for name, kind in [("review.js", "text/javascript"), ("review.css", "text/css")]:
        r = client.get(f"/review/static/{name}")
        assert r.status_code == 200 and r.headers["content-type"].startswith(kind)
        assert r.headers["x-content-type-options"] == "nosniff"
    assert client.get("/review/static/web.py").status_code == 404
    assert client.get("/review/static/..%2Fweb.py").status_code == 404


@pytest.mark.parametrize(
    ("html", "js"),
    [
        ("services/landmark/review.html", "services/landmark/review.js"),
        ("services/gateway/dashboard.html", "services/gateway/dashboard.js"),
    ],
)
def test_pages_hold_no_inline_code_and_scripts_build_no_html(html: str, js: str) -> None:
    page = (ROOT / html).read_text()
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", page) == []
    assert "<style" not in page and not re.search(r"\sstyle=", page)
    assert not re.search(r"\son[a-z]+=", page)
    code = (ROOT / js).read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "localStorage"):
        assert sink not in code, f"{js} uses {sink}"


def test_static_files_are_installed_with_the_package() -> None:
    """The Docker image installs the project without -e: a page file that setuptools' package
    data leaves out makes the service fail at import."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["*"]
    for folder in ("services/landmark", "services/gateway"):
        for f in (ROOT / folder).iterdir():
            if f.is_file() and f.suffix in (".html", ".js", ".css"):
                assert any(fnmatch.fnmatch(f.name, p) for p in patterns), (
                    f"{folder}/{f.name} not in package-data"
                )


# -- reviewer prose over real HTTP (issue 41 item 6) ---------------------------------------

ISSUE_PAYLOAD = "facade of a tall tower <img src=x onerror=alert(document.domain)>"
NOT_PLAIN = [
    ISSUE_PAYLOAD,
    "</textarea><script>window.__xss=3</script>",
    "fish & chips",
    "run `rm -rf`",
    "two\nlines",
    "left\u202eright",
    "zero\u200bwidth",
    "nul\x00byte",
]
LABEL = {"category": "building", "subcategory": "office tower", "description": "a grey tower"}


def test_reviewer_prose_is_held_to_the_plain_text_rule_over_http(tmp_path: Path) -> None:
    """Description, subcategory and notes (labels and keep/drop) refuse markup, control and
    format characters and overlong text with a 400 that says why, and change nothing; plain
    prose in any script with ordinary punctuation is stored as given."""
    client, reviewer = web(tmp_path)
    base = "/review/api/runs/r1/instances/4_3"
    before = reviewer.book.states["r1"].model_copy(deep=True)
    attempts = [
        *((f"{base}/labels", {**LABEL, field: bad}, field) for field in ("description", "subcategory", "note") for bad in NOT_PLAIN),
        *((f"{base}/decide", {"action": "drop", "note": bad}, "note") for bad in NOT_PLAIN),
        (f"{base}/labels", {**LABEL, "description": "tall " * 61}, "description"),
        (f"{base}/labels", {**LABEL, "subcategory": "x" * 65}, "subcategory"),
        (f"{base}/labels", {**LABEL, "note": "n" * 501}, "note"),
        (f"{base}/decide", {"action": "drop", "note": "n" * 501}, "note"),
    ]  # fmt: skip
    with ServedApp(client.app) as served, httpx.Client(base_url=served.url, headers=AUTH) as http:
        for path, body, field in attempts:
            r = http.post(path, json=body)
            assert r.status_code == 400, (body, r.text)
            assert r.json()["detail"].startswith(field), (body, r.text)
        assert reviewer.book.states["r1"] == before
        prose = 'the "Old Mill" (1890), a brick tower: tall; red/brown - isn\u2019t it? 教堂 100%'
        r = http.post(f"{base}/labels", json={**LABEL, "description": prose, "note": " checked twice. "})
        assert r.status_code == 200, r.text
        r = http.post(f"{base}/decide", json={"action": "drop", "note": "blurry, see view 3"})
        assert r.status_code == 200, r.text
    stored = reviewer.book.states["r1"].instances["4_3"]
    assert stored.landmark_description == prose and stored.landmark_note == "checked twice."
    assert stored.note == "blurry, see view 3"
