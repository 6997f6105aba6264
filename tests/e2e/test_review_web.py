"""The review web in a real headless Chromium (Debian's, driven by Playwright), on a real run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
from playwright.async_api import Page, async_playwright, expect
from pydantic import SecretStr
from skyqa.contracts import ValidInstancesFile, load_json
from skyqa.contracts.runs import StageState
from skyqa.scan_options import build_request
from skyqa.settings import Settings
from skyqa.v1 import scan_pb2

from services.embedded import Embedded, publish_scan, read_run, wait_for_run

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
TOKEN = "review-t0ken"
# records every Content-Security-Policy violation, so a test sees what the page tried and the
# policy refused (an init script runs outside the page's policy)
WATCH_CSP = """
window.__csp = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
"""


async def wait_for_review(nats_url: str, run_id: str) -> None:
    for _ in range(600):
        state = await read_run(nats_url, run_id)
        # the stage's own word that it waits, not its first progress event (which comes before
        # the review is in the book the page lists)
        if state and "waiting for human review" in state.stages.get("review", StageState()).message:
            return
        assert not (state and state.status == "failed"), state.errors if state else ""
        await asyncio.sleep(0.5)
    raise AssertionError("the review never started")


async def start_human_review(env: Embedded) -> scan_pb2.ScanRequest:
    """A tiny scan in human-review mode, returned once its review waits for a reviewer."""
    assert env.nats_url is not None
    req = build_request(
        "tiny_town",
        "preview",
        None,
        "-50,50,-50,50,0,80",
        25.0,
        [45.0],
        0,
        "human",
        4,
        "160x120",
        reasoning="0",
        surveys="0",
    )
    await publish_scan(env.nats_url, req)
    await wait_for_review(env.nats_url, req.run_id)
    return req


async def status_says(page: Page, text: str) -> None:
    await expect(page.locator("#status")).to_contain_text(text, timeout=15000)


async def test_review_web_end_to_end(tmp_path: Path) -> None:
    settings = Settings(review_token=SecretStr(TOKEN))
    async with Embedded(tmp_path, settings) as env:
        assert env.nats_url is not None
        req = await start_human_review(env)
        landmark = next(s for s in env.running if s.name == "landmark")
        base = f"http://127.0.0.1:{landmark.port}"

        async with httpx.AsyncClient(base_url=base) as http:
            assert (await http.get("/review/api/runs")).status_code == 401
            bad = await http.get(
                "/review/api/media",
                params={"key": "runs/../../etc/passwd"},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert bad.status_code == 400

        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_FLAGS)
            page = await browser.new_page(viewport={"width": 1400, "height": 1000})
            await page.add_init_script(WATCH_CSP)
            await page.goto(f"{base}/review")
            await page.fill("#token", "wrong")
            await page.click("#connect")
            await status_says(page, "wrong")
            await expect(page.locator("#status")).to_have_class("error")
            await page.fill("#token", TOKEN)
            await page.click("#connect")
            await expect(page.locator(".card").first).to_be_visible(timeout=15000)
            ids = [await c.get_attribute("data-id") for c in await page.locator(".card").all()]
            assert len(ids) >= 2
            first, second = (f'section[data-id="{i}"]' for i in ids[:2])

            # keep needs a main view first
            await page.click(f'{first} button[data-decide="keep"]')
            await status_says(page, "keep_requires_main_view")
            views = page.locator(f"{first} .view")
            bad_view = await views.nth(1).get_attribute("data-view")
            await page.click(f'{first} .view[data-view="{bad_view}"] button[data-valid]')
            await status_says(page, "view updated")
            await expect(page.locator(f'{first} .view[data-view="{bad_view}"]')).to_have_class("view invalid")
            anchor = await views.nth(0).get_attribute("data-view")
            await page.select_option(f'{first} select[data-dir="{anchor}"]', "back")
            await page.click(f'{first} button[data-anchor="{anchor}"]')
            await status_says(page, "anchored back")
            await page.click(f'{first} button[data-decide="keep"]')
            await status_says(page, "keep")
            await page.select_option(f"{first} select[data-cat]", "building")
            await page.fill(f"{first} input[data-sub]", "apartment block")
            await page.fill(
                f"{first} input[data-desc]", "grey apartment block with a flat roof and regular windows"
            )
            await page.click(f"{first} button[data-save]")
            await status_says(page, "labels saved")
            await page.click(f'{second} button[data-decide="drop"]')
            await status_says(page, "drop")
            ARTIFACTS.mkdir(exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "review_web.png"), full_page=False)
            await page.click("#finalize")
            await status_says(page, "finalized: 1 of")
            assert await page.evaluate("window.__csp") == []
            await browser.close()

        state = await wait_for_run(env.nats_url, req.run_id, "review", 30)
        assert state.stages["review"].status == "completed"
        assert env.store is not None
        valid = load_json(ValidInstancesFile, env.store.get(state.outputs["valid_instances"]))
        assert [v.instance_id for v in valid.valid_instances] == [ids[0]]
        v = valid.valid_instances[0]
        assert v.landmark_decision == "manual" and v.landmark_subcategory == "apartment block"
        assert bad_view not in v.valid_view_ids
        assert v.main_view == anchor
        directions = {x.view_id: x.view_direction for x in v.rgb_views}
        assert directions[anchor] == "back"
        log_key = state.outputs["valid_instances"].replace("valid_instances.json", "review_log.jsonl")
        events = [json.loads(line)["event"] for line in env.store.get(log_key).splitlines()]
        for expected in (
            "web_set_rgb_view_validity",
            "web_set_view_direction",
            "web_instance_decided",
            "web_instance_updated",
            "review_session_end",
        ):
            assert expected in events
        assert (ARTIFACTS / "review_web.png").stat().st_size > 10_000
