"""The workbench in a real headless Chromium on a real demo run: each page is opened, what it
shows is checked against the release's own files (a row's gold and boxes against its manifest,
a mission's timeline against its task_data.json, the funnel against the QC report, the
explorer against eval/items.jsonl), an evaluation is started from the page against a local
model server, and every page is saved under test-artifacts/."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from demo_runs import DemoRun
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from playwright.async_api import Page, Response, async_playwright, expect
from pydantic import SecretStr
from skyqa import audit as skyqa_audit, integrity, keys
from skyqa.blob import LocalBlobStore
from skyqa.contracts.base import load_json
from skyqa.servers import ServedApp
from skyqa.settings import ModelEndpoint, QASettings, Settings
from test_review_web import ARTIFACTS, CHROMIUM_FLAGS, WATCH_CSP

from services.embedded import Embedded
from services.qa_generator.pipeline import QAPlan
from services.qa_generator.release import finish

TOKEN = "wb-t0ken"
READ = "wb-r3ad"  # reads need a token here, so the pages sign in first
MODEL = "constant-a"
AUDIT_K = 1  # rows per (family, task) the audit asks here: one of every task


def always_a() -> FastAPI:
    """An OpenAI-compatible model that answers option A to everything: a real endpoint whose
    replies the test can predict."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat() -> JSONResponse:
        content = json.dumps({"answer_option_id": "A", "bbox_xyxy_norm": [0.1, 0.1, 0.5, 0.5]})
        return JSONResponse(
            {
                "choices": [{"message": {"content": content}, "finish_reason": "stop"}],
                "usage": {"total_tokens": 9},
            }
        )

    return app


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
async def served(demo_runs: list[DemoRun], tmp_path: Path) -> AsyncIterator[tuple[str, Path, str]]:
    """The gateway and evaluator over a copy of the first demo run (an evaluation rewrites eval/)."""
    data = tmp_path / "data"
    shutil.copytree(demo_runs[0].data, data, ignore=shutil.ignore_patterns("*.lock"))
    (release,) = (data / "store" / "runs").iterdir()
    with ServedApp(always_a()) as model:
        settings = Settings(
            gateway={"token": SecretStr(TOKEN), "read_token": SecretStr(READ), "audit_per_stratum": AUDIT_K}
        )
        settings.evaluation.allowed_endpoints = [ModelEndpoint(kind="openai", url=f"{model.url}/v1")]
        async with Embedded(data, settings, services=["gateway", "evaluator"]) as env:
            gateway = env.service("gateway")
            assert gateway is not None
            yield f"http://127.0.0.1:{gateway.port}", release, f"{model.url}/v1"


async def _box_matches(page: Page, mark: str, media: str, box: list[float]) -> None:
    """The drawn box sits where its normalized coordinates say on the displayed image."""
    await page.locator(media).evaluate(
        "e => e.decode ? e.decode() : new Promise(ok => e.readyState >= 1 ? ok() : e.onloadedmetadata = ok)"
    )
    m = await page.locator(mark).bounding_box()
    i = await page.locator(media).bounding_box()
    assert m is not None and i is not None
    x1, y1, x2, y2 = box
    assert abs(m["x"] - (i["x"] + x1 * i["width"])) < 3 and abs(m["y"] - (i["y"] + y1 * i["height"])) < 3
    assert abs(m["width"] - (x2 - x1) * i["width"]) < 3 and abs(m["height"] - (y2 - y1) * i["height"]) < 3


