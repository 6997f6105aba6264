"""The workbench's human answerability audit on a real gateway (real nats-server for sessions,
local store): who may answer, that no response before an answer names the gold, hostile
answers refused with a message, answers stored once per person and row, and the QC report,
dataset card and checksums rewritten so the release still verifies."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from skyqa import audit, integrity, keys
from skyqa.blob import LocalBlobStore
from skyqa.contracts.qa import AuditAnswer
from skyqa.runtime import Service, Settings
from test_workbench_api import SCENE, TOKEN, synthetic_release

from services.gateway import app as gateway_app

pytestmark = pytest.mark.integration

READ = "r3ad-t0ken"
K = 2
# what no answer-free response may hold: the gold, where it is, how it was reached
GOLD_FIELDS = {"gold", "answer_option_id", "answer_label", "answer_bbox_xyxy_norm", "box", "marks", "steps"}


def keys_of(doc: Any) -> set[str]:
    if isinstance(doc, dict):
        return set(doc) | {k for v in doc.values() for k in keys_of(v)}
    if isinstance(doc, list):
        return {k for v in doc for k in keys_of(v)}
    return set()


@pytest.fixture
async def gateway(settings: Settings, tmp_path: Path) -> AsyncIterator[tuple[Service, str, Path]]:
    settings.gateway.token = SecretStr(TOKEN)
    settings.gateway.read_token = SecretStr(READ)
    settings.gateway.audit_per_stratum = K
    svc = gateway_app.create(settings, LocalBlobStore(tmp_path / "store"))
    await svc.start()
    yield svc, f"http://127.0.0.1:{svc.port}", tmp_path / "store"
    await svc.stop()


def sealed_release(svc: Service, run_id: str) -> None:
    """The synthetic release with its media, a dataset card and its seal, as the QA stage leaves it."""
    synthetic_release(svc.store, run_id, n=60)
    root = keys.run_prefix(run_id)
    for i in range(30):
        svc.store.put(f"{root}/env_{i:05d}.jpg", f"env image {i}".encode(), "image/jpeg")
    svc.store.put(f"{root}/ref.jpg", b"reference image", "image/jpeg")
    card = "# card\n\n" + audit.card_section(None) + "\n## Files\n"
    svc.store.put(keys.release_common(run_id, SCENE)["dataset_card"], card.encode(), "text/markdown")
    info = integrity.ReleaseInfo(
        skyqa_version="0",
        git_commit="unknown",
        run_id=run_id,
        scene_id=SCENE,
        seed=0,
        config_hash="h",
        settings={},
        scan_request={},
        counts={},
        family_rows={},
        manifests={},
    )
    integrity.seal(svc.store, run_id, info)


async def sign_in(http: httpx.AsyncClient, token: str, user: str | None) -> httpx.Response:
    body = None if user is None else json.dumps({"user": user})
    return await http.post("/v1/session", headers={"Authorization": f"Bearer {token}"}, content=body)


async def test_an_audit_answered_end_to_end_over_the_api(
    gateway: tuple[Service, str, Path], unique: str
) -> None:
    svc, url, store_root = gateway
    run_id = f"au-{unique}"
    sealed_release(svc, run_id)
    base = f"/v1/workbench/runs/{run_id}/audit"
    async with httpx.AsyncClient(base_url=url, timeout=20) as http:
        # who may answer: a session signed in with a name and the write token
        r = await http.get(base)
        assert r.status_code == 401
        assert (await sign_in(http, READ, "ann")).status_code == 204
        r = await http.get(base)
        assert r.status_code == 403 and "write token" in r.json()["detail"]  # a reader cannot write
        assert (await sign_in(http, TOKEN, None)).status_code == 204
        assert (await http.get(base)).status_code == 403  # nameless: nobody to record
        for bad in ('{"user": "../etc"}', '{"user": 5}', '{"user": "a", "admin": true}', "[", '"x"'):
            r = await http.post("/v1/session", headers={"Authorization": f"Bearer {TOKEN}"}, content=bad)
            assert r.status_code in (400, 422) and "user" in r.json()["detail"], bad
        r = await http.post(
            "/v1/session", headers={"Authorization": f"Bearer {TOKEN}"}, content=b"x" * 5000
        )
        assert r.status_code == 413
        assert (await sign_in(http, TOKEN, "ann")).status_code == 204

        # the sample: K rows of each task (one family here), deterministic, no gold
        q = (await http.get(base)).json()
        assert q["user"] == "ann" and q["answered"] == 0 and q["per_stratum"] == K
        sample = [r["sample_id"] for r in q["rows"]]
        assert len(sample) == 3 * K and q["next"] == sample[0]
        assert (await http.get(base)).json()["rows"] == q["rows"]
        assert not GOLD_FIELDS & keys_of(q)
        items = {}
        for sid in sample:
            r = await http.get(f"{base}/rows/{sid}")
            assert r.status_code == 200, r.text
            item = r.json()
            assert not GOLD_FIELDS & keys_of(item), sid
            assert ".jpg" not in r.text  # no file name either
            detail = (await http.get(f"/v1/workbench/runs/{run_id}/rows/{sid}")).json()
            assert item["user_prompt"] == detail["user_prompt"]  # the prompt a model gets
            assert item["system_prompt"] == detail["system_prompt"]
            assert [o["id"] for o in item["options"]] == [o["id"] for o in detail["options"]]
            assert [m["label"] for m in item["media"]] == [m["label"] for m in detail["media"]]
            for m, shown in zip(item["media"], detail["media"], strict=True):
                got = await http.get(m["url"])
                assert got.status_code == 200 and got.headers["content-type"] == "image/jpeg"
                assert got.content == svc.store.get(f"{keys.run_prefix(run_id)}/{shown['path']}")
            items[sid] = detail
        outside = next(f"syn_{i:05d}" for i in range(60) if f"syn_{i:05d}" not in sample and i % 10 != 9)
        assert (await http.get(f"{base}/rows/{outside}")).status_code == 404
        assert (await http.get(f"{base}/rows/{sample[0]}/media/9")).status_code == 404

        # hostile answers: 4xx with a message, nothing stored
        post = f"{base}/answers"
        hostile: list[tuple[bytes, int, str]] = [
            (b"not json", 422, "JSON"),
            (b"[1]", 422, "exactly"),
            (json.dumps({"sample_id": sample[0]}).encode(), 422, "exactly"),
            (json.dumps({"sample_id": sample[0], "reply": "C", "user": "eve"}).encode(), 422, "exactly"),
            (json.dumps({"sample_id": outside, "reply": "C"}).encode(), 404, "not in the audit sample"),
            (json.dumps({"sample_id": "../../x", "reply": "C"}).encode(), 404, "not in the audit sample"),
            (json.dumps({"sample_id": sample[0], "reply": "Z"}).encode(), 422, "one of the options"),
            (json.dumps({"sample_id": sample[0], "reply": ["C"]}).encode(), 422, "one of the options"),
            (json.dumps({"sample_id": sample[0], "reply": "C" * 9000}).encode(), 413, "exceeds"),
            (b"[" * 3000 + b"]" * 3000, 413, "exceeds"),
        ]
        for body, status, says in hostile:
            r = await http.post(post, content=body)
            assert r.status_code == status and says in r.json()["detail"], (body[:60], r.text)
        assert not svc.store.list(f"{keys.run_prefix(run_id)}/{audit.ANSWERS}/")

        # ann answers the gold on the first row of each task and another option on the rest
        wrong = {}
        for n, sid in enumerate(sample):
            gold = items[sid]["gold"][0]
            reply = gold if n % K == 0 else next(o["id"] for o in items[sid]["options"] if o["id"] != gold)
            if reply != gold:
                wrong[sid] = (reply, gold)
            r = await http.post(post, json={"sample_id": sid, "reply": reply})
            assert r.status_code == 201 and r.json()["created"] is True, r.text
            assert not GOLD_FIELDS & keys_of(r.json())
        r = await http.post(post, json={"sample_id": sample[0], "reply": items[sample[0]]["gold"][0]})
        assert r.status_code == 200 and r.json()["created"] is False  # the same answer again
        other = next(o["id"] for o in items[sample[0]]["options"] if o["id"] != items[sample[0]]["gold"][0])
        r = await http.post(post, json={"sample_id": sample[0], "reply": other})
        assert r.status_code == 409 and "not changed" in r.json()["detail"]
        q = (await http.get(base)).json()
        assert q["answered"] == len(sample) and q["next"] is None

    # stored with the release's QC: who, when, the reply
    stored = audit.load_answers(svc.store, run_id)
    assert {a.sample_id for a in stored} == set(sample) and {a.user for a in stored} == {"ann"}
    assert all(isinstance(a, AuditAnswer) and a.answered_at > 1.7e9 for a in stored)

    # qc_report.json, the card, the workbench's QC view; the release still verifies
    folder = store_root / "runs" / run_id
    report = json.loads((folder / "qc_report.json").read_text())["audit"]
    tasks = {items[s]["entry"]["task"] for s in sample}
    assert set(report["tasks"]) == tasks
    for task, t in report["tasks"].items():
        assert (t["sampled"], t["answered"], t["agreed"]) == (K, K, 1), task
        assert t["agreement"] == 0.5 and t["ci"] == list(audit.wilson(1, K))
    assert {d["sample_id"]: (d["reply"][0], d["gold"][0]) for d in report["disagreements"]} == wrong
    assert report["per_stratum"] == K and report["seed"] == run_id and report["users"] == ["ann"]
    card = (folder / "README.md").read_text()
    assert "Nobody has answered" not in card and card.endswith("\n## Files\n")
    for task in tasks:
        assert f"| {task} | dualcog_image | {K} | {K} | 1 | 0.50 [" in card
    for sid, (reply, gold) in wrong.items():
        assert f"- `{sid}` (" in card and f"ann answered {reply}, gold {gold}" in card
    checked, problems = integrity.verify(folder)
    assert problems == [] and checked > len(sample)
    async with httpx.AsyncClient(base_url=url, timeout=20) as http:
        assert (await sign_in(http, READ, None)).status_code == 204
        shown = (await http.get(f"/v1/workbench/runs/{run_id}/funnel")).json()["audit"]
        assert shown == report

        # a second person's answers count beside the first's
        assert (await sign_in(http, TOKEN, "bo")).status_code == 204
        gold = items[sample[1]]["gold"][0]
        assert (await http.post(f"{base}/answers", json={"sample_id": sample[1], "reply": gold})).status_code == 201
        assert (await http.get(base)).json()["answered"] == 1
    again = json.loads((folder / "qc_report.json").read_text())["audit"]
    task = items[sample[1]]["entry"]["task"]
    assert (again["tasks"][task]["answered"], again["tasks"][task]["agreed"]) == (K + 1, 2)
    assert again["users"] == ["ann", "bo"] and integrity.verify(folder)[1] == []
