"""The words the navigation questions use for actions, reasons and positions: one vocabulary
for every option of a kind, so no option stands out by its wording.

Options of one row must be alike in form and length (a text-only solver picks the one option
that starts differently, or the longest): every label of a kind has the same grammar ("to ..."
for a reason, a past verb for what was done, an imperative for a command) and lengths within
a factor 1.5 of each other where the kind's labels are fixed.
"""

from __future__ import annotations

# every two labels of a set stay under the 0.85 option similarity every family's QC enforces
PAST = {
    "fly_forward": "flew forward",
    "ascend": "flew upward",
    "descend": "flew downward",
    "turn_left": "turned left",
    "turn_right": "turned right",
    "rotate_camera_up": "looked upward",
    "rotate_camera_down": "looked downward",
    "hover": "hovered in place",
}
COMMAND = {
    "fly_forward": "Fly forward",
    "ascend": "Fly upward",
    "descend": "Fly downward",
    "turn_left": "Rotate left",
    "turn_right": "Rotate right",
    "rotate_camera_up": "Tilt view up",
    "rotate_camera_down": "Tilt view down",
    "hover": "Hover still",
}
QUADRANTS = ("ahead on the left", "ahead on the right", "behind on the left", "behind on the right")
IN_VIEW = ("not in view", "on the left", "in the middle", "on the right")
LAYOUT = ("in front of it", "behind it", "to its left", "to its right")
PROXIMITY = ("closer", "farther away", "about as far as before", "closer, then farther again")
LONGER = ("the first one", "the second one", "the same, roughly")
COUNTERFACTUAL = ("yes, that way is clear too", "no, that way is blocked")
# the next step of a plan, naming no landmark: an option that named the goal (which the
# question's instruction names) beside options naming obstacles would single one out
PLAN = {
    "face_landmark": "turn to face its next landmark",
    "look_at_landmark": "tilt the camera to its next landmark",
    "approach_landmark": "fly straight to its next landmark",
    "avoid_obstacle": "fly around the obstacle ahead",
    "clear_obstacle": "climb over the obstacle ahead",
    "pass_obstacle": "keep flying over the obstacle",  # nosec B105: a plan step, not a password
    "descend_after_obstacle": "come back down past the obstacle",
    "match_goal_height": "change height to match the goal",
    "arrive": "stop here, the goal is reached",
}
# why a segment was flown, naming no landmark (the question names none either): turning to
# the next landmark and flying to it are one reason, as for one landmark each fits the other
WHY = {
    "face_landmark": "to head for its next landmark",
    "approach_landmark": "to head for its next landmark",
    "look_at_landmark": "to keep its next landmark in view",
    "avoid_obstacle": "to get around an obstacle in its way",
    "clear_obstacle": "to climb above an obstacle in its way",
    "pass_obstacle": "to cross an obstacle it had climbed above",  # nosec B105: a reason, not a password
    "descend_after_obstacle": "to come back down past an obstacle",
    "match_goal_height": "to reach the height of its goal",
    "arrive": "to stop, as it had reached its goal",
}
WHY_LABELS = tuple(dict.fromkeys(WHY.values()))


def obstacle(name: str) -> str:
    return f"the {name}" if name else "a structure"


def plan_text(reason: str) -> str:
    """The next step of a plan, in words."""
    return PLAN[reason]


def route_steps(instruction: str) -> list[str]:
    """A route instruction's steps, all lower case (a capital on the first alone would mark it)."""
    steps = [s.strip().rstrip(".") for s in instruction.replace(", and stop there.", "").split(", then ")]
    return [s[:1].lower() + s[1:] for s in steps]


def route_done(last: str) -> str:
    """The progress option after the last step: it names the last landmark and repeats the
    instruction's "stop there", as every step option repeats the instruction's words."""
    return f"stop there, at the {last}"


def seconds(frame: int, fps: float) -> str:
    return f"{frame / fps:.1f} s"
