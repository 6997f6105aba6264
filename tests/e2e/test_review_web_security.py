"""Markup in review data is shown as text, in a real Chromium, on a real run (issue 15 item 3).

One human-review run serves the whole module: markup is refused as a class-name hint and as
label text (issue 41 item 6), and planted in the state as a class name and labels written
before the rules existed; the review page and the gateway dashboard must show it literally, run
no script, load under their Content-Security-Policy, and keep the token out of storage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import Page, async_playwright, expect
from pydantic import SecretStr
from skyqa.bus import topology
from skyqa.bus.client import DLQ_ERROR, DLQ_REASON, RUN_ID
from skyqa.contracts import ReviewState
from skyqa.settings import Settings
from test_review_web import CHROMIUM_FLAGS, WATCH_CSP, start_human_review, status_says

from services.embedded import Embedded, client_bus

TOKEN = "sec-t0ken-9f2"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BREAKOUT = '"><img src=x onerror="window.__xss=1">'
PLAIN = '<img src=x onerror="window.__xss=2">'
SCRIPT = "</textarea><script>window.__xss=3</script>"


def directives(header: str) -> dict[str, str]:
    return {d.split(" ", 1)[0]: d.partition(" ")[2] for d in (p.strip() for p in header.split(";")) if d}


def assert_strict(headers: dict[str, str], img: str) -> None:
    csp = directives(headers["content-security-policy"])
    assert csp["script-src"] == "'self'" and csp["default-src"] == "'none'"
    assert csp["frame-ancestors"] == "'none'" and csp["img-src"] == img
    assert "unsafe" not in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"


async def no_script_ran(page: Page) -> None:
    assert await page.evaluate("window.__xss") is None
    assert await page.locator('img[src="x"]').count() == 0
    assert await page.locator("main script, tbody script").count() == 0
    assert await page.evaluate("window.__csp") == []


async def test_markup_in_review_data_is_text_under_a_strict_policy(tmp_path: Path) -> None:
    settings = Settings(review_token=SecretStr(TOKEN))
    async with Embedded(tmp_path, settings) as env:
        assert env.nats_url is not None
        req = await start_human_review(env)
        landmark, gateway = env.service("landmark"), env.service("gateway")
        assert landmark is not None and gateway is not None
        base = f"http://127.0.0.1:{landmark.port}"
        runs = f"/review/api/runs/{req.run_id}"

        async with httpx.AsyncClient(base_url=base, headers=AUTH) as http:
            items = (await http.get(runs)).json()["instances"]
            first, second = items[0]["instance_id"], items[1]["instance_id"]
            for payload in (BREAKOUT, PLAIN, "ok name; drop"):
                r = await http.post(f"{runs}/instances/{first}/class_name", json={"class_name": payload})
                assert r.status_code == 400, (payload, r.text)
            for label in (
                {"subcategory": BREAKOUT, "description": "x"},
                {"subcategory": "x", "description": PLAIN},
            ):
                r = await http.post(
                    f"{runs}/instances/{first}/labels", json={"category": "building", **label}
                )
                assert r.status_code == 400 and "may hold only" in r.json()["detail"], (label, r.text)
            # ids that are not ids would address other KV keys (or make JetStream fail with 500)
            for bad in ("a.%2A", "a%20b", "a.b"):
                r = await http.get(f"/review/api/runs/{bad}")
                assert r.status_code == 400 and "run id" in r.json()["detail"], (bad, r.text)
                r = await http.post(f"/review/api/runs/{bad}/finalize", json={})
                assert r.status_code == 400, (bad, r.text)
            assert (await http.get("/review/api/runs", headers={"Authorization": TOKEN})).status_code == 401
            lower = await http.get("/review/api/runs", headers={"authorization": f"bearer {TOKEN}"})
            assert lower.status_code == 200 and req.run_id in [r["run_id"] for r in lower.json()]

        # a hint stored before the rule existed, or by another writer, still reaches the page
        def plant(state: ReviewState) -> list[dict[str, Any]]:
            state.instances[second].class_name = BREAKOUT
            state.instances[second].note = PLAIN
            state.instances[first].landmark_subcategory = BREAKOUT
            state.instances[first].landmark_description = f"{PLAIN} {SCRIPT}"
            return []

        await landmark.state["reviewer"].book.change(req.run_id, plant)

        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_FLAGS)
            page = await browser.new_page(viewport={"width": 1400, "height": 1000})
            await page.add_init_script(WATCH_CSP)
            response = await page.goto(f"{base}/review")
            assert response is not None
            assert_strict(await response.all_headers(), "'self' blob:")
            await page.fill("#token", TOKEN)
            await page.press("#token", "Enter")
            a, b = f'section[data-id="{first}"]', f'section[data-id="{second}"]'
            await expect(page.locator(a)).to_be_visible(timeout=15000)
            await expect(page.locator(f"{a} input[data-sub]")).to_have_value(BREAKOUT)
            await expect(page.locator(f"{a} input[data-desc]")).to_have_value(f"{PLAIN} {SCRIPT}")
            await expect(page.locator(f"{b} input[data-class]")).to_have_value(BREAKOUT)
            # every view of the card is fetched with the bearer header and shown from a blob: URL
            imgs = f"{a} .view img"
            await page.wait_for_function(
                "sel => [...document.querySelectorAll(sel)].every((i) => i.complete && i.naturalWidth > 0)",
                arg=imgs,
                timeout=15000,
            )
            srcs = await page.locator(imgs).evaluate_all("imgs => imgs.map((i) => i.src)")
            assert len(srcs) >= 4 and all(s.startswith(f"blob:{base}/") for s in srcs), srcs
            await no_script_ran(page)

            # the page refuses the payload as a hint too, and says why in its status line
            await page.fill(f"{a} input[data-class]", BREAKOUT)
            await page.click(f"{a} button[data-sync]")
            await status_says(page, "class name may hold only")
            await expect(page.locator("#status")).to_have_class("error")
            await no_script_ran(page)

            storage = await page.evaluate("JSON.stringify([localStorage, sessionStorage, document.cookie])")
            assert TOKEN not in storage and storage == '[{},{},""]'
            # the token lives in the page's memory: a reload asks for it again
            await page.reload()
            await expect(page.locator("#list .card")).to_have_count(0)
            await expect(page.locator("#token")).to_have_value("")

            # the gateway dashboard shows bus-written text (dead letters) the same way
            async with client_bus(env.nats_url) as bus:
                await bus.js.publish(
                    topology.dlq_subject("skyqa.v1.test"),
                    b"x",
                    headers={RUN_ID: BREAKOUT, DLQ_REASON: PLAIN, DLQ_ERROR: SCRIPT},
                )
            dash = f"http://127.0.0.1:{gateway.port}"
            response = await page.goto(f"{dash}/#run={req.run_id}")
            assert response is not None
            assert_strict(await response.all_headers(), "'self'")
            dead = page.locator("#all-dead tr", has_text="window.__xss=2")
            await expect(dead).to_have_count(1, timeout=15000)
            assert [await c.text_content() for c in await dead.locator("td").all()][:3] == [
                BREAKOUT,
                "skyqa.v1.test",
                PLAIN,
            ]
            # the run's live view arrives over server-sent events, which connect-src 'self' allows
            await expect(page.locator("#run-id")).to_have_text(req.run_id, timeout=15000)
            await expect(page.locator('.stage[data-stage="review"]')).to_be_visible()
            await expect(page.locator("#live")).to_have_text("live")
            await no_script_ran(page)
            await browser.close()
