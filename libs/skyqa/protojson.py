"""Protobuf messages as JSON files of a release, with every field written.

proto3 leaves a scalar out of its JSON when it holds the default value, so a pose at yaw 0 has
no ``yawDeg`` and a reader indexing it fails. Files a release ships are read by other tools, so
every field of the schema is written, zero or not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from skyqa.v1 import common_pb2


def to_dict(msg: Message, *, proto_names: bool = False) -> dict[str, Any]:
    return json_format.MessageToDict(
        msg, always_print_fields_with_no_presence=True, preserving_proto_field_name=proto_names
    )


def to_json(msg: Message, *, indent: int | None = None) -> bytes:
    return json_format.MessageToJson(
        msg, always_print_fields_with_no_presence=True, sort_keys=True, indent=indent
    ).encode()


def pose_message(six: Sequence[float]) -> common_pb2.Pose:
    """A pose recorded as ``[x, y, z, yaw, pitch, roll]`` (metres, degrees), as render jobs carry it."""
    x, y, z, yaw, pitch, roll = six
    return common_pb2.Pose(x=x, y=y, z=z, yaw_deg=yaw, pitch_deg=pitch, roll_deg=roll)
