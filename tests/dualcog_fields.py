"""The fields UAV-DualCog's loaders and metric code read from its manifests' samples.

Written down from reading the reference implementation (public repository
SmartDianLab/UAV-DualCog, ``stage4_qa_generate_and_eval.py`` and ``stage3_task_suite.py``): the
keys its experiment runner indexes without a default (a missing one aborts the whole run) and
those it reads with a default that its web, prompts or label rebuilding use.
"""

from __future__ import annotations

import re

# stage 4: read as sample[key] by the request builder, parser and scorer
IMAGE_REQUIRED = {
    "sample_id", "scene_id", "engine", "view_definition", "task_type", "difficulty",
    "answer_option_id", "answer_bbox_xyxy_norm", "prompt_text", "reference_image_with_bbox",
    "target_image", "label_options",
}  # fmt: skip
# stage 4: read with .get and used (web, overlays, metadata); absent ones render blank
IMAGE_READ = {
    "answer_option_ids", "system_prompt", "landmark_description", "reference_object_view",
    "behavior_instance", "candidates", "landmark_id", "landmark_category", "user_prompt",
    "reference_image", "reference_bbox_xyxy_norm", "reference_view", "task_group", "task_family",
}  # fmt: skip
# stage 3: read as sample[key] by the runner's request and error paths
VIDEO_REQUIRED = {
    "sample_id", "scene_id", "engine", "mode", "landmark_category", "difficulty_band", "form",
    "visible_count", "visible_intervals_sec",
}  # fmt: skip
VIDEO_READ = {
    "task_name", "task_group", "choice_options", "answer_items", "answer_option_ids",
    "video_web_path", "video_path", "reference_image_with_bbox", "landmark_ids",
    "landmark_description", "set_id", "set_instance", "include_temporal_localization",
    "set_name", "fps", "frame_count",
}  # fmt: skip
# the reference's fallback that tells a composite option from an atomic one
COMPOSITE_WORDS = re.compile(r"inspection|survey|mission|multi-landmark|surface mapping", re.I)
