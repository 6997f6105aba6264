"""``skyqa export dualcog``: a release laid into a checkout of UAV-DualCog (SmartDianLab/UAV-DualCog)
where its own Stage 3 and Stage 4 runners look, so they run on it unchanged.

What the reference reads, from its code:

- ``configs/uav_dualcog/task_<engine>_<scene>.yaml``: the scene's config (``task_pipeline.py``
  finds it by this name); its ``task_pipeline`` section makes both stages read and write under
  ``task_pipeline_data/<task>/<engine>_<scene>/``.
- ``.../image_tasks/manifests/<scene>.latest_manifest.json`` (Stage 4) and
  ``.../video_tasks/datasets/<scene>.latest_manifest.json`` (Stage 3), and the
  ``<scene>_qa_manifest_*.json`` / ``<scene>_*.json`` names its manifest listings glob.
- Media by the paths the manifests name: Stage 4 opens ``<checkout root>/<path>``, Stage 3
  ``<working directory>/<path>``. The release's manifests name paths relative to the release, so
  the manifests written here name them relative to the checkout (run from its root).
- ``scene_data/<scene>/landmarks_review/<scene>.valid_instances.json`` under the config's
  ``task.base_dir`` and the mission bundles under ``video_tasks/missions/``, whose own paths are
  relative to their folders.

The release's ``image_tasks/``, ``video_tasks/`` and ``scene_data/`` are laid under
``task_pipeline_data/skyqa/<engine>_<scene>/``: media linked (or copied with ``copy=True``), text
files copied, because the reference writes beside what it reads and a write through a link would
change the release. ``skyqa_export.json`` there names the release and every file written, so a
later export replaces exactly those and leaves the reference's own outputs (experiments, reports)
alone.

A release is untrusted input and the reference opens what its manifests name (Stage 4 sends the
images to a model endpoint), so nothing is written unless the release verifies against its
``SHA256SUMS``, its scene and engine are ids, every media path of its manifests and
``valid_instances.json`` is a file of the release the export lays, and no media path of its other
JSON files (mission bundles, relative to their folders) is absolute or climbs with ``..``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from skyqa import integrity, keys
from skyqa.errors import InvalidInput
from skyqa.exports.release import Release
from skyqa.families import DUALCOG_IMAGE, DUALCOG_VIDEO

TASK = "skyqa"  # the reference's task-pipeline name the export lives under
MARKER = "skyqa_export.json"
CONFIG_TAG = "# written by skyqa export dualcog"
LAID = ("image_tasks", "video_tasks", "scene_data")  # the release folders the reference reads
TEXT = (".json", ".jsonl", ".yaml", ".yml", ".csv", ".txt", ".md")
# the fields that name a file (by how their names end): ``reference_image_with_bbox``,
# ``target_image``, ``images``, ``candidates[].image``, ``video_path``, ``video_web_path``,
# ``rgb_views[].path``, ``segmentation_path``, ``source_instances_json``, ``decision_file``, ...
PATH_FIELDS = ("path", "paths", "image", "images", "_with_bbox", "video", "videos", "_json", "_file")
# what marks a folder as a checkout of the reference: the two runners the export is for
RUNNERS = ("scripts/uav_dualcog/stage4_qa_generate_and_eval.py", "scripts/uav_dualcog/stage3_task_suite.py")


@dataclass(frozen=True)
class Layout:
    """Where the export puts a release, relative to the checkout."""

    scene: str
    engine: str

    @property
    def root(self) -> str:
        return f"task_pipeline_data/{TASK}/{self.engine.lower()}_{self.scene}"

    @property
    def config(self) -> str:
        return f"configs/uav_dualcog/task_{self.engine.lower()}_{self.scene}.yaml"

    def image_manifests(self) -> list[str]:
        d = f"{self.root}/image_tasks/manifests"
        return [f"{d}/{self.scene}.latest_manifest.json", f"{d}/{self.scene}_qa_manifest_release.json"]

    def video_manifests(self) -> list[str]:
        d = f"{self.root}/video_tasks/datasets"
        return [f"{d}/{self.scene}.latest_manifest.json", f"{d}/{self.scene}_release.json"]


def layout_of(release: Release) -> Layout:
    engines = {r.engine for fam in (DUALCOG_IMAGE, DUALCOG_VIDEO) for r in release.rows(fam)}
    if not engines:
        raise InvalidInput("the release has no UAV-DualCog image or video rows to export")
    if len(engines) > 1:
        raise InvalidInput(f"the release's rows name more than one engine: {sorted(engines)}")
    engine = engines.pop()
    # both become folder and file names and values of the config the reference reads
    keys.validate_id(release.info.scene_id, "the release's scene id")
    keys.validate_id(engine, "the release's engine")
    return Layout(release.info.scene_id, engine)


def config_yaml(lay: Layout) -> str:
    # task.base_dir and task_pipeline.root_dir are relative: the reference resolves them against
    # the working directory or its checkout root, so the checkout can move
    config = {
        "task": {
            "name": f"skyqa-{lay.scene}",
            "engine": lay.engine.lower(),
            "scene_id": lay.scene,
            "base_dir": f"{lay.root}/scene_data",
            "scene_dir_name": lay.scene,
        },
        "task_pipeline": {"task_name": TASK, "root_dir": "task_pipeline_data"},
        "output_layout": {
            "stage2_raw_dir": "landmarks_raw",
            "stage2_review_dir": "landmarks_review",
            "stage3_task_root_dir": "video_tasks",
            "stage4_qa_dir": "image_tasks",
            "stage3_mission_dir": "missions",
            "stage3_dataset_dir": "datasets",
        },
    }
    header = f"{CONFIG_TAG}; `skyqa export dualcog` replaces this file, delete this line to keep it\n"
    return header + yaml.safe_dump(config, sort_keys=False, default_flow_style=False)


def rebased(doc: Any, prefix: str, files: frozenset[str]) -> Any:
    """``doc`` with every string that names a file of the release prefixed by ``prefix``."""
    if isinstance(doc, dict):
        return {k: rebased(v, prefix, files) for k, v in doc.items()}
    if isinstance(doc, list):
        return [rebased(v, prefix, files) for v in doc]
    if isinstance(doc, str) and doc in files:
        return f"{prefix}/{doc}"
    return doc


def _path_values(doc: Any, where: str = "", named: bool = False) -> Iterator[tuple[str, str]]:
    """(where, value) of every string of ``doc`` under a field that names a file; ``where`` is
    the field's place (``samples[3].candidates[0].image``)."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _path_values(v, f"{where}.{k}" if where else str(k), str(k).endswith(PATH_FIELDS))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _path_values(v, f"{where}[{i}]", named)
    elif named and isinstance(doc, str):
        yield where, doc


