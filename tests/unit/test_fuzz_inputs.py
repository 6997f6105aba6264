"""Fuzzing the entry points of untrusted input: scan requests as JSON (the gateway) and as
protobuf bytes (the bus). Only clean 4xx answers or InvalidInput may come out."""

from __future__ import annotations

import json
from typing import Any

from fastapi import HTTPException
from fuzz_strategies import requests
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings, strategies as st
from skyqa import scan
from skyqa.errors import InvalidInput
from skyqa.settings import Settings
from skyqa.v1 import scan_pb2

from services.gateway.api import parse_scan


def check_json(raw: bytes) -> None:
    try:
        req = parse_scan(raw, Settings())
    except HTTPException as exc:
        refused = exc
    else:
        scan.validate(req)  # what the gateway accepts, capture accepts too
        return
    assert refused.status_code in (400, 413, 422) and refused.detail


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests)
def test_scan_json_gets_a_clean_answer(doc: dict[str, Any]) -> None:
    check_json(json.dumps(doc, allow_nan=True).encode())


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_as_json_get_a_clean_answer(raw: bytes) -> None:
    check_json(raw)


valid = scan.apply_defaults(scan_pb2.ScanRequest(scene_id="tiny_town")).SerializeToString()


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=300),
        st.builds(lambda i, b: valid[:i] + b + valid[i:], st.integers(0, len(valid)), st.binary(max_size=12)),
    )
)
def test_scan_bytes_decode_and_validate_cleanly(raw: bytes) -> None:
    """What capture does with a message: decode (the bus turns DecodeError into InvalidInput),
    apply the profile defaults and validate. Anything else escaping would be a crash."""
    try:
        req = scan_pb2.ScanRequest.FromString(raw)
    except DecodeError:
        return
    try:
        full = scan.apply_defaults(req)
        full.run_id = full.run_id or scan.run_id_for(full)
        scan.validate(full)
    except InvalidInput:
        return
