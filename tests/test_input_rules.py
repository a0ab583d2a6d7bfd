"""One set of input rules: plan, simulate, preflight and coordinate check every given input alike."""

from __future__ import annotations

import contextlib
import io

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.core.inputs import COORDINATOR_INPUTS, OTHER_RULES

POOL_INPUTS = {
    "runner-type",
    "queue-policy",
    "queue-timeout-minutes",
    "execution-timeout-minutes",
    "admission-timeout-minutes",
    "runners",
    "hosted-last-resort",
}
GOOD = {
    "workflow": "runner-worker.yml",
    "workflow-ref": "main",
    "source-ref": "refs/pull/1/merge",
    "source-sha": "a" * 40,
    "runner-type": "cpu",
}
BAD = [
    pytest.param("source-policy", "pinned", id="source-policy"),
    pytest.param("workload", "[1]", id="workload-not-object"),
    pytest.param("workflow", "dir/runner-worker.sh", id="workflow"),
    pytest.param("source-sha", "abc", id="source-sha"),
    pytest.param("source-ref", "main", id="source-ref"),
    pytest.param("queue-policy", "fast", id="queue-policy"),
]


class NoNetwork:
    """A session that fails the test on any request: input errors make none."""

    def request(self, *args: object, **kwargs: object) -> object:
        raise AssertionError(f"an API request was made: {args} {kwargs}")


def run(command: str, inputs: dict[str, str]) -> tuple[int, list[str]]:
    """Run `command` with the inputs as flags (the token, for the API commands, from INPUT_TOKEN)."""
    argv = [command] + [part for k, v in inputs.items() for part in (f"--{k}", v)]
    environ = {"INPUT_TOKEN": "t0ken", "GITHUB_REPOSITORY": "o/r"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(argv, environ, session=NoNetwork())  # type: ignore[arg-type]  # fails on use
    errors = [line for line in out.getvalue().splitlines() if "input '" in line]
    return code, errors


def test_every_coordinator_input_has_one_rule():
    """The pool inputs and OTHER_RULES together are every input of action.yml."""
    assert POOL_INPUTS | set(OTHER_RULES) == set(COORDINATOR_INPUTS)


@pytest.mark.parametrize(("name", "value"), BAD)
def test_plan_simulate_and_preflight_refuse_what_coordinate_refuses(name: str, value: str):
    """Same message, exit 2, no API request, in every command that reads the inputs."""
    inputs = {**GOOD, name: value}
    found = {command: run(command, inputs) for command in ("plan", "simulate", "preflight")}
    environ = {f"INPUT_{k.upper()}": v for k, v in inputs.items()} | {
        "INPUT_TOKEN": "t0ken",
        "GITHUB_REPOSITORY": "o/r",
        "GITHUB_RUN_ID": "1",
        "GITHUB_RUN_ATTEMPT": "1",
    }
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["coordinate"], environ, session=NoNetwork())  # type: ignore[arg-type]  # fails on use
    coordinate = [line for line in out.getvalue().splitlines() if "input '" in line]
    assert code == 2
    assert any(f"input '{name}'" in line for line in coordinate)
    assert all(line.startswith("::error title=error%3A ") for line in coordinate)  # its outcome
    for command, (exit_code, errors) in found.items():
        assert exit_code == 2, command
        assert _messages(errors) == _messages(coordinate), command


def _messages(annotations: list[str]) -> list[str]:
    """The annotations' messages: the action step's title also leads with its `outcome` word."""
    return [line.split("::", 2)[2] for line in annotations]


def test_plan_needs_only_the_inputs_it_uses():
    """`plan --runner-type gpu` works without workflow, refs or token."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["plan", "--runner-type", "gpu"], {})
    assert code == 0
    assert "timeout-minutes" in out.getvalue()


def test_preflight_requires_what_coordinate_requires():
    """preflight dispatches nothing but reads all the coordinator reads: it needs its inputs."""
    code, errors = run("preflight", {"runner-type": "cpu"})
    assert code == 2
    for name in ("workflow", "workflow-ref", "source-ref", "source-sha"):
        assert any(f"input '{name}' is required" in line for line in errors), name