def _row_of(doc: Any, where: str) -> str:
    """``where`` with the id of the row it is in (a sample's or a landmark's), for a message."""
    top, _, rest = where.partition("]")
    name, _, index = top.partition("[")
    rows = doc.get(name) if isinstance(doc, dict) else None
    if not index.isdigit() or not isinstance(rows, list) or int(index) >= len(rows):
        return f"field {where}"
    row = rows[int(index)]
    ident = next((row[k] for k in ("sample_id", "instance_id") if isinstance(row, dict) and k in row), "")
    named = f" ({_one_line(str(ident))})" if ident else ""
    return f"row {name}[{index}]{named}, field {rest.lstrip('.') or name}"


def _one_line(text: str, limit: int = 120) -> str:
    text = text if len(text) <= limit else text[:limit] + "..."
    return text.encode("unicode_escape").decode("ascii")


def _checked(release: Release, src: str, files: frozenset[str], strict: bool) -> Any:
    """The JSON file ``src`` of the release, refused (:class:`InvalidInput`) if a field that names
    a file leaves the release: with ``strict`` (the manifests and ``valid_instances.json``, whose
    paths are release paths) any value but a file the export lays or ""; else (mission bundles,
    whose paths are relative to their folders) an absolute path or one that climbs with ``..``."""
    try:
        doc = json.loads((release.root / src).read_bytes())
    except ValueError as exc:
        raise InvalidInput(f"the release's {src} is not JSON: {_one_line(str(exc))}") from None
    for where, value in _path_values(doc):
        if strict and value and value not in files:
            why = f"not a file of the release under {', '.join(LAID)}"
        elif "\\" in value or PurePosixPath(value).is_absolute() or ".." in value.split("/"):
            why = "a path that leaves its folder (absolute, '..' or '\\')"
        else:
            continue
        raise InvalidInput(
            f"the release's {src}, {_row_of(doc, where)} names {_one_line(repr(value))}, "
            f"{why}; refusing to export it"
        )
    return doc


def _released(release: Release) -> Iterator[str]:
    """The release's files under the folders the reference reads, as release paths."""
    for top in LAID:
        base = release.root / top
        for parent, dirs, names in os.walk(base):
            dirs[:] = sorted(d for d in dirs if not (Path(parent) / d).is_symlink())
            for name in sorted(names):
                path = Path(parent) / name
                rel = path.relative_to(release.root).as_posix()
                if integrity.is_released(rel) and path.is_file() and not path.is_symlink():
                    yield rel


