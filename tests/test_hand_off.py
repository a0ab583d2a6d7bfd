"""What the main step hands its post step (`core/hand_off.py`): the keys, how each value is written
and read back, and that no other module knows a key.

The keys and the form of each value are a contract with older versions of the action: a post
step reads what the main step of its own run saved, which may be an older version's.
"""

from __future__ import annotations

import ast
import functools
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from runner_queue_fallback.core import hand_off
from runner_queue_fallback.core.hand_off import STATE_ENV, HandOff
from runner_queue_fallback.core.input_names import COORDINATOR_INPUTS, GUARD_INPUTS

PACKAGE = Path(hand_off.__file__).resolve().parent.parent
HOME = Path(hand_off.__file__).resolve()
#: Every key, spelled out: a change to one breaks the post step of a run started before it.
KEYS = (
    "request-id",
    "child-run-id",
    "child-request-id",
    "child-run-url",
    "refused-request-id",
    "dispatched-at",
    "api-version",
    "child-over",
    "child-job-url",
    "child-found-by-name",
    "child-copies",
)
AT = datetime(2026, 3, 10, 12, 0, 5, tzinfo=UTC)


class StateFile:
    """The saves, in order (the runner keeps the last value of each key)."""

    def __init__(self) -> None:
        self.saved: list[tuple[str, str]] = []

    def save_state(self, name: str, value: str) -> None:
        self.saved.append((name, value))


def test_the_post_step_reads_every_key_from_its_state_variable():
    assert tuple(f"STATE_{key}" for key in KEYS) == STATE_ENV


@pytest.mark.parametrize(
    ("save", "lines"),
    [
        (
            lambda f: hand_off.save_dispatch(f, "rqf-1", AT, "2026-03-10"),
            [
                ("request-id", "rqf-1"),
                ("dispatched-at", "2026-03-10T12:00:05+00:00"),
                ("api-version", "2026-03-10"),
            ],
        ),
        (lambda f: hand_off.save_refused(f, "rqf-1"), [("refused-request-id", "rqf-1")]),
        (lambda f: hand_off.save_api_version(f, "2022-11-28"), [("api-version", "2022-11-28")]),
        (
            lambda f: hand_off.save_child(f, 17, "rqf-1", "https://run/17", by_name=False),
            [
                ("child-run-id", "17"),
                ("child-request-id", "rqf-1"),
                ("child-run-url", "https://run/17"),
                ("child-job-url", ""),
                ("child-found-by-name", ""),
            ],
        ),
        (
            lambda f: hand_off.save_child(f, 17, "rqf-1", "https://run/17", by_name=True),
            [
                ("child-run-id", "17"),
                ("child-request-id", "rqf-1"),
                ("child-run-url", "https://run/17"),
                ("child-job-url", ""),
                ("child-found-by-name", "rqf-1"),
            ],
        ),
        (lambda f: hand_off.save_copies(f, [18, 19]), [("child-copies", "18,19")]),
        (lambda f: hand_off.save_job_url(f, "https://job/3"), [("child-job-url", "https://job/3")]),
        (lambda f: hand_off.save_over(f, 17), [("child-over", "17")]),
        (hand_off.save_followed_to_result, [("child-found-by-name", "")]),
    ],
    ids=[
        "dispatch",
        "refused",
        "api-version",
        "child",
        "child-by-name",
        "copies",
        "job-url",
        "over",
        "followed",
    ],
)
def test_each_save_writes_its_keys_in_order_in_the_form_older_post_steps_read(save, lines):
    """Each moment of the main step writes exactly these keys and values, in this order (a step
    that dies between two saves leaves the first)."""
    state = StateFile()
    save(state)
    assert state.saved == lines


def test_the_post_step_loads_its_state_variables_and_nothing_else():
    environ = {f"STATE_{key}": f"<{key}>" for key in KEYS}
    environ |= {"STATE_unknown": "x", "INPUT_TOKEN": "t", "request-id": "not state"}
    loaded = HandOff.load(environ)
    assert loaded.saved == {key: f"<{key}>" for key in KEYS}
    assert loaded == HandOff.from_saved({key: f"<{key}>" for key in KEYS})


