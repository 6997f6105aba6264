"""Prompts and the JSON answer contract per task (UAV-DualCog ``uav_dualcog_prompts.yaml``).

Every prompt asks for exactly one JSON object; the schema is part of the system prompt so a
model and a parser agree on it.
"""

from __future__ import annotations

IMAGE_SYSTEM = (
    "[TASK] You are a UAV agent reasoning about a landmark from aerial images.\n"
    "[OUTPUT] Return exactly one JSON object and nothing else (no markdown). Use only a listed "
    "option_id. The bounding box is normalized [x1, y1, x2, y2] in [0, 1] on the image named in "
    'the question. Schema: {"answer_option_id": "A", "bbox_xyxy_norm": [0.1, 0.2, 0.3, 0.4]}'
)
JOINT_SYSTEM = (
    "[TASK] You are a UAV agent; identify the flight actions you performed in your first-person "
    "video and when.\n[OUTPUT] Return exactly one JSON object and nothing else (no markdown). Use "
    'only listed option_ids. Schema: {"answers": [{"option_id": "A", "intervals_sec": [[0.0, 1.2]]}]}'
)
VISIBILITY_SYSTEM = (
    "[TASK] You are a UAV agent watching your first-person flight video.\n[OUTPUT] Return exactly "
    "one JSON object and nothing else (no markdown). Intervals are [start, end] seconds. Schema: "
    '{"visible_count": 2, "visible_intervals_sec": [[0.0, 9.1], [17.7, 26.8]]}'
)

REFERENCE = "Image 1 shows the {ref} facade of {desc} in the landmark-centric coordinate frame. "
# the question alone, which frameworks with their own answer instruction ask (VLMEvalKit)
QUESTION = {
    "self_where": REFERENCE
    + "Based on that reference, what is your position relative to the landmark in image 2?",
    "self_what": REFERENCE + "Which candidate image is the resulting future view after taking {behavior}?",
    "env_where": REFERENCE
    + "In image 2, what is this landmark's position relative to your forward direction?",
    "env_how": REFERENCE + "In image 2, which move brings this landmark to the centre of your view?",
}
_BOX = "Select one option and return the normalized bounding box of the landmark in {image}."
USER = {
    task: f"{q} {_BOX.format(image='the selected image' if task == 'self_what' else 'image 2')}"
    for task, q in QUESTION.items()
}
# UAV-DualCog asks atomic missions to "Select one option" and composite ones "one or more"; the
# wording alone then tells how many golds there are, so every row asks for one or more
JOINT_USER = (
    "The image shows {desc}. Which of the following actions have you performed around this "
    "landmark in your first-person flight video? Select one or more options and give the time "
    "intervals in seconds when each happened. Options:\n\n{options}"
)
VISIBILITY_USER = (
    "The image shows {desc}. How many times does this landmark appear in your first-person "
    "flight video? Return the full visible time intervals in seconds."
)
DISPLAY = {
    "self_where": "Landmark-Relative Position Reasoning",
    "self_what": "Future Observation Prediction",
    "env_where": "Self-Relative Position Reasoning",
    "env_how": "Landmark-Driven Action Decision",
    "self_instance_recognition_joint": "Flight Behavior Recognition and Temporal Localization",
    "env_visibility_reasoning": "Landmark Visibility Counting and Interval Reasoning",
}


def options_text(options: list[tuple[str, str]]) -> str:
    return "\n".join(f"{oid}. {label}" for oid, label in options)


def image_question(task: str, ref: str, desc: str, behavior: str = "") -> str:
    return QUESTION[task].format(ref=ref, desc=desc, behavior=behavior)


def image_prompt(task: str, ref: str, desc: str, options: list[tuple[str, str]], behavior: str = "") -> str:
    user = USER[task].format(ref=ref, desc=desc, behavior=behavior)
    return f"{user}\nOptions:\n{options_text(options)}"
