"""The gateway's HTTP API: submit scans, read runs, follow a run live, list its release.

Reads are open (they show what the dashboard shows); writes need the bearer token
``SKYQA_GATEWAY__TOKEN`` and are refused while it is unset.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import mimetypes
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import nats.errors
from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Response
from fastapi.responses import StreamingResponse
from google.protobuf import json_format
from google.protobuf.message import Message
from pydantic import BaseModel
from skyqa import keys, scan
from skyqa.blob import CHUNK_BYTES, BlobReader
from skyqa.bus import JsonKV, topology
from skyqa.contracts import RunState
from skyqa.contracts.qa import QCReport
from skyqa.errors import BlobNotFound, InvalidInput, TransientError
from skyqa.models.endpoints import resolve
from skyqa.protojson import to_dict
from skyqa.runtime import Service, Settings
from skyqa.runtime.auth import check_bearer
from skyqa.runtime.pages import SANDBOX_HEADERS
from skyqa.runtime.params import checked_run_id
from skyqa.runtime.progress import FINAL_STAGE, request_stage
from skyqa.v1 import common_pb2, eval_pb2, scan_pb2
from starlette.types import Receive, Scope, Send

from services.gateway.deadletters import DeadLetterLog
from services.gateway.ranges import byte_range
from services.gateway.readers import STILL_ALLOWED, UNREACHABLE, client_address, read_body
from services.gateway.views import run_view

log = logging.getLogger("skyqa.gateway")

KEEPALIVE_S = 15.0
# how often a guarded event stream asks whether its reader is still signed in
SESSION_CHECK_S = 2.0
FINAL_GRACE_S = 0.3
FINAL = ("completed", "failed")
# what a client told "busy" (every file stream slot taken) waits before it asks again
BUSY_RETRY_AFTER_S = 2
# a release folder is copied out to a filesystem, where no file name is longer than this
NAME_MAX = 255
_SHA256 = re.compile(r"^[0-9a-f]{64}$", re.ASCII)


class Submitted(BaseModel):
    run_id: str
    created: bool
    status: str
    links: dict[str, str]


def replaced(doc: dict[str, Any], given: Message, full: Message, path: str = "") -> list[str]:
    """Fields the body set explicitly that the profile defaults then replaced.

    Protobuf JSON cannot tell ``"spacing_x_m": 0`` from an absent field, so the defaults would
    silently turn an explicit 0 into 40 m; comparing the body against the result finds it.
    """
    out = []
    fields = {f.name: f for f in given.DESCRIPTOR.fields} | {f.json_name: f for f in given.DESCRIPTOR.fields}
    for key, value in doc.items():
        field = fields.get(key)
        if field is None:
            continue
        name = f"{path}{field.name}"
        if field.message_type is not None and not field.is_repeated:
            if isinstance(value, dict):
                out += replaced(value, getattr(given, field.name), getattr(full, field.name), f"{name}.")
        elif _values(given, field.name) != _values(full, field.name):
            out.append(name)
    return out


def _values(msg: Message, name: str) -> list[Any]:
    value = getattr(msg, name)
    return list(value) if not isinstance(value, str | bytes | int | float | bool) else [value]


def parse_scan(raw: bytes, settings: Settings) -> scan_pb2.ScanRequest:
    """A scan request from its protobuf JSON form, with profile defaults, validated, and
    admitted by this deployment (known scene, allowed model endpoints)."""
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HTTPException(400, f"body is not JSON: {exc}") from None
    except RecursionError:
        raise HTTPException(400, "body is not JSON this API accepts: it is nested too deeply") from None
    if not isinstance(doc, dict):
        raise HTTPException(422, "body must be a JSON object (a skyqa.v1.ScanRequest)")
    try:
        req = json_format.ParseDict(doc, scan_pb2.ScanRequest())
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        raise HTTPException(422, f"not a skyqa.v1.ScanRequest: {str(exc)[:300]}") from None
    if not req.scene_id:
        raise HTTPException(422, "scene_id is required")
    try:
        full = scan.apply_defaults(req)
        overridden = replaced(doc, req, full)
        if overridden:
            raise InvalidInput(
                f"{', '.join(overridden)}: an explicit 0 or empty value is not allowed here; "
                "omit the field to take the profile default"
            )
        full.run_id = full.run_id or scan.run_id_for(full)
        scan.validate(full)
        scan.admit(full, settings.scenes_dir, settings.evaluation)
    except InvalidInput as exc:
        raise HTTPException(422, str(exc)) from None
    return full


def parse_spec(raw: bytes, settings: Settings) -> eval_pb2.EvaluationSpec:
    """An evaluation spec from its protobuf JSON form, validated and admitted (every model on
    the operator's allow-list)."""
    try:
        doc = json.loads(raw)
        spec = json_format.ParseDict(doc, eval_pb2.EvaluationSpec()) if isinstance(doc, dict) else None
    except (UnicodeDecodeError, ValueError, TypeError, RecursionError, json_format.ParseError) as exc:
        raise HTTPException(422, f"not a skyqa.v1.EvaluationSpec: {str(exc)[:300]}") from None
    if spec is None:
        raise HTTPException(422, "body must be a JSON object (a skyqa.v1.EvaluationSpec)")
    try:
        scan.validate_evaluation(spec)
        resolve(spec.models, settings.evaluation)
    except InvalidInput as exc:
        raise HTTPException(422, str(exc)) from None
    return spec


def in_release(root: str, rel: str) -> str:
    """The store key of ``rel`` inside the release folder ``root``; 400 for a path no release
    folder can hold (unsafe, or a name longer than a filesystem allows)."""
    key = f"{root}/{rel}" if rel else root
    try:
        keys.validate_key(key)
    except InvalidInput as exc:
        raise HTTPException(400, str(exc)) from None
    longest = max(rel.split("/"), key=len)
    if len(longest) > NAME_MAX:
        raise HTTPException(
            400,
            f"path segment {longest[:40]!r}... is {len(longest)} characters; "
            f"a file name holds at most {NAME_MAX}",
        )
    return key


class FileStreams:
    """Release files being streamed: at most ``limit`` at once, and at most ``per_client`` to
    one client address. Counted on the event loop, so no lock: take and give never run
    concurrently."""

    def __init__(self, limit: int, per_client: int) -> None:
        self.limit = limit
        self.per_client = per_client
        self.active = 0
        self._by_client: dict[str, int] = {}

    def take(self, client: str) -> str | None:
        """None once a slot is taken for ``client``, else why none was."""
        if self.active >= self.limit:
            return f"{self.limit} files are being sent already"
        if self._by_client.get(client, 0) >= self.per_client:
            return f"{self.per_client} files are being sent to this address already"
        self.active += 1
        self._by_client[client] = self._by_client.get(client, 0) + 1
        return None

    def give(self, client: str) -> None:
        self.active -= 1
        left = self._by_client.get(client, 0) - 1
        if left > 0:
            self._by_client[client] = left
        else:
            self._by_client.pop(client, None)


class _Serialised:
    """A reader whose ``close`` waits for a read still running in a worker thread (one whose
    await a client disconnect cancelled) instead of closing the file or connection under it."""

    def __init__(self, reader: BlobReader) -> None:
        self._reader = reader
        self._lock = threading.Lock()
        self._closed = False

    def read(self, size: int) -> bytes:
        with self._lock:
            return b"" if self._closed else self._reader.read(size)

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._reader.close()


def _transport(receive: Receive) -> Any:
    """The connection behind uvicorn's ``receive`` (which reaches the route unwrapped), or None
    under another server. Aborting it drops the connection at once; a close would wait for a
    client that does not read to take what is still buffered for it."""
    return getattr(getattr(receive, "__self__", None), "transport", None)


class FileStream(StreamingResponse):
    """``length`` bytes of an open reader (``first`` already read from it), one chunk in memory
    at a time: the server awaits each send until the client has taken the previous chunk, so a
    slow client holds one chunk, not the file. A client that takes no chunk in ``send_timeout_s``
    seconds, or a reader that fails or ends short of ``length``, aborts the connection (one
    log line; the client sees a body shorter than its Content-Length, never a padded one). The
    reader is closed and the stream slot given back however the response ends (finished,
    aborted, client gone, cancelled)."""

    def __init__(
        self,
        reader: BlobReader,
        first: bytes,
        length: int,
        done: Callable[[], None],
        send_timeout_s: float,
        name: str,
        **kwargs: Any,
    ) -> None:
        self._reader = _Serialised(reader)
        self._first = first
        self._length = length
        self._done = done
        self._timeout = send_timeout_s
        self._name = name
        self._receive: Receive | None = None
        super().__init__(iter(()), **kwargs)

    def _abort(self, why: str) -> None:
        log.warning("release file %s: connection aborted: %s", self._name, why)
        transport = _transport(self._receive) if self._receive is not None else None
        if transport is not None and hasattr(transport, "abort"):
            transport.abort()

    async def stream_response(self, send: Send) -> None:
        async def timed(message: dict[str, Any]) -> None:
            await asyncio.wait_for(send(message), self._timeout)

        try:
            await timed(
                {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
            )
            data, left = self._first, self._length
            while data:
                left -= len(data)
                await timed({"type": "http.response.body", "body": data, "more_body": True})
                if left <= 0:
                    break
                try:
                    data = await asyncio.to_thread(self._reader.read, min(CHUNK_BYTES, left))
                except Exception as exc:
                    self._abort(f"reading the store failed {left} bytes before the end: {exc!r}"[:300])
                    return
                if not data:  # the object shrank since its head: a short body, never padding
                    self._abort(f"the file ended {left} bytes short of its Content-Length")
                    return
            await timed({"type": "http.response.body", "body": b"", "more_body": False})
        except TimeoutError:
            self._abort(f"the client took no data for {self._timeout:g} s")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._receive = receive
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._done()
            # in a worker: it may wait for a read in flight; it runs even if this await is cancelled
            await asyncio.to_thread(self._reader.close)


def _sse(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def _progress(data: bytes) -> str:
    event = common_pb2.Progress.FromString(data)
    return _sse("progress", to_dict(event, proto_names=True))


# what serves one stored file of a run: (request, run id, key, name in messages, Range, If-Range)
ServeFile = Callable[[Request, str, str, str, str | None, str | None], Awaitable[Response]]


def mount_api(svc: Service, dead: DeadLetterLog) -> ServeFile:
    """Mount the API; returns how it serves a stored file (ranges, ETag, stream limits), for
    the workbench's audit, which serves media without naming their paths."""
    app: FastAPI = svc.app
    cfg = svc.settings.gateway
    streams = FileStreams(cfg.max_file_streams, cfg.max_file_streams_per_client)

    def runs_kv() -> JsonKV:
        if svc.runs is None:
            raise HTTPException(503, "the gateway is not connected to the bus yet")
        return svc.runs

    async def read(run_id: str) -> RunState | None:
        doc, _ = await runs_kv().get(run_id)
        return RunState.model_validate(doc) if doc else None

    async def view(run_id: str) -> dict[str, Any]:
        state = await read(run_id)
        if state is None:
            raise HTTPException(404, f"no run {run_id!r}")
        out = run_view(state, time.time())
        out["dead_letters"] = [d.to_json() for d in dead.recent(run_id)]
        return out

    def auth(authorization: str = Header("")) -> None:
        check_bearer(authorization, cfg.token.get_secret_value(), "writing (set SKYQA_GATEWAY__TOKEN)")

    @app.post(
        "/v1/scans",
        status_code=202,
        dependencies=[Depends(auth)],
        responses={200: {"model": Submitted, "description": "the same request was already submitted"}},
        tags=["runs"],
    )
    async def submit_scan(request: Request, response: Response) -> Submitted:
        """Submit a scan (a ``skyqa.v1.ScanRequest`` in protobuf JSON; unset fields take the
        profile defaults). The run id is derived from the request unless given, so a retried
        submission names the same run and is not started twice."""
        req = parse_scan(await read_body(request, cfg.max_body_bytes), svc.settings)
        if svc.progress is None:
            raise HTTPException(503, "the gateway is not connected to the bus yet")
        state, created = await svc.progress.open(req.run_id, req.scene_id)
        if created:
            await svc.bus.publish(
                topology.SCAN_REQUESTED, req, msg_id=f"scan:{req.run_id}", run_id=req.run_id
            )
        else:
            response.status_code = 200
        base = f"/v1/runs/{req.run_id}"
        return Submitted(
            run_id=req.run_id,
            created=created,
            status=state.status,
            links={
                "run": base,
                "events": f"{base}/events",
                "release": f"/v1/releases/{req.run_id}",
                "dashboard": f"/#run={req.run_id}",
            },
        )

    @app.post("/v1/runs/{run_id}/evaluations", status_code=202, dependencies=[Depends(auth)], tags=["runs"])
    async def start_evaluation(
        run_id: str, request: Request, response: Response, idempotency_key: str = Header("", max_length=96)
    ) -> dict[str, Any]:
        """Evaluate the run's release (a ``skyqa.v1.EvaluationSpec`` in protobuf JSON: models on the
        operator's allow-list, conditions, request cap). The evaluator reports on the run's
        ``eval`` stage and rewrites ``eval/``. A retry with the same ``Idempotency-Key`` header is
        not started twice."""
        checked_run_id(run_id)
        spec = parse_spec(await read_body(request, cfg.max_body_bytes), svc.settings)
        qc = f"{keys.run_prefix(run_id)}/qc_report.json"
        try:
            report = QCReport.model_validate_json(await asyncio.to_thread(svc.store.get, qc))
        except BlobNotFound:
            raise HTTPException(404, f"run {run_id!r} has no release to evaluate") from None
        except ValueError:
            raise HTTPException(422, f"run {run_id!r} has an unreadable qc_report.json") from None
        if idempotency_key and not keys.is_valid_id(idempotency_key):
            raise HTTPException(422, "Idempotency-Key must be letters, digits, '_' and '-'")
        request_id = idempotency_key or uuid.uuid4().hex[:16]
        msg_id = f"eval:{run_id}:{request_id}"
        event = eval_pb2.EvaluationRequest(
            run_id=run_id, scene_id=report.scene_id, spec=spec, request_id=request_id
        )
        ack = await svc.bus.publish(topology.EVAL_REQUESTED, event, msg_id=msg_id, run_id=run_id)
        if ack.duplicate:
            response.status_code = 200
        return {
            "created": not ack.duplicate,
            "run_id": run_id,
            "request": request_id,
            "stage": request_stage(FINAL_STAGE, request_id),  # the run stage the evaluator reports it as
            "submitted_at": time.time(),  # a dead letter of it after this says why it failed
            "links": {"run": f"/v1/runs/{run_id}", "events": f"/v1/runs/{run_id}/events"},
        }

    @app.get("/v1/runs", tags=["runs"])
    async def list_runs(limit: int = Query(100, ge=1, le=1000)) -> list[dict[str, Any]]:
        """Runs newest first, each with its stages, throughput and ETA."""
        kv = runs_kv()
        states = []
        for key in await kv.keys():
            doc, _ = await kv.get(key)
            if doc:
                states.append(RunState.model_validate(doc))
        states.sort(key=lambda s: (s.created_at, s.run_id), reverse=True)
        now = time.time()
        return [run_view(s, now) for s in states[:limit]]

    @app.get("/v1/runs/{run_id}", tags=["runs"])
    async def get_run(run_id: str) -> dict[str, Any]:
        """One run's state from KV, its dead-lettered messages and its outputs."""
        return await view(checked_run_id(run_id))

    @app.get("/v1/runs/{run_id}/events", tags=["runs"], response_class=StreamingResponse)
    async def run_events(run_id: str, request: Request) -> StreamingResponse:
        """Server-sent events: ``state`` (the whole run view) on connect and after every
        progress event, ``progress`` (the event itself), and ``end`` once the run completes
        or fails. Comments keep idle connections alive."""
        checked_run_id(run_id)
        first = await view(run_id)
        nc = svc.bus.nc
        if nc is None:
            raise HTTPException(503, "the gateway is not connected to the bus")
        # set by the read guard when reads need a token: a session ended (signed out) while the
        # stream is open ends the stream within SESSION_CHECK_S
        still_allowed: Callable[[], Awaitable[bool]] | None = request.scope.get(STILL_ALLOWED)
        wait = min(KEEPALIVE_S, SESSION_CHECK_S) if still_allowed is not None else KEEPALIVE_S

        async def revoked() -> bool:
            if still_allowed is None:
                return False
            try:
                return not await still_allowed()
            except UNREACHABLE:  # the session cannot be checked: end the stream, as a new one would be
                return True

        # subscribed before the stream starts, so nothing between the first read and now is missed
        sub = await nc.subscribe(topology.progress_subject(run_id))

        async def stream() -> AsyncIterator[str]:
            try:
                yield "retry: 2000\n\n"
                yield _sse("state", first)
                if first["status"] in FINAL:
                    yield _sse("end", {"status": first["status"]})
                    return
                quiet_since = time.monotonic()
                while not await request.is_disconnected():
                    try:
                        msg = await sub.next_msg(timeout=wait)
                    except nats.errors.TimeoutError:
                        if await revoked():
                            return
                        if time.monotonic() - quiet_since >= KEEPALIVE_S:
                            quiet_since = time.monotonic()
                            yield ": keep-alive\n\n"
                        continue
                    except nats.errors.ConnectionClosedError:
                        return
                    # a burst of progress (video frames) becomes one state read
                    batch = [msg]
                    while sub.pending_msgs:
                        batch.append(await sub.next_msg(timeout=0.1))
                    if await revoked():
                        return
                    quiet_since = time.monotonic()
                    for m in batch:
                        yield _progress(m.data)
                    current = await view(run_id)
                    yield _sse("state", current)
                    if current["status"] in FINAL:
                        # KV is written before each event is published: the events of the
                        # final writes may still be in flight
                        with contextlib.suppress(nats.errors.TimeoutError):
                            while True:
                                yield _progress((await sub.next_msg(timeout=FINAL_GRACE_S)).data)
                        yield _sse("end", {"status": current["status"]})
                        return
            finally:
                await sub.unsubscribe()

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @app.get("/v1/dead-letters", tags=["failures"])
    async def dead_letters(
        run_id: str | None = None, limit: int = Query(100, ge=1, le=2000)
    ) -> dict[str, Any]:
        """Dead-lettered messages newest first (all runs, or one), with their reasons."""
        if run_id is not None:
            checked_run_id(run_id)
        return {"total": dead.total, "items": [d.to_json() for d in dead.recent(run_id, limit)]}

    @app.get("/v1/releases/{run_id}", tags=["releases"])
    async def release(
        run_id: str, prefix: str = Query("", description="a sub-folder of the release, e.g. image_tasks")
    ) -> dict[str, Any]:
        """The run's release folder (``runs/<run>/``): every file with its size, a gateway link
        and, on S3, a presigned link valid ``presign_expiry_s`` seconds."""
        root = keys.run_prefix(checked_run_id(run_id))
        where = in_release(root, prefix.strip("/"))
        try:
            # a folder: "runs/abc/" never matches runs/abcdef, "image_tasks/" never image_tasks_old
            names = await asyncio.to_thread(svc.store.list, f"{where}/")
        except InvalidInput as exc:
            raise HTTPException(400, str(exc)) from None
        if not names and await read(run_id) is None:
            raise HTTPException(404, f"no run {run_id!r}")
        shown = names[: cfg.max_listing]

        def describe(key: str) -> dict[str, Any]:
            try:
                info = svc.store.head(key)
            except BlobNotFound:  # removed (or replaced by a link) since it was listed
                info = None
            rel = key[len(root) + 1 :]
            return {
                "key": key,
                "path": rel,
                "size": info.size if info else None,
                "sha256": info.sha256 if info else None,
                "url": f"/v1/releases/{run_id}/files/{rel}",
                "presigned_url": svc.store.presigned_url(key, cfg.presign_expiry_s),
            }

        files = await asyncio.to_thread(lambda: [describe(k) for k in shown])
        return {
            "run_id": run_id,
            "prefix": where,
            "count": len(names),
            "truncated": len(names) > len(shown),
            "files": files,
        }

    async def changed(key: str, path: str, run_id: str, first: int) -> HTTPException:
        """The answer for a file that no longer has the bytes its head promised: gone (404),
        now ending before the range (416, with its current size) or otherwise changed (503:
        asking again reads the new one)."""
        retry = HTTPException(
            503, f"file {path!r} changed while it was opened: retry", {"Retry-After": str(BUSY_RETRY_AFTER_S)}
        )
        try:
            now = await asyncio.to_thread(svc.store.head, key)
        except BlobNotFound:
            now = None
        except Exception:  # the store failing now: the client asks again
            return retry
        if now is None:
            return HTTPException(404, f"no file {path!r} in run {run_id!r}")
        if first >= now.size:
            return HTTPException(
                416,
                f"file {path!r} is now {now.size} bytes, shorter than the range asked for",
                {"Content-Range": f"bytes */{now.size}"},
            )
        return retry

    async def opened(key: str, path: str, run_id: str, first: int, length: int) -> tuple[BlobReader, bytes]:
        """The reader of ``length`` bytes from ``first`` and its first chunk, the store's errors
        mapped to answers before any byte is sent."""
        busy = {"Retry-After": str(BUSY_RETRY_AFTER_S)}
        try:
            reader = await asyncio.to_thread(svc.store.open_range, key, first, length)
        except BlobNotFound:  # removed since its head
            raise HTTPException(404, f"no file {path!r} in run {run_id!r}") from None
        except TransientError as exc:
            raise HTTPException(503, str(exc), busy) from None
        except InvalidInput:  # RangeNotSatisfiable: the object shrank since its head
            raise await changed(key, path, run_id, first) from None
        except Exception as exc:
            log.warning("release file %s: opening it failed: %r", key, exc)
            raise HTTPException(503, f"the store cannot read {path!r} now: retry", busy) from None
        try:
            data = await asyncio.to_thread(reader.read, min(CHUNK_BYTES, length)) if length else b""
        except BaseException as exc:
            await asyncio.to_thread(reader.close)
            if not isinstance(exc, Exception):
                raise
            log.warning("release file %s: its first read failed: %r", key, exc)
            raise HTTPException(503, f"the store cannot read {path!r} now: retry", busy) from None
        if length and not data:
            await asyncio.to_thread(reader.close)
            raise await changed(key, path, run_id, first)
        return reader, data

    @app.get("/v1/releases/{run_id}/files/{path:path}", tags=["releases"])
    @app.head("/v1/releases/{run_id}/files/{path:path}", tags=["releases"])
    async def release_file(
        run_id: str,
        path: str,
        request: Request,
        span_header: str | None = Header(None, alias="range"),
        if_range: str | None = Header(None, alias="if-range"),
    ) -> Response:
        """One file of the release, as stored, streamed in 256 KiB chunks, with its SHA-256 as
        ``ETag``; a single ``Range: bytes=`` range is answered 206 with that part (how a video
        player seeks), unless an ``If-Range`` names another ETag (then the whole file). At most
        ``max_file_streams`` files stream at once, ``max_file_streams_per_client`` to one
        address; past that the answer is 503 with ``Retry-After``. ``HEAD`` answers the headers
        alone and takes no stream."""
        key = in_release(keys.run_prefix(checked_run_id(run_id)), path)
        return await serve_file(request, run_id, key, path, span_header, if_range)

    async def serve_file(
        request: Request, run_id: str, key: str, path: str, span_header: str | None, if_range: str | None
    ) -> Response:
        """The answer for one stored file of the run (``key``, named ``path`` in messages)."""
        try:
            info = await asyncio.to_thread(svc.store.head, key)
        except BlobNotFound:
            info = None
        except InvalidInput as exc:
            raise HTTPException(400, str(exc)) from None
        except TransientError as exc:
            raise HTTPException(503, str(exc), {"Retry-After": str(BUSY_RETRY_AFTER_S)}) from None
        if info is None:
            raise HTTPException(404, f"no file {path!r} in run {run_id!r}")
        media = mimetypes.guess_type(path)[0] or "application/octet-stream"
        headers = {**SANDBOX_HEADERS, "Accept-Ranges": "bytes"}
        etag = f'"{info.sha256}"' if _SHA256.match(info.sha256) else None
        if etag is not None:
            headers["ETag"] = etag
        if if_range is not None and if_range.strip() != etag:
            # RFC 9110 13.1.5: a validator other than the current strong ETag (another ETag, a
            # weak one, a date: no Last-Modified is sent) asks for the whole file
            span_header = None
        span = byte_range(span_header, info.size)
        first, last = span if span is not None else (0, info.size - 1)
        length = last - first + 1
        if span is not None:
            headers["Content-Range"] = f"bytes {first}-{last}/{info.size}"
        headers["Content-Length"] = str(length)
        status = 206 if span is not None else 200
        if request.method == "HEAD":
            return Response(status_code=status, media_type=media, headers=headers)
        client = client_address(request)
        refused = streams.take(client)
        if refused is not None:
            raise HTTPException(
                503,
                f"{refused}: retry in {BUSY_RETRY_AFTER_S} s",
                {"Retry-After": str(BUSY_RETRY_AFTER_S)},
            )
        try:
            reader, data = await opened(key, path, run_id, first, length)
        except BaseException:
            streams.give(client)
            raise
        return FileStream(
            reader,
            data,
            length,
            lambda: streams.give(client),
            cfg.file_send_timeout_s,
            key,
            status_code=status,
            media_type=media,
            headers=headers,
        )

    return serve_file
