"""``skyqa export vlmevalkit``: the image family's rows as VLMEvalKit's native MCQ TSV, with
every image embedded so the file loads from any working directory."""

from __future__ import annotations

import base64
import io
from pathlib import Path

from PIL import Image

from skyqa.errors import InvalidInput
from skyqa.exports.release import Release
from skyqa.families import DUALCOG_IMAGE
from skyqa.families.dualcog_image.export import vlmevalkit_tsv


def image_b64(path: Path, max_side: int) -> str:
    """The file as base64; with ``max_side``, a larger image is downscaled and re-encoded as
    JPEG (quality 90) first, which VLMEvalKit-size files need at 4096x3072."""
    data = path.read_bytes()
    if max_side:
        try:
            with Image.open(io.BytesIO(data)) as img:
                if max(img.size) > max_side:
                    img.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
                    buf = io.BytesIO()
                    img.convert("RGB").save(buf, "JPEG", quality=90)
                    data = buf.getvalue()
        except (OSError, Image.DecompressionBombError):
            raise InvalidInput(f"{path.name} is not a readable image") from None
    return base64.b64encode(data).decode()


def write(release: Release, out: Path, max_side: int) -> int:
    target = release.output(out)
    if target.is_dir():
        raise InvalidInput(f"--out {out} is a folder; name the .tsv file to write")
    rows = release.rows(DUALCOG_IMAGE)
    if not rows:
        raise InvalidInput("the release has no image rows to export")
    tsv = vlmevalkit_tsv(rows, lambda rel: image_b64(release.path(rel), max_side))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_bytes(tsv)
        tmp.replace(target)  # a reader never sees half a file
    except OSError as exc:
        raise InvalidInput(f"cannot write {out}: {exc.strerror}") from None
    return len(rows)