async def test_every_workbench_page_shows_what_the_release_holds(served: tuple[str, Path, str]) -> None:
    base, release, model_url = served
    run_id = release.name
    ledger = lines(release / "qc_rows.jsonl")
    report = json.loads((release / "qc_report.json").read_text())
    image_rows = lines(next((release / "image_tasks" / "manifests").glob("*.image_qa.jsonl")))
    ARTIFACTS.mkdir(exist_ok=True)

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_FLAGS)
        page = await browser.new_page(viewport={"width": 1500, "height": 1000})
        await page.add_init_script(WATCH_CSP)
        ranged: list[int] = []

        def seen(r: Response) -> None:
            if r.url.endswith(".mp4"):
                ranged.append(r.status)

        page.on("response", seen)

        # -- row browser: a row's gold and both boxes, as its manifest has them ---------------
        row = next(r for r in image_rows if r["task_type"] == "env_where")
        url = f"{base}/workbench#run={run_id}&view=rows&family=dualcog_image&row={row['sample_id']}"
        response = await page.goto(url)
        assert (
            response is not None
            and "media-src 'self'" in (await response.all_headers())["content-security-policy"]
        )
        # sign in once: the session cookie then carries the read token for data, images and videos
        await expect(page.locator("#signin")).to_be_visible()
        await page.locator("#signin input[name=token]").fill("wrong")
        await page.locator("#signin button").click()
        await expect(page.locator("#signin")).to_be_visible()
        await page.locator("#signin input[name=token]").fill(READ)
        await page.locator("#signin button").click()
        await expect(page.locator("#signin")).to_be_hidden()
        await expect(page.locator("#row-title")).to_have_text(row["sample_id"])
        n_image = sum(1 for r in ledger if r["family"] == "dualcog_image")
        await expect(page.locator("#rows-range")).to_have_text(f"rows 1–{min(50, n_image)} of {n_image}")
        await expect(page.locator("#row-options li.gold")).to_have_text(
            f"{row['answer_option_id']}. {row['answer_label']}"
        )
        target = f'#row-media figure[data-path="{row["target_image"]}"]'
        answer = f'{target} .mark[data-role="answer"]'
        assert [
            float(v) for v in (await page.locator(answer).get_attribute("data-box") or "").split(",")
        ] == (row["answer_bbox_xyxy_norm"])
        await _box_matches(page, answer, f"{target} img", row["answer_bbox_xyxy_norm"])
        ref = f'#row-media figure[data-path="{row["reference_image_with_bbox"]}"]'
        await _box_matches(
            page, f'{ref} .mark[data-role="reference"]', f"{ref} img", row["reference_bbox_xyxy_norm"]
        )
        await expect(page.locator("#row-steps li")).to_have_count(len(row["reasoning_steps"]))
        await expect(page.locator(f"{target} details summary")).to_contain_text("render request")
        await page.screenshot(path=str(ARTIFACTS / "workbench_rows.png"), full_page=True)
        # full resolution on click
        await page.locator(f"{target} .frame").click()
        width = await page.locator(f"{target} img").evaluate(
            "i => [i.naturalWidth, i.getBoundingClientRect().width]"
        )
        assert width[0] > 0 and abs(width[0] - width[1]) < 1
        # server-side filtering: the dropped rows, and only those
        dropped = [r for r in ledger if r["status"] == "dropped"]
        await page.goto(f"{base}/workbench#run={run_id}&view=rows&status=dropped")
        await expect(page.locator("#rows-range")).to_have_text(f"rows 1–{len(dropped)} of {len(dropped)}")
        assert set(await page.locator("#rows tr").evaluate_all("rs => rs.map(r => r.dataset.status)")) == {
            "dropped"
        }

        # -- mission player: the timeline is task_data.json's intervals -----------------------
        index = json.loads((release / "video_tasks" / "missions_index.json").read_text())

        def task_of(m: dict[str, Any]) -> dict[str, Any]:
            doc: dict[str, Any] = json.loads((release / m["task_data"].split(f"{run_id}/", 1)[1]).read_text())
            return doc

        flight = next(
            (m, t)
            for m in index["missions"]
            if (t := task_of(m))["target_presence"]["frame_bboxes_xyxy_norm"]
        )
        mission, task = flight
        await page.goto(f"{base}/workbench#run={run_id}&view=missions&mission={mission['traj_id']}")
        await expect(page.locator("#mission-title")).to_have_text(mission["traj_id"])
        behaviors = [
            [s["start_sec"], s["end_sec"]]
            for b in task["task_tracks"]["self_state_awareness"]["behavior_intervals_sec"]
            for s in b["intervals_sec"]
        ]
        spans = "els => els.map(e => [Number(e.dataset.start), Number(e.dataset.end)])"
        await expect(page.locator(".span.behavior")).to_have_count(len(behaviors))
        assert await page.locator(".span.behavior").evaluate_all(spans) == behaviors
        visible = [
            [s["start_sec"], s["end_sec"]]
            for _, t in sorted(task["target_presence_targets"].items())
            for s in t["intervals_sec"]
        ]
        assert await page.locator(".span.visibility").evaluate_all(spans) == visible
        video = page.locator("#mission-video")
        await expect(video).to_have_js_property("readyState", 4, timeout=20000)
        duration = await video.evaluate("v => v.duration")
        assert abs(duration - task["video"]["duration_sec"]) < 0.25
        # seek to a frame with a target box: the overlay shows it where the box says
        first = task["target_presence"]["frame_bboxes_xyxy_norm"][
            len(task["target_presence"]["frame_bboxes_xyxy_norm"]) // 2
        ]
        await video.evaluate(f"v => {{ v.currentTime = {(first['frame'] + 0.5) / task['video']['fps']}; }}")
        await expect(page.locator("#mission-box")).to_have_attribute("data-frame", str(first["frame"]))
        await _box_matches(page, "#mission-box", "#mission-video", first["bbox_xyxy_norm"])
        await page.locator("#show-boxes").uncheck()
        await expect(page.locator("#mission-box")).to_be_hidden()
        await page.locator("#show-boxes").check()
        points = await page.locator("#mission-path polyline").get_attribute("points")
        assert points is not None and len(points.split()) >= task["video"]["frame_count"] // 2
        assert 206 in ranged  # the player seeks through byte ranges
        await page.screenshot(path=str(ARTIFACTS / "workbench_missions.png"), full_page=True)

        # -- evaluation explorer: against eval/items.jsonl and the leaderboard ----------------
        board = json.loads((release / "eval" / "leaderboard.json").read_text())
        items = lines(release / "eval" / "items.jsonl")
        await page.goto(f"{base}/workbench#run={run_id}&view=eval")
        await expect(page.locator("#leaderboard tbody tr")).to_have_count(len(board["models"]))
        someone = board["models"][0]["model"]
        await page.locator("#reply-filters select[name=model]").select_option(someone)
        mine = [i for i in items if i["model"] == someone]
        await expect(page.locator("#replies-range")).to_have_text(f"replies 1–20 of {len(mine)}")
        await expect(page.locator("#replies tbody tr").first.locator("details pre")).to_have_text(
            mine[0]["raw_text"]
        )
        form = page.locator("#confusion-form")
        await form.locator("select[name=model]").select_option(someone)
        await form.locator("select[name=task]").select_option("env_where")
        await form.locator("select[name=condition]").select_option("full")
        asked = [
            i for i in items if (i["model"], i["task"], i["condition"]) == (someone, "env_where", "full")
        ]
        cells = page.locator("#confusion tbody td")
        await expect(cells.first).to_be_visible()
        assert sum(int(c) for c in await cells.all_text_contents()) == len(asked)
        hits = Counter(i["pred_label"] for i in asked if i["option_correct"] == 1.0)
        diagonal = await page.locator("#confusion tbody td.hit").all_text_contents()
        assert sum(int(c) for c in diagonal) == sum(hits.values())
        tally = await page.locator("#compare-tally").text_content()
        assert tally is not None and "shared rows" in tally
        await page.screenshot(path=str(ARTIFACTS / "workbench_eval.png"), full_page=True)

        # start an evaluation from the page: the new model joins the leaderboard
        ev = page.locator("#eval-form")
        await ev.locator("input[name=url]").fill(model_url)
        await ev.locator("input[name=model]").fill(MODEL)
        await ev.locator("input[name=token]").fill("wrong")
        await ev.locator("button").click()
        await expect(page.locator("#eval-started")).to_contain_text("refused (401)")
        await ev.locator("input[name=token]").fill(TOKEN)
        await ev.locator("button").click()
        await expect(page.locator("#eval-started")).to_contain_text("evaluation completed", timeout=300000)
        await expect(page.locator(f'#leaderboard tr[data-model="{MODEL}"]')).to_be_visible()
        board = json.loads((release / "eval" / "leaderboard.json").read_text())
        assert MODEL in {m["model"] for m in board["models"]}

        # -- funnel and QC: the QC report's numbers, drops with example rows ------------------
        await page.goto(f"{base}/workbench#run={run_id}&view=funnel")
        f = report["funnel"]
        counts = page.locator("#funnel-landmarks .barline")
        await expect(counts).to_have_count(4)
        assert await counts.evaluate_all("ls => ls.map(l => Number(l.dataset.count))") == [
            f["candidates"], f["collected"], f["reviewed"], f["released_landmarks"]
        ]  # fmt: skip
        reasons = await page.locator("#drops tbody tr").evaluate_all(
            "rs => rs.map(r => [r.dataset.reason, Number(r.cells[1].textContent)])"
        )
        assert dict(reasons) == report["drop_reasons"]
        verdict = "passed" if report["blind_gate"]["passed"] else "leaks found"
        await expect(page.locator("#gate-verdict")).to_contain_text(verdict)
        await page.screenshot(path=str(ARTIFACTS / "workbench_funnel.png"), full_page=True)
        example = page.locator("#drops tbody tr").first.locator("a").first
        sample = await example.text_content()
        await example.click()
        await expect(page.locator("#row-title")).to_have_text(sample or "")
        await expect(page.locator("#row-meta")).to_contain_text("dropped")

        assert await page.evaluate("window.__csp") == []
        await browser.close()
    for name in ("rows", "missions", "eval", "funnel"):
        assert (ARTIFACTS / f"workbench_{name}.png").stat().st_size > 20_000


