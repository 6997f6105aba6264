"""The live dashboard in a real headless Chromium while a real run progresses.

The scan is submitted through the gateway's API, a poison message is dropped on the bus next to
it, and the page must show the run moving, finishing with its previews, and the dead letter.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from playwright.async_api import async_playwright, expect
from pydantic import SecretStr
from skyqa.bus import topology
from skyqa.settings import Settings
from test_review_web import ARTIFACTS, CHROMIUM_FLAGS, WATCH_CSP

from services.embedded import Embedded, client_bus

TOKEN = "dash-t0ken"
SCAN = {
    "scene_id": "tiny_town",
    "bound": {"xmin": -50, "xmax": 50, "ymin": -50, "ymax": 50, "zmin": 0, "zmax": 80},
    "spacing_x_m": 25,
    "spacing_y_m": 25,
    "altitudes_m": [45],
    "camera": {"width": 160, "height": 120},
    "landmark_count": 2,
    "video": {"width": 160, "height": 120},
    "reasoning": {"per_split": 1, "random_walks": 1, "width": 96, "height": 64},
    "surveys": {"count": 1, "width": 1024, "height": 768, "gsd_m": 0.1},
    "evaluation": {"conditions": ["full", "text_only"]},
}


async def test_dashboard_follows_a_live_run(tmp_path: Path) -> None:
    settings = Settings(gateway={"token": SecretStr(TOKEN)})
    async with Embedded(tmp_path, settings) as env:
        assert env.nats_url is not None
        gateway, landmark = env.service("gateway"), env.service("landmark")
        assert gateway is not None and landmark is not None
        base = f"http://127.0.0.1:{gateway.port}"
        async with httpx.AsyncClient(base_url=base) as http:
            r = await http.post("/v1/scans", json=SCAN, headers={"Authorization": f"Bearer {TOKEN}"})
            assert r.status_code == 202, r.text
            run_id = r.json()["run_id"]
        async with client_bus(env.nats_url) as bus:
            await bus.js.publish(topology.SCAN_REQUESTED, b"\x08\xff\xff poison")

        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_FLAGS)
            page = await browser.new_page(viewport={"width": 1400, "height": 1100})
            await page.add_init_script(WATCH_CSP)
            response = await page.goto(f"{base}/#run={run_id}")
            assert response is not None
            assert "script-src 'self'" in (await response.all_headers())["content-security-policy"]
            await expect(page.locator(f'tr[data-run="{run_id}"]')).to_be_visible(timeout=15000)
            await expect(page.locator("#run-id")).to_have_text(run_id)
            # live: a stage moves while the run is still running
            await expect(page.locator("#run-status")).to_have_text("running", timeout=60000)
            capture = page.locator('.stage[data-stage="capture"] .count')
            await expect(capture).not_to_have_text("0/?", timeout=60000)
            assert (await page.locator("#live").text_content()) == "live"
            await expect(page.locator("#all-dead tr").first).to_contain_text("invalid_input", timeout=30000)
            await expect(page.locator("#review-link")).to_have_attribute(
                "href", f"http://127.0.0.1:{landmark.port}/review"
            )

            await expect(page.locator("#run-status")).to_have_text("completed", timeout=600000)
            await expect(page.locator("#live")).to_have_text("run completed")
            for stage in ("capture", "fusion", "landmark", "review", "mission", "qa", "eval"):
                await expect(page.locator(f'.stage[data-stage="{stage}"]')).to_have_class("stage completed")
            previews = page.locator("#previews img")
            await expect(previews.first).to_be_visible()
            assert await previews.first.evaluate("img => img.naturalWidth") > 0
            await expect(page.locator("#outputs")).to_contain_text("leaderboard")
            ARTIFACTS.mkdir(exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
            # the live stream, previews and polling all ran under the page's policy
            assert await page.evaluate("window.__csp") == []
            await browser.close()
        assert (ARTIFACTS / "dashboard.png").stat().st_size > 20_000

        # the poison message did not touch the run, whose outputs the release lists
        async with httpx.AsyncClient(base_url=base) as http:
            run = (await http.get(f"/v1/runs/{run_id}")).json()
            assert run["status"] == "completed" and run["dead_letters"] == []
            release = (await http.get(f"/v1/releases/{run_id}", params={"prefix": "eval"})).json()
            assert any(f["path"].endswith("leaderboard.json") for f in release["files"])
        await asyncio.sleep(0)
