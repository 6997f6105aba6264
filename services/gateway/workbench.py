"""The workbench: pages that show what a run produced (rows, missions, evaluation results, the
release funnel) and the read-only API they page through. Every list is filtered and paged on
the server, so a release of ten thousand rows sends the browser one page at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

from fastapi import FastAPI, Header, HTTPException, Path as PathParam, Query, Request, Response
from skyqa.errors import BlobNotFound, InvalidInput
from skyqa.runtime import Service
from skyqa.runtime.pages import mount_page
from skyqa.runtime.params import checked_run_id

from services.gateway import audit, evaluations, funnel, missions, rows
from services.gateway.api import ServeFile
from services.gateway.readers import audit_user, read_body
from services.gateway.sessions import SessionBook
from services.gateway.stored import ParsedCache

HERE = Path(__file__).parent
T = TypeVar("T")
# aliases, not shared Query objects: FastAPI binds a shared one to the first parameter's name
Offset = Annotated[int, Query(ge=0, le=10_000_000)]
Limit = Annotated[int, Query(ge=1, le=rows.MAX_PAGE)]
Filter = Annotated[str, Query(max_length=200)]
RowId = Annotated[str, PathParam(min_length=1, max_length=200)]
MediumIndex = Annotated[int, PathParam(ge=0, le=10_000)]


async def _answer(fn: Callable[..., T], *args: Any) -> T:
    """``fn`` in a worker thread (it reads the store), its refusals as HTTP errors."""
    try:
        return await asyncio.to_thread(fn, *args)
    except (rows.NotFound, BlobNotFound) as exc:
        raise HTTPException(404, str(exc)) from None
    except audit.AlreadyAnswered as exc:
        raise HTTPException(409, str(exc)) from None
    except InvalidInput as exc:
        raise HTTPException(422, str(exc)) from None
    except (
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
        OverflowError,
        RecursionError,
    ) as exc:
        # stored files are untrusted: one that a contract did not catch is still the file's fault
        why = f"{type(exc).__name__}: {str(exc)[:200]}"
        raise HTTPException(422, f"a stored file of this run is malformed ({why})") from None


def mount_workbench(svc: Service, sessions: SessionBook, serve_file: ServeFile) -> None:
    app: FastAPI = svc.app
    cfg = svc.settings.gateway
    cache = ParsedCache(svc.store)
    base = "/v1/workbench/runs/{run_id}"
    assets = [HERE / "workbench.js", HERE / "workbench.css", HERE / "signin.js"]
    mount_page(
        app,
        "/workbench",
        "/workbench/static",
        HERE / "workbench.html",
        assets,
        img_src="'self'",
        media_src="'self'",
    )

    @app.get(f"{base}/rows", tags=["workbench"])
    async def list_rows(
        run_id: str,
        family: Filter = "",
        task: Filter = "",
        difficulty: Filter = "",
        unit: Filter = "",
        category: Filter = "",
        status: Filter = "",
        blind: Filter = "",
        q: Filter = "",
        offset: Offset = 0,
        limit: Limit = 50,
    ) -> dict[str, Any]:
        """Rows of every family the release checked, released or dropped, one page at a time;
        filters match exactly, ``q`` searches ids and prompts; ``facets`` lists each filter's values."""
        checked_run_id(run_id)
        index = await _answer(rows.ledger, cache, run_id)
        chosen = dict(
            zip(rows.FILTERS, (family, task, difficulty, unit, category, status, blind), strict=True)
        )
        return await _answer(rows.select, index, chosen, q, offset, limit)

    @app.get(f"{base}/rows/{{sample_id}}", tags=["workbench"])
    async def get_row(run_id: str, sample_id: str) -> dict[str, Any]:
        """One row in full: prompts, options with the gold marked, media with their answer and
        reference boxes and render requests, reasoning steps, and rows showing the same media."""
        return await _answer(rows.row_detail, cache, checked_run_id(run_id), sample_id)

    @app.get(f"{base}/missions", tags=["workbench"])
    async def list_missions(run_id: str) -> list[dict[str, Any]]:
        return await _answer(missions.mission_list, cache, checked_run_id(run_id))

    @app.get(f"{base}/missions/{{traj_id}}", tags=["workbench"])
    async def get_mission(run_id: str, traj_id: str) -> dict[str, Any]:
        """A mission's video, behavior and visibility intervals, flown path over the top-down
        preview, per-frame target boxes and constraint report."""
        return await _answer(missions.mission_detail, cache, checked_run_id(run_id), traj_id)

    @app.get(f"{base}/funnel", tags=["workbench"])
    async def get_funnel(run_id: str) -> dict[str, Any]:
        return await _answer(funnel.funnel_view, cache, checked_run_id(run_id))

    @app.get(f"{base}/eval", tags=["workbench"])
    async def get_eval(run_id: str) -> dict[str, Any]:
        return await _answer(evaluations.summary, cache, checked_run_id(run_id))

    @app.get(f"{base}/eval/replies", tags=["workbench"])
    async def get_replies(
        run_id: str,
        model: Filter = "",
        condition: Filter = "",
        task: Filter = "",
        sample: Filter = "",
        outcome: str = Query("", pattern="^(|right|wrong)$"),
        offset: Offset = 0,
        limit: Limit = 50,
    ) -> dict[str, Any]:
        """Scored replies with raw model output, parse provenance and score."""
        chosen = {"model": model, "condition": condition, "task": task, "sample": sample}
        return await _answer(
            evaluations.replies, cache, checked_run_id(run_id), chosen, outcome, offset, limit
        )

    @app.get(f"{base}/eval/compare", tags=["workbench"])
    async def get_compare(
        run_id: str,
        a: str = Query(..., min_length=1, max_length=200),
        b: str = Query(..., min_length=1, max_length=200),
        condition: str = Query("full", max_length=200),
        disagree: bool = False,
        offset: Offset = 0,
        limit: Limit = 50,
    ) -> dict[str, Any]:
        """Two models on the same rows of one condition."""
        args = (cache, checked_run_id(run_id), a, b, condition, disagree, offset, limit)
        return await _answer(evaluations.compare, *args)

    @app.get(f"{base}/eval/confusion", tags=["workbench"])
    async def get_confusion(
        run_id: str,
        model: str = Query(..., min_length=1, max_length=200),
        task: str = Query(..., min_length=1, max_length=200),
        condition: str = Query("full", max_length=200),
    ) -> dict[str, Any]:
        """Gold against predicted answers of one model on one task."""
        return await _answer(evaluations.confusion, cache, checked_run_id(run_id), model, task, condition)

    # -- the human answerability audit (see services.gateway.audit): every route needs a session
    # signed in with a name and the write token; nothing here names a gold before it is answered
    k = cfg.audit_per_stratum

    @app.get(f"{base}/audit", tags=["workbench"])
    async def audit_queue(run_id: str, request: Request) -> dict[str, Any]:
        """The audit sample for the signed-in person: rows, what they answered, the next row."""
        user = await audit_user(request, cfg, sessions)
        return await _answer(audit.queue, cache, checked_run_id(run_id), user, k)

    @app.get(f"{base}/audit/rows/{{sample_id}}", tags=["workbench"])
    async def audit_row(run_id: str, sample_id: RowId, request: Request) -> dict[str, Any]:
        """A sampled row as a model is asked it (prompts, options, media), without its gold."""
        await audit_user(request, cfg, sessions)
        return await _answer(audit.item, cache, checked_run_id(run_id), sample_id, k)

    @app.get(f"{base}/audit/rows/{{sample_id}}/media/{{index}}", tags=["workbench"])
    @app.head(f"{base}/audit/rows/{{sample_id}}/media/{{index}}", tags=["workbench"])
    async def audit_medium(
        run_id: str,
        sample_id: RowId,
        index: MediumIndex,
        request: Request,
        span_header: str | None = Header(None, alias="range"),
        if_range: str | None = Header(None, alias="if-range"),
    ) -> Response:
        """A sampled row's medium by its place in the row, so its file name is never shown."""
        await audit_user(request, cfg, sessions)
        key, name = await _answer(audit.medium, cache, checked_run_id(run_id), sample_id, index, k)
        return await serve_file(request, run_id, key, name, span_header, if_range)

    @app.post(f"{base}/audit/answers", tags=["workbench"])
    async def audit_answer(run_id: str, request: Request, response: Response) -> dict[str, Any]:
        """Store the signed-in person's reply to a sampled row (``{"sample_id", "reply"}``: an
        option id, a list of option ids for a multi-select row, or a count) and rewrite the
        release's audit in ``qc_report.json`` and the dataset card. 201 when stored, 200 when
        the same reply was stored before, 409 for another reply to an answered row."""
        user = await audit_user(request, cfg, sessions)
        body = await read_body(request, audit.MAX_ANSWER_BYTES)
        out = await _answer(audit.record, cache, checked_run_id(run_id), user, body, k)
        response.status_code = 201 if out["created"] else 200
        return out