# what no audit response before an answer may hold: the gold, where it is, how it was reached
GOLD_FIELDS = {"gold", "answer_option_id", "answer_label", "answer_bbox_xyxy_norm", "box", "marks", "steps"}


def _keys(doc: Any) -> set[str]:
    if isinstance(doc, dict):
        return set(doc) | {k for v in doc.values() for k in _keys(v)}
    if isinstance(doc, list):
        return {k for v in doc for k in _keys(v)}
    return set()


def _reply(r: dict[str, Any], right: bool) -> list[str]:
    """The gold of a ledger row, or an answer that is not it."""
    gold = r["gold"]
    if right:
        return list(gold)
    if r["kind"] == "count":
        return [str(int(gold[0]) + 1)]
    other = next(o for o, _ in r["options"] if o not in gold)
    return [other]


async def test_an_audit_answered_in_the_browser_reaches_the_qc_report_card_and_workbench(
    served: tuple[str, Path, str],
) -> None:
    base, release, _ = served
    run_id = release.name
    ledger = {r["sample_id"]: r for r in lines(release / "qc_rows.jsonl")}
    ARTIFACTS.mkdir(exist_ok=True)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_FLAGS)
        page = await browser.new_page(viewport={"width": 1500, "height": 1000})
        await page.add_init_script(WATCH_CSP)
        seen: list[Response] = []
        page.on(
            "response", lambda r: seen.append(r) if "/audit" in r.url and "/media/" not in r.url else None
        )
        await page.goto(f"{base}/workbench#run={run_id}&view=audit")
        await page.locator("#signin input[name=token]").fill(READ)
        await page.locator("#signin button").click()
        # a reader may look but not answer: the audit asks for a name and the write token
        signin = page.locator("#audit-signin")
        await expect(signin).to_be_visible()
        await expect(page.locator("#audit-why")).to_contain_text("write token")
        await signin.locator("input[name=user]").fill("auditor-1")
        await signin.locator("input[name=token]").fill(TOKEN)
        await signin.locator("button").click()
        await expect(page.locator("#audit-row")).to_be_visible()
        await expect(signin).to_be_hidden()
        queue = page.locator("#audit-queue li")
        n = await queue.count()
        strata = {
            (r["family"], r["task"])
            for r in ledger.values()
            if r["status"] == "released" and r["kind"] in ("choice", "multi", "count")
        }
        assert n == len(strata) * AUDIT_K

        # the first row is shown as a model is asked it, its media load
        first = await page.locator("#audit-row").get_attribute("data-sample")
        assert first is not None
        detail = await (await page.request.get(f"{base}/v1/workbench/runs/{run_id}/rows/{first}")).json()
        await expect(page.locator("#audit-user")).to_have_text(detail["user_prompt"])
        await expect(page.locator("#audit-media figure")).to_have_count(len(detail["media"]))
        for img in await page.locator("#audit-media img").all():
            await img.evaluate("i => i.decode()")
            assert await img.evaluate("i => i.naturalWidth") > 0
        await page.screenshot(path=str(ARTIFACTS / "workbench_audit.png"), full_page=True)

        # answer every row: the gold on every other row, something else on the rest
        expected: dict[str, list[bool]] = {}
        wrong: dict[str, tuple[list[str], list[str]]] = {}
        for i in range(n):
            art = page.locator("#audit-row")
            sid = await art.get_attribute("data-sample")
            assert sid is not None and sid in ledger
            r = ledger[sid]
            reply = _reply(r, right=i % 2 == 0)
            expected.setdefault(r["task"], []).append(i % 2 == 0)
            if i % 2:
                wrong[sid] = (reply, r["gold"])
            if r["kind"] == "count":
                await page.locator("#audit-choices input[name=count]").fill(reply[0])
            else:
                for oid in reply:
                    await page.locator(f'#audit-choices label[data-option="{oid}"] input').check()
            await page.locator("#audit-form button").click()
            await expect(page.locator("#audit-progress")).to_have_text(f"auditor-1: {i + 1} of {n} answered")
            if i + 1 < n:
                await expect(art).not_to_have_attribute("data-sample", sid)
        await expect(page.locator("#audit-done")).to_be_visible()
        await expect(page.locator("#audit-queue li.answered")).to_have_count(n)

        # nothing the audit mode read before an answer named a gold
        for resp in seen:
            if resp.request.method == "GET" and resp.ok:
                assert not _keys(await resp.json()) & GOLD_FIELDS, resp.url

        # the workbench shows the agreement per task and every disagreement
        await page.locator("#audit-results").click()
        tasks = page.locator("#audit-tasks tbody tr")
        await expect(tasks).to_have_count(len(expected))
        shown = dict(
            await tasks.evaluate_all("rs => rs.map(r => [r.dataset.task, Number(r.dataset.agreement)])")
        )
        assert shown == {t: round(sum(v) / len(v), 4) for t, v in expected.items()}
        await expect(page.locator("#audit-disagreements tbody tr")).to_have_count(len(wrong))
        rows = await page.locator("#audit-disagreements tbody tr").evaluate_all(
            "rs => rs.map(r => [r.dataset.sample, r.cells[3].textContent, r.cells[4].textContent])"
        )
        assert {s: (reply, gold) for s, reply, gold in rows} == {
            s: (", ".join(reply), ", ".join(gold)) for s, (reply, gold) in wrong.items()
        }
        await page.screenshot(path=str(ARTIFACTS / "workbench_audit_results.png"), full_page=True)
        assert await page.evaluate("window.__csp") == []
        await browser.close()

    # the QC report and the card say the same; the release still verifies
    audit = json.loads((release / "qc_report.json").read_text())["audit"]
    assert {t: v["agreement"] for t, v in audit["tasks"].items()} == {
        t: round(sum(v) / len(v), 4) for t, v in expected.items()
    }
    assert audit["users"] == ["auditor-1"] and audit["answers"] == n and audit["sampled"] == n
    assert {d["sample_id"] for d in audit["disagreements"]} == set(wrong)
    card = (release / "README.md").read_text()
    assert "## Human answerability audit" in card and "Nobody has answered" not in card
    for task, t in audit["tasks"].items():
        assert (
            f"| {task} | {t['family']} | {AUDIT_K} | {t['answered']} | {t['agreed']} | {t['agreement']:.2f} ["
            in card
        )
    assert all(f"- `{s}` (" in card for s in wrong)
    answers = sorted((release / "qc_audit" / "answers" / "auditor-1").glob("*.json"))
    assert len(answers) == n and all(json.loads(a.read_text())["user"] == "auditor-1" for a in answers)
    assert integrity.verify(release)[1] == []

    # `skyqa refresh` rebuilds the release from its plan: the audit is counted again from the
    # stored answers, the same in the report and the card
    store = LocalBlobStore(release.parents[1])
    plan = load_json(QAPlan, store.get(keys.qa_plan(run_id)), "qa plan")
    refreshed, _ = finish(plan, store, QASettings().blind_gate)
    assert refreshed.audit is not None and refreshed.audit.model_dump(mode="json") == audit
    assert json.loads((release / "qc_report.json").read_text())["audit"] == audit
    assert skyqa_audit.card_section(refreshed.audit) in (release / "README.md").read_text()
    assert integrity.verify(release)[1] == []
