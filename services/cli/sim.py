"""``skyqa sim serve``: the built-in simulator over AirSim's RPC protocol, so AirSim client
scripts (UAV-DualCog's bridge, OpenFly's and AirCopBench's collectors) run without Unreal."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from skyqa.contracts.base import first_error
from skyqa.errors import InvalidInput

from services.cli._app import SceneOpt, app, out, settings_or_exit, user_errors

sim_app = typer.Typer(no_args_is_help=True, help="The built-in simulator as a server.")
app.add_typer(sim_app, name="sim")


@sim_app.command("serve")
def sim_serve(
    scene: SceneOpt = "demo_city",
    host: Annotated[
        str, typer.Option(help="address to listen on (loopback unless you mean it)")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="AirSim's default port is 41451; 0 picks a free one")] = 41451,
    settings_json: Annotated[
        Path | None, typer.Option("--settings", help="an AirSim settings.json: vehicles, cameras, LiDARs")
    ] = None,
    palette: Annotated[
        str,
        typer.Option(
            help="segmentation colours: ids (an id's own bytes), cosys (Cosys-AirSim's colour map), or "
            "a palette file (AirSim's seg_rgbs.txt, or an (N, 3) .npy)"
        ),
    ] = "ids",
    max_connections: Annotated[
        int | None,
        typer.Option(
            help="one more closes the connection idle longest, or is closed if every one has a call "
            "in flight [SKYQA_AIRSIM__SERVER__MAX_CONNECTIONS: 64]"
        ),
    ] = None,
    max_message_bytes: Annotated[
        int | None,
        typer.Option(help="largest request, in bytes [SKYQA_AIRSIM__SERVER__MAX_MESSAGE_BYTES: 65536]"),
    ] = None,
    max_buffered_bytes: Annotated[
        int | None,
        typer.Option(
            help="bytes all unfinished requests may hold together "
            "[SKYQA_AIRSIM__SERVER__MAX_BUFFERED_BYTES: 8 MiB]"
        ),
    ] = None,
    max_unsent_bytes: Annotated[
        int | None,
        typer.Option(
            help="bytes of answers clients have not taken, all together; past it the connection "
            "holding the most is closed [SKYQA_AIRSIM__SERVER__MAX_UNSENT_BYTES: 256 MiB]"
        ),
    ] = None,
) -> None:
    """Serve a scene over AirSim's msgpack-rpc API until Ctrl-C."""
    from skyqa.settings import AirSimServerSettings
    from skyqa.sim.airsim_api import AirSimApi, ApiError, WireError
    from skyqa.sim.airsim_palette import load_palette
    from skyqa.sim.airsim_settings import load_settings
    from skyqa.sim.registry import open_simulator
    from skyqa.sim.rpc_server import Limits, RpcServer

    settings = settings_or_exit()
    with user_errors():
        if not 0 <= port <= 65535:
            raise InvalidInput(f"--port must be 0..65535, got {port}")
        given = {
            "max_connections": max_connections,
            "max_message_bytes": max_message_bytes,
            "max_buffered_bytes": max_buffered_bytes,
            "max_unsent_bytes": max_unsent_bytes,
        }
        # the options go through the settings' own bounds, so --max-connections 0 is refused too
        merged = settings.airsim.server.model_dump() | {k: v for k, v in given.items() if v is not None}
        try:
            limits = Limits(**AirSimServerSettings.model_validate(merged).model_dump())
        except ValidationError as exc:
            where, msg = first_error(exc)
            raise InvalidInput(f"--{where.replace('_', '-')}: {msg}") from None
        config = load_settings(settings_json)
        colours = load_palette(palette)
        sim = open_simulator("builtin", scene, settings.scenes_dir)
        api = AirSimApi(sim, sim.scene, config, colours)  # type: ignore[attr-defined]

    async def main() -> None:
        server = RpcServer(api.methods(), (ApiError, WireError, InvalidInput), limits)
        bound = await server.start(host, port)
        out.print(f"serving {scene} over AirSim's RPC protocol on {host}:{bound}", highlight=False)
        await server.serve_forever()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
