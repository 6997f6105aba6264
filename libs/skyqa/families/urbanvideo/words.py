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
# the source's seven control actions (its Action Generation options: rise, descend, fly forward,
# turn left, turn right, rotate the camera up, down); it has no hover
SOURCE_COMMANDS = tuple(v for k, v in COMMAND.items() if k != "hover")
# eight directions, counter-clockwise from straight ahead (45 degrees each), as the source's
# options tell "left side", "lower right corner" and the like apart
DIRECTIONS = (
    "straight ahead",
    "ahead on the left",
    "to the left",
    "behind on the left",
    "straight behind",
    "behind on the right",
    "to the right",
    "ahead on the right",
)
QUADRANTS = DIRECTIONS  # where a landmark is from the drone now
LAYOUT = DIRECTIONS  # where a landmark lies from the flight's start, facing its first heading
# where in the image: not there, or one fifth of its width
IN_VIEW = ("not in view", "at the far left", "left of centre", "in the centre", "right of centre",
           "at the far right")  # fmt: skip
PROXIMITY = ("closer", "farther away", "about as far as before", "closer, then farther again")
LONGER = ("the first one", "the second one", "the same, roughly")
# the source's counterfactual answers: whether the other way would still reach the landmark,
# and how it compares ("it can complete the mission, but it will take longer")
COUNTERFACTUAL = (
    "It could still have got there, in about the same time.",
    "It could still have got there, but it would have taken longer.",
    "It could not have got there that way: the way is blocked.",
)
ABOUT_AS_LONG = 1.15  # a way within this factor of the flown one's time is about as quick


def direction(rel_deg: float, margin: float) -> str | None:
    """The :data:`DIRECTIONS` label of a bearing relative to the heading (counter-clockwise,
    degrees), or None within ``margin`` of a sector's edge (a person could say either)."""
    k = round((rel_deg % 360.0) / 45.0) % 8
    off = abs((rel_deg - 45.0 * k + 180.0) % 360.0 - 180.0)
    return DIRECTIONS[k] if off <= 22.5 - margin else None


def fifth(cx: float) -> str:
    """The :data:`IN_VIEW` label of a horizontal image position (0 left .. 1 right)."""
    return IN_VIEW[1 + min(int(cx * 5), 4)]


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
# why a move was made, naming the landmark it was about, as the source's reasons do ("the drone
# rises to avoid hitting the roof of the building"): one form per reason, so a row's options
# share it and differ only in the landmark (which the video must tell)
BECAUSE = {
    "face_landmark": "to face the {}",
    "look_at_landmark": "to keep the {} in view",
    "approach_landmark": "to reach the {}",
    "avoid_obstacle": "to get around the {}",
    "clear_obstacle": "to get above the {}",
    "pass_obstacle": "to cross over the {}",  # nosec B105: a reason, not a password
    "descend_after_obstacle": "to come back down past the {}",
    "match_goal_height": "to reach the height of the {}",
    "arrive": "to stop at the {}",
}
# a move asked about, as a verb after "Why did the drone"
VERB = {
    "fly_forward": "fly forward",
    "ascend": "fly upward",
    "descend": "fly downward",
    "turn_left": "turn left",
    "turn_right": "turn right",
    "rotate_camera_up": "tilt its camera up",
    "rotate_camera_down": "tilt its camera down",
    "hover": "hover in place",
}
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")


def because(reason: str, name: str) -> str:
    """Why a move was made, naming the landmark it was about."""
    return BECAUSE[reason].format(name)


def asked_move(action: str, ordinal: int) -> str:
    """A move named by its action and how many times the drone had made it ("fly upward the
    second time it did so"): a person counts the moves in the video; no time is named."""
    return f"{VERB[action]} the {ORDINALS[ordinal]} time it did so"


# what a segment did, in words naming the landmark it was about (never its time): how the
# source names a moment ("after the drone crosses the second intersection"). Keyed by reason,
# then filled with the direction and the landmark; "{what}" is the leg's landmark for a
# landmark reason, the structure in the way for an obstacle's.
EVENT = {
    "face_landmark": "turned {way} to face the {what}",
    "avoid_obstacle": "swung {way} to get around the {what}",
    "look_at_landmark": "tilted its camera {way} toward the {what}",
    "clear_obstacle": "climbed to get above the {what}",
    "pass_obstacle": "flew on over the {what}",  # nosec B105: an event, not a password
    "descend_after_obstacle": "came back down past the {what}",
    "match_goal_height": "{way} to the height of the {what}",
    "approach_landmark": "flew forward toward the {what}",
    "arrive": "hovered in place at the {what}",
}
_WAY = {"turn_left": "left", "turn_right": "right", "rotate_camera_up": "up", "rotate_camera_down": "down",
        "ascend": "climbed", "descend": "came down"}  # fmt: skip
ACTIONS = tuple(COMMAND)
OBSTACLE_REASONS = frozenset({"clear_obstacle", "pass_obstacle", "descend_after_obstacle"})


def event(reason: str, action: str, what: str) -> str:
    """A segment in words: ``reason`` and ``action`` as the plan gives them, ``what`` the
    description of the landmark it was about (the leg's, or the one in its way)."""
    way = _WAY.get(action, "")
    if reason == "avoid_obstacle" and action == "fly_forward":
        return f"flew around the {what}"
    return EVENT[reason].format(way=way, what=what)


def obstacle(name: str) -> str:
    """The structure in a leg's way; callers ask nothing when it has no description of its own
    ("a structure" names nothing a person could point at)."""
    if not name:
        raise ValueError("an obstacle without a description is not named in a question")
    return f"the {name}"


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