def write(release: Release, into: Path, copy: bool = False) -> dict[str, int]:
    """Lay the release into the checkout ``into``; returns how many files were linked, copied and
    written. Refuses (:class:`InvalidInput`) a folder that is not a checkout of the reference
    and any file in the way that an earlier export did not write."""
    checkout = into.resolve()
    if not all((checkout / r).is_file() for r in RUNNERS):
        raise InvalidInput(
            f"{into} is not a UAV-DualCog checkout (no {RUNNERS[0]}); "
            "clone https://github.com/SmartDianLab/UAV-DualCog and pass its folder"
        )
    if checkout == release.root or release.root in checkout.parents or checkout in release.root.parents:
        raise InvalidInput(f"--into {into} and the release overlap; pass a separate checkout")
    _verified(release)
    lay = layout_of(release)
    files = frozenset(_released(release))
    manifests = release_manifests(lay)
    # the release's own copies of the manifests are replaced by rebased ones
    placed = {f"{lay.root}/{rel}": rel for rel in sorted(files) if rel not in manifests}
    # release paths by the release's own word: the manifests and the landmarks they ask about
    strict = {manifests[0], manifests[2], valid_instances(lay)}
    written: dict[str, bytes] = {lay.config: config_yaml(lay).encode()}
    for src, targets in ((manifests[0], lay.image_manifests()), (manifests[2], lay.video_manifests())):
        if src not in files:
            continue
        doc = _checked(release, src, files, strict=True)
        written.update(dict.fromkeys(targets, _dump(rebased(doc, lay.root, files))))
    # the reference opens what these name from the checkout (valid_instances.json's views); a
    # mission bundle's own paths are relative to its folder and stay. All are read and checked
    # before anything is written, so a refused release leaves the checkout as it was.
    copies = {
        dst: _dump(rebased(_checked(release, src, files, strict=src in strict), lay.root, files))
        for dst, src in placed.items()
        if src.endswith(".json")
    }
    marker = f"{lay.root}/{MARKER}"
    earlier = _earlier(checkout, marker)
    ours = set(placed) | set(written) | {marker}
    _check_in_the_way(checkout, lay, ours, earlier)
    counts = {"linked": 0, "copied": 0, "written": 0}
    try:
        for rel in sorted(earlier - ours):
            (checkout / rel).unlink(missing_ok=True)
        for dst, src in placed.items():
            target = checkout / dst
            target.parent.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            if dst in copies:
                target.write_bytes(copies[dst])
                counts["copied"] += 1
            elif copy or src.endswith(TEXT):
                shutil.copyfile(release.root / src, target)
                counts["copied"] += 1
            else:
                target.symlink_to(release.root / src)
                counts["linked"] += 1
        for dst, data in written.items():
            target = checkout / dst
            target.parent.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            target.write_bytes(data)
            counts["written"] += 1
        record = {"release_root": str(release.root), "run_id": release.info.run_id, "files": sorted(ours)}
        (checkout / marker).write_text(json.dumps(record, indent=1) + "\n")
    except OSError as exc:
        raise InvalidInput(f"cannot write into {into}: {exc.strerror} ({exc.filename})") from None
    return counts


def _verified(release: Release) -> None:
    """Refuse (:class:`InvalidInput`) a release that does not match its ``SHA256SUMS``, as
    ``skyqa verify`` checks it: the export must carry what was sealed, nothing else."""
    try:
        _, problems = integrity.verify(release.root)
    except FileNotFoundError:
        raise InvalidInput(
            f"{release.root} has no {integrity.SUMS}; it is not a sealed skyqa release"
        ) from None
    except InvalidInput as exc:
        raise InvalidInput(f"{release.root} does not verify: {exc}") from None
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InvalidInput(
            f"the release does not verify: {_one_line(str(problems[0]))}{more}; "
            f"run `skyqa verify {release.root}` and export a release that does"
        )


def valid_instances(lay: Layout) -> str:
    """The release's ``valid_instances.json``, which the reference reads landmark views from."""
    return f"scene_data/{lay.scene}/landmarks_review/{lay.scene}.valid_instances.json"


def _dump(doc: Any) -> bytes:
    return (json.dumps(doc, indent=1, ensure_ascii=False) + "\n").encode()


def release_manifests(lay: Layout) -> tuple[str, str, str, str]:
    """The release's UAV-DualCog manifests (image latest and listed, video latest and listed)."""
    s = lay.scene
    return (
        f"image_tasks/manifests/{s}.latest_manifest.json",
        f"image_tasks/manifests/{s}_qa_manifest_release.json",
        f"video_tasks/datasets/{s}.latest_manifest.json",
        f"video_tasks/datasets/{s}_release.json",
    )


def _earlier(checkout: Path, marker: str) -> set[str]:
    path = checkout / marker
    if not path.exists():
        return set()
    try:
        listed = json.loads(path.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        raise InvalidInput(
            f"{marker} in the checkout is not an export record; remove it or the folder"
        ) from None
    if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
        raise InvalidInput(f"{marker} in the checkout is not an export record; remove it or the folder")
    # an untrusted record may only name files inside the export's own places
    root = marker.rsplit("/", 1)[0]
    return {p for p in listed if p.startswith((f"{root}/", "configs/")) and ".." not in p}


def _check_in_the_way(checkout: Path, lay: Layout, ours: set[str], earlier: set[str]) -> None:
    config = checkout / lay.config
    if config.exists() and not config.read_text(errors="replace").startswith(CONFIG_TAG):
        raise InvalidInput(
            f"{lay.config} exists in {checkout} and was not written by skyqa; move it away first"
        )
    for rel in sorted(ours - earlier - {lay.config}):
        path = checkout / rel
        if path.exists() or path.is_symlink():
            raise InvalidInput(
                f"{rel} exists in {checkout} and an earlier skyqa export did not write it; move it away first"
            )
