"""The words the navigation questions use for actions, reasons and positions: one vocabulary
for every option of a kind, so no option stands out by its wording."""

from __future__ import annotations

# every two labels of a set stay under the 0.85 option similarity every family's QC enforces
PAST = {
    "fly_forward": "flew forward",
    "ascend": "climbed",
    "descend": "descended",
    "turn_left": "turned left",
    "turn_right": "turned right",
    "rotate_camera_up": "looked up",
    "rotate_camera_down": "looked down",
    "hover": "hovered in place",
}
COMMAND = {
    "fly_forward": "Fly forward",
    "ascend": "Ascend",
    "descend": "Descend",
    "turn_left": "Turn left",
    "turn_right": "Turn right",
    "rotate_camera_up": "Rotate camera up",
    "rotate_camera_down": "Rotate camera down",
    "hover": "Hover in place",
}
QUADRANTS = ("ahead on the left", "ahead on the right", "behind on the left", "behind on the right")
IN_VIEW = ("not in view", "on the left", "in the middle", "on the right")
LAYOUT = ("in front of it", "behind it", "to its left", "to its right")
PROXIMITY = ("closer", "farther away", "about as far as before", "closer, then farther again")
LONGER = ("the first one", "the second one", "both took about as long")
COUNTERFACTUAL = ("yes, that way is clear too", "no, that way is blocked")


def obstacle(name: str) -> str:
    return f"the {name}" if name else "a structure"


def reason_text(reason: str, landmark: str, blocker: str, part: str) -> str:
    """Why a segment was flown, in words (``landmark``: the leg's landmark name)."""
    return {
        "face_landmark": f"to face the {landmark}, where it was heading",
        "look_at_landmark": f"to bring the {landmark} into view",
        "avoid_obstacle": f"to fly around {obstacle(blocker)} in its way",
        "clear_obstacle": f"to climb over {obstacle(blocker)} in its way",
        "pass_obstacle": f"to pass over {obstacle(blocker)} in its way",
        "descend_after_obstacle": f"to come back down after passing {obstacle(blocker)}",
        "approach_landmark": f"to approach the {landmark}",
        "match_goal_height": f"to reach the height of the {landmark}'s {part if part != 'whole' else 'top'}",
        "arrive": f"it had arrived at the {landmark}",
    }[reason]


def plan_text(reason: str, landmark: str, blocker: str, part: str) -> str:
    """The next step of a plan, in words."""
    return {
        "face_landmark": f"turn to face the {landmark}",
        "look_at_landmark": f"tilt the camera to look at the {landmark}",
        "avoid_obstacle": f"fly around {obstacle(blocker)} ahead",
        "clear_obstacle": f"climb over {obstacle(blocker)} ahead",
        "pass_obstacle": f"keep flying over {obstacle(blocker)}",
        "descend_after_obstacle": f"come back down behind {obstacle(blocker)}",
        "approach_landmark": f"fly straight to the {landmark}",
        "match_goal_height": f"change height to the {landmark}'s {part if part != 'whole' else 'top'}",
        "arrive": "stop: the goal is reached",
    }[reason]


def route_steps(instruction: str) -> list[str]:
    """A route instruction's steps, all lower case (a capital on the first alone would mark it)."""
    steps = [s.strip().rstrip(".") for s in instruction.replace(", and stop there.", "").split(", then ")]
    return [s[:1].lower() + s[1:] for s in steps]


def seconds(frame: int, fps: float) -> str:
    return f"{frame / fps:.1f} s"
