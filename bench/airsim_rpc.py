"""AirSim RPC image throughput: ``skyqa sim serve`` answering ``simGetImages`` (Scene, DepthPlanar
as floats, Segmentation) to the pinned Cosys-AirSim client, against the built-in renderer making
the same frame directly, timed in turn in one run. The ratio is what the RPC keeps of the render
rate; AirSim on a GPU through Python gives about 1-10 frames/s at 720p or less.

The client turns the float depth image into a Python list, one float object per pixel, which
no server can avoid; the same response's decode is timed here too, and the ratio without it is
what the server and the wire keep.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
from skyqa.sim import BuiltinSimulator, CameraSpec, load_scene
from skyqa.sim.airsim_api import AirSimApi
from skyqa.sim.airsim_settings import load_settings
from skyqa.sim.airsim_wire import enu_pose, quat_matrix
from skyqa.sim.rpc_server import pack

SCENE = "demo_city"
YAW, PITCH = 0.6, -0.5


def _settings(width: int, height: int) -> dict[str, Any]:
    capture = {"ImageType": 0, "Width": width, "Height": height, "FOV_Degrees": 72}
    return {"CameraDefaults": {"CaptureSettings": [capture]}, "Vehicles": {"drone_1": {}}}


def airsim_rpc_throughput(sizes: tuple[tuple[int, int], ...] = ((640, 480), (1440, 1080))) -> dict[str, Any]:
    import cosysairsim as airsim

    sim = BuiltinSimulator(load_scene(SCENE))
    out: dict[str, Any] = {}
    for width, height in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            settings = Path(tmp) / "settings.json"
            settings.write_text(json.dumps(_settings(width, height)))
            proc = subprocess.Popen(
                [sys.executable, "-m", "services.cli", "sim", "serve", "--scene", SCENE, "--port", "0",
                 "--settings", str(settings)],
                stdout=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            try:
                assert proc.stdout is not None
                port = int(re.findall(r":(\d+)", proc.stdout.readline())[-1])
                client = airsim.MultirotorClient(ip="127.0.0.1", port=port, timeout_value=120)
                q = airsim.euler_to_quaternion(0.0, PITCH, YAW)
                client.simSetVehiclePose(airsim.Pose(airsim.Vector3r(-60.0, 40.0, -45.0), q), True, "drone_1")
                requests = [
                    airsim.ImageRequest("0", airsim.ImageType.Scene, False, False),
                    airsim.ImageRequest("0", airsim.ImageType.DepthPlanar, True, False),
                    airsim.ImageRequest("0", airsim.ImageType.Segmentation, False, False),
                ]
                pose = enu_pose(
                    np.array([-60.0, 40.0, -45.0]), quat_matrix((q.w_val, q.x_val, q.y_val, q.z_val))
                )
                cam = CameraSpec(width, height, 72.0)
                wire = _response(sim, settings, client.simGetVehiclePose("drone_1"), requests)
                rpc_s = direct_s = decode_s = float("inf")
                client.simGetImages(requests, "drone_1")  # warm the server's kernels
                for _ in range(3):
                    t = time.perf_counter()
                    client.simGetImages(requests, "drone_1")
                    rpc_s = min(rpc_s, time.perf_counter() - t)
                    t = time.perf_counter()
                    sim.render(pose, cam)
                    direct_s = min(direct_s, time.perf_counter() - t)
                    t = time.perf_counter()
                    msgpack.unpackb(wire)  # as the client's msgpack-rpc session does
                    decode_s = min(decode_s, time.perf_counter() - t)
            finally:
                proc.terminate()
                proc.wait(timeout=20)
        out[f"{width}x{height}"] = {
            "rpc_frames_per_s": 1 / rpc_s,
            "direct_frames_per_s": 1 / direct_s,
            "ratio_of_direct": direct_s / rpc_s,
            "client_decode_s": decode_s,
            "ratio_without_client_decode": direct_s / max(rpc_s - decode_s, direct_s),
        }
    return out


def _response(sim: BuiltinSimulator, settings: Path, pose: Any, requests: list[Any]) -> bytes:
    """The bytes of the server's answer to ``requests`` at ``pose``, made in this process."""
    api = AirSimApi(sim, sim.scene, load_settings(settings))

    def wire(obj: Any) -> Any:  # a client object as the server receives it
        return msgpack.unpackb(msgpack.packb(obj, default=lambda o: o.to_msgpack()))

    api.set_vehicle_pose(wire(pose), True, "drone_1")
    images = api.get_images(wire(requests), "drone_1")
    return b"".join(pack([1, 0, None, images], msgpack.Packer(use_bin_type=True), []))


if __name__ == "__main__":
    print(json.dumps(airsim_rpc_throughput(), indent=1))