def test_a_key_never_saved_reads_as_empty():
    assert HandOff.load({"STATE_request-id": "rqf-1"}).saved == {
        key: "rqf-1" if key == "request-id" else "" for key in KEYS
    }


def test_what_is_saved_is_what_the_post_step_reads_the_last_value_winning():
    state = StateFile()
    hand_off.save_dispatch(state, "rqf-1", AT, "2026-03-10")
    hand_off.save_child(state, 17, "rqf-1", "https://run/17", by_name=True)
    hand_off.save_copies(state, [18])
    hand_off.save_copies(state, [18, 19])
    hand_off.save_job_url(state, "https://job/3")
    hand_off.save_followed_to_result(state)
    loaded = HandOff.from_saved(dict(state.saved))
    assert loaded.child_run == 17
    assert loaded.dispatched == AT
    assert loaded.copies == [18, 19]
    assert loaded.child_job_url == "https://job/3"
    assert loaded.child_found_by_name == ""
    assert loaded.request_id == loaded.child_request_id == "rqf-1"


def test_a_dispatch_sent_again_after_its_refusal_is_pending_again():
    """A rate limit refused it, and the same request id goes again: should that reply be lost,
    the post step must look for the run, not read the old refusal."""
    state = StateFile()
    hand_off.save_dispatch(state, "rqf-1", AT, "2026-03-10")
    hand_off.save_refused(state, "rqf-1")
    assert HandOff.from_saved(dict(state.saved)).refused_request_id == "rqf-1"
    hand_off.save_dispatch(state, "rqf-1", AT, "2026-03-10", again=True)
    loaded = HandOff.from_saved(dict(state.saved))
    assert loaded.request_id == "rqf-1"
    assert loaded.refused_request_id == ""


def test_values_are_kept_as_saved_and_read_leniently():
    """The text stays as saved; a run id may carry space, and what cannot be read is None."""
    saved = HandOff(child_run_id=" 17\n", child_copies="18, x,,19 ", dispatched_at="yesterday")
    assert saved.child_run_id == " 17\n"
    assert saved.child_run == 17
    assert saved.copies == [18, 19]
    assert saved.dispatched is None
    assert HandOff().child_run is None
    assert HandOff().copies == []
    assert HandOff().dispatched is None
    assert HandOff(child_run_id="\u0661\u0667").child_run is None  # digits, but not ASCII ones


# -------------------------------------------------------------------- no other module knows a key


@functools.cache
def _sources() -> dict[Path, str]:
    return {path: path.read_text() for path in sorted(PACKAGE.rglob("*.py"))}


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == name
    ]


#: Keys that are also the name of an input (the child's `request-id`, the coordinator's
#: `api-version`): the other modules that spell them mean the input.
INPUT_NAMED = {key for key in KEYS if key in {*COORDINATOR_INPUTS, *GUARD_INPUTS}}


def test_two_keys_are_also_input_names_and_no_other_is():
    assert {"request-id", "api-version"} == INPUT_NAMED


@pytest.mark.parametrize("key", sorted(set(KEYS) - INPUT_NAMED))
def test_a_key_is_spelled_in_the_hand_off_module_only(key: str):
    pattern = re.compile(rf"(?<![\w-]){re.escape(key)}(?![\w-])")
    spelled = [path for path, text in _sources().items() if pattern.search(text)]
    assert spelled == [HOME]


def test_only_the_hand_off_module_saves_state_or_reads_it():
    """Besides it, only the simulator's stand-in for the runner turns saved state into
    `STATE_<key>` variables, whatever the keys."""
    runner = PACKAGE / "tools" / "simulate" / "steps.py"
    saving, reading = [], []
    for path, text in _sources().items():
        tree = ast.parse(text)
        if _calls(tree, "save_state"):
            saving.append(path)
        constants = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)]
        if any(isinstance(c, str) and c.startswith("STATE_") for c in constants):
            reading.append(path)
    assert saving == [HOME]
    assert sorted(reading) == sorted([HOME, runner])
