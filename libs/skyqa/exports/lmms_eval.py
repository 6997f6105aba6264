"""``skyqa export lmms-eval``: a task folder lmms-eval runs with ``--include_path <dir> --tasks
skyqa_image,skyqa_video``.

The folder holds a group per benchmark half and a task per row kind, each reading the
release's own JSONL manifest (``dataset_path: json``); ``utils.py`` loads media from the
release folder named in ``skyqa_task.json`` and scores replies with verbatim copies of skyqa's
parser and scores.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from skyqa import answers, scoring
from skyqa.errors import InvalidInput
from skyqa.exports.release import Release
from skyqa.families import DUALCOG_IMAGE, DUALCOG_VIDEO
from skyqa.families.dualcog_video.evaluation import JOINT

_UTILS = Path(__file__).with_name("lmms_eval_utils.py")
MARKER = "skyqa_task.json"  # names the release; marks a folder as an earlier export
_GENERATION = """generation_kwargs:
  max_new_tokens: 512
  temperature: 0
  do_sample: false
"""


def _task(name: str, manifest: Path, prefix: str, metrics: list[str], docs: str = "") -> str:
    lines = [
        f"task: {name}",
        "dataset_path: json",
        "dataset_kwargs:",
        "  data_files:",
        f"    test: {json.dumps(str(manifest))}",
        "test_split: test",
        "output_type: generate_until",
        f"doc_to_visual: !function utils.{prefix}_doc_to_visual",
        f"doc_to_text: !function utils.{prefix}_doc_to_text",
        'doc_to_target: "sample_id"',
        f"process_results: !function utils.{prefix}_process_results",
    ]
    if docs:
        lines.append(f"process_docs: !function utils.{docs}")
    lines.append("metric_list:")
    for m in metrics:
        lines += [f'  - metric: "{m}"', "    aggregation: mean", "    higher_is_better: true"]
    return "\n".join(lines) + "\n" + _GENERATION + "metadata:\n  - version: 1.0\n"


def write(release: Release, out: Path) -> dict[str, int]:
    """Write the task folder (replacing an earlier export there); returns the rows per task."""
    image = release.info.manifests.get(DUALCOG_IMAGE.name)
    video = release.info.manifests.get(DUALCOG_VIDEO.name)
    if image is None and video is None:
        raise InvalidInput("the release has no UAV-DualCog image or video manifest to export")
    target = release.output(out)
    if target.exists() and not target.is_dir():
        raise InvalidInput(f"--out {out} is a file; name a folder")
    if target.exists() and not (target / MARKER).is_file() and any(target.iterdir()):
        raise InvalidInput(
            f"--out {out} is a folder with other files in it; name a new or earlier export folder"
        )
    files: dict[str, bytes] = {"utils.py": _UTILS.read_bytes()}
    for module in (answers, scoring):
        name = module.__name__.rsplit(".", 1)[1]
        files[f"_skyqa_{name}.py"] = Path(str(module.__file__)).read_bytes()
    files[MARKER] = (json.dumps({"release_root": str(release.root)}, indent=1) + "\n").encode()
    counts: dict[str, int] = {}
    tasks: list[str] = []
    if image is not None:
        counts["skyqa_image"] = len(release.rows(DUALCOG_IMAGE))
        metrics = ["option_correct", "bbox_iou", "bbox_acc@50iou"]
        files["skyqa_image.yaml"] = _task("skyqa_image", release.path(image), "image", metrics).encode()
        tasks.append("skyqa_image")
    if video is not None:
        rows = release.rows(DUALCOG_VIDEO)
        path = release.path(video)
        behavior = ["set_exact", "element_f1", "temporal_f1@0.5", "temporal_mean_tiou"]
        visibility = ["count_exact", "count_within1", "segment_f1@0.5", "mean_best_tiou"]
        for name, metrics, docs, form in (
            ("skyqa_video_behavior", behavior, "behavior_docs", True),
            ("skyqa_video_visibility", visibility, "visibility_docs", False),
        ):
            counts[name] = sum(1 for r in rows if (r.form == JOINT) == form)
            files[f"{name}.yaml"] = _task(name, path, "video", metrics, docs).encode()
        files["skyqa_video.yaml"] = (
            b"group: skyqa_video\ntask:\n  - skyqa_video_behavior\n  - skyqa_video_visibility\n"
        )
        tasks.append("skyqa_video")
    files["skyqa.yaml"] = ("group: skyqa\ntask:\n" + "".join(f"  - {t}\n" for t in tasks)).encode()
    _replace_folder(target, files, out)
    return counts


def _replace_folder(target: Path, files: dict[str, bytes], out: Path) -> None:
    """Write the folder beside its place, then swap it in: a failed export leaves the earlier
    one whole, and no file of an earlier export survives a new one."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    except OSError as exc:
        raise InvalidInput(f"cannot write {out}: {exc.strerror}") from None
