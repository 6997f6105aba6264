"""The review web, served by the landmark service: list candidates with their views and boxes,
keep/drop, main view and direction anchor, invalid views, class-name hint, auto-label, labels,
finalize. Every API call needs the bearer token (``SKYQA_REVIEW_TOKEN``).

The page is static (``review.html``, ``review.js``, ``review.css``) and renders every value as
text; its Content-Security-Policy allows scripts and styles from this service only, so markup
that slips into the review data cannot run even if a renderer gets it wrong.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Header, HTTPException, Response
from pydantic import BaseModel
from skyqa import keys
from skyqa.contracts import ReviewState
from skyqa.errors import BlobNotFound, InvalidInput
from skyqa.keys import validate_key
from skyqa.runtime import Service
from skyqa.runtime.auth import check_bearer
from skyqa.runtime.pages import BASE_HEADERS, mount_page
from skyqa.runtime.params import RunId

from services.landmark import review
from services.landmark.review_app import Reviewer

HERE = Path(__file__).parent
WHAT = "the review web (SKYQA_REVIEW_TOKEN)"


class Decide(BaseModel):
    action: str
    note: str = ""


class Direction(BaseModel):
    view_id: str
    direction: str
    main: bool = True


class Validity(BaseModel):
    view_id: str
    valid: bool


class ClassName(BaseModel):
    class_name: str


class Labels(BaseModel):
    category: str
    subcategory: str
    description: str
    note: str = ""


def mount_review_web(svc: Service, reviewer: Reviewer) -> None:
    app: FastAPI = svc.app

    def expected() -> str:
        return svc.settings.review_token.get_secret_value()

    def auth(authorization: str = Header("")) -> None:
        check_bearer(authorization, expected(), WHAT)

    async def state_of(run_id: str) -> ReviewState:
        state = await reviewer.book.get(run_id)
        if state is None:
            raise HTTPException(404, f"no review for run {run_id!r}")
        return state

    # blob: because the page fetches views with the bearer header and shows them as object
    # URLs, which keeps the token out of image URLs
    assets = [HERE / "review.js", HERE / "review.css"]
    mount_page(app, "/review", "/review/static", HERE / "review.html", assets, img_src="'self' blob:")

    @app.get("/review/api/runs", dependencies=[Depends(auth)])
    async def runs() -> list[dict[str, Any]]:
        out = []
        for run_id in sorted(await reviewer.book.runs()):
            s = await state_of(run_id)
            out.append(
                {
                    "run_id": run_id,
                    "scene_id": s.scene_id,
                    "mode": s.mode,
                    "finalized": s.finalized,
                    "instances": len(s.instances),
                }
            )
        return out

    @app.get("/review/api/runs/{run_id}", dependencies=[Depends(auth)])
    async def run(run_id: RunId) -> dict[str, Any]:
        state = await state_of(run_id)
        doc = await reviewer.instances(state)
        items = []
        for inst in doc.instances:
            r = state.instances[inst.instance_id]
            items.append(
                {
                    "instance_id": inst.instance_id,
                    "class_name": r.class_name,
                    "center_3d": inst.center_3d,
                    "review": r.model_dump(mode="json"),
                    "views": [
                        {
                            "view_id": v.view_id,
                            "mode": v.mode,
                            "direction": r.view_directions.get(v.view_id, v.view_direction),
                            "bbox": v.bbox_2d_xyxy,
                            "size": v.bbox_2d_image_size,
                            "measured_valid": v.is_valid,
                            "invalid": v.view_id in r.invalid_views,
                            "key": keys.stored(run_id, v.path),
                        }
                        for v in inst.rgb_views
                    ],
                }
            )
        return {
            "run_id": run_id,
            "scene_id": state.scene_id,
            "mode": state.mode,
            "finalized": state.finalized,
            "instances": items,
        }

    @app.get("/review/api/media", dependencies=[Depends(auth)])
    async def media(key: str) -> Response:
        try:
            validate_key(key)
            if not key.startswith("runs/") or "/landmarks_raw/" not in key:
                raise InvalidInput("only landmark views can be fetched here")
            data = await asyncio.to_thread(svc.store.get, key)
        except InvalidInput as exc:
            raise HTTPException(400, str(exc)) from None
        except BlobNotFound:
            raise HTTPException(404, f"no object {key!r}") from None
        return Response(data, media_type="image/jpeg", headers=BASE_HEADERS)

    async def act(run_id: str, event: str, fn: Any, **detail: Any) -> dict[str, Any]:
        state = await state_of(run_id)
        if state.finalized:
            raise HTTPException(409, "this review is finalized")
        doc = await reviewer.instances(state)

        def apply(s: ReviewState) -> list[dict[str, Any]]:
            if s.finalized:  # finalized between the read above and this compare-and-set
                raise review.AlreadyFinalized("this review is finalized")
            fn(s, doc)
            return [{"event": event, **detail}]

        try:
            new = await reviewer.book.change(run_id, apply)
        except review.AlreadyFinalized:
            raise HTTPException(409, "this review is finalized") from None
        except review.ReviewError as exc:
            raise HTTPException(400, str(exc)) from None
        iid = detail.get("instance_id")
        return new.instances[iid].model_dump(mode="json") if iid else {"ok": True}

    base = "/review/api/runs/{run_id}/instances/{iid}"

    @app.post(f"{base}/decide", dependencies=[Depends(auth)])
    async def decide(run_id: RunId, iid: str, body: Decide) -> dict[str, Any]:
        return await act(
            run_id,
            "web_instance_decided",
            lambda s, d: review.decide(s, d, iid, body.action, body.note),
            instance_id=iid,
            action=body.action,
        )

    @app.post(f"{base}/direction", dependencies=[Depends(auth)])
    async def direction(run_id: RunId, iid: str, body: Direction) -> dict[str, Any]:
        return await act(
            run_id,
            "web_set_view_direction",
            lambda s, d: review.set_direction(s, d, iid, body.view_id, body.direction, body.main),
            instance_id=iid,
            view_id=body.view_id,
            direction=body.direction,
        )

    @app.post(f"{base}/validity", dependencies=[Depends(auth)])
    async def validity(run_id: RunId, iid: str, body: Validity) -> dict[str, Any]:
        return await act(
            run_id,
            "web_set_rgb_view_validity",
            lambda s, d: review.set_view_validity(s, d, iid, body.view_id, body.valid),
            instance_id=iid,
            view_id=body.view_id,
            valid=body.valid,
        )

    @app.post(f"{base}/class_name", dependencies=[Depends(auth)])
    async def class_name(run_id: RunId, iid: str, body: ClassName) -> dict[str, Any]:
        return await act(
            run_id,
            "web_sync_class_name",
            lambda s, d: review.set_class_name(s, d, iid, body.class_name),
            instance_id=iid,
            class_name=body.class_name.strip(),
        )

    @app.post(f"{base}/labels", dependencies=[Depends(auth)])
    async def labels(run_id: RunId, iid: str, body: Labels) -> dict[str, Any]:
        return await act(
            run_id,
            "web_instance_updated",
            lambda s, d: review.update_labels(
                s, d, iid, body.category, body.subcategory, body.description, body.note
            ),
            instance_id=iid,
        )

    @app.post(f"{base}/auto_label", dependencies=[Depends(auth)])
    async def auto_label(run_id: RunId, iid: str) -> dict[str, Any]:
        state = await state_of(run_id)
        if iid not in state.instances:
            raise HTTPException(404, f"no landmark {iid!r}")
        if state.finalized:
            # a finalized review is part of a sealed release: a new label would change it
            raise HTTPException(409, "this review is finalized")
        await reviewer.request_labels(state, [iid])
        await reviewer.book.change(
            run_id, lambda s: [{"event": "web_auto_label_job_start", "instance_id": iid}]
        )
        return {"requested": iid}

    @app.post("/review/api/runs/{run_id}/finalize", dependencies=[Depends(auth)])
    async def finalize(run_id: RunId) -> dict[str, Any]:
        await state_of(run_id)
        try:
            # compare-and-set inside: one call publishes, the others get 409; a call long after
            # a finalize that died before publishing finishes it
            event = await reviewer.finalize(run_id, "web_finalize")
        except review.AlreadyFinalized:
            raise HTTPException(409, "this review is finalized") from None
        except InvalidInput as exc:
            raise HTTPException(400, str(exc)) from None
        return {"valid": event.valid, "total": event.total, "valid_instances": event.valid_instances.key}
