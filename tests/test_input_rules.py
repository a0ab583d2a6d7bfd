"""One set of input rules: plan, simulate, preflight and coordinate check every given input alike.

And an input that once stopped a step with a traceback, or reached GitHub, is an input error
before any request: a `source-ref` that climbs out of the repository (`..`), JSON nested deeper
than any stack, a number of thousands of digits, a digit `int` refuses.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.inputs import (
    COORDINATOR_INPUTS,
    OTHER_RULES,
    InputErrors,
    env_name,
    read_coordinator_inputs,
)
from runner_queue_fallback.fake_github.model import fake_token
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.simulate.capture import capture_stdout
from runner_queue_fallback.tools.simulate.steps import (
    PARENT_RUN_ID,
    SOURCE_REF,
    TOKEN,
    standard_world,
)
from tests.scenario import CPU16
from tests.test_fuzz_inputs import PROFILES, VALID, InputSet, run_cli
from tests.test_sim_support import GROUP

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


# -- inputs that once crashed a step, or reached GitHub -----------------------------------------


TRAVERSAL = "refs/heads/x/../../../../../../other/fork/git/ref/heads/x"


@pytest.mark.found_by("review", issue=15)
def test_traversal_source_ref_is_refused_before_any_request(no_network):
    """`source-ref` with `..` passed validation, and the client read a ref in another repository.

    Before: accepted; the HTTP stack removed the dot segments. After: exit 2, no request.
    """
    session, adapter = no_network
    clock = FakeClock()
    world, sha = standard_world(clock)
    environ = {
        env_name("workflow"): "runner-worker.yml",
        env_name("workflow-ref"): "main",
        env_name("source-ref"): TRAVERSAL,
        env_name("source-sha"): sha,
        env_name("runner-type"): "cpu",
        env_name("token"): fake_token("x"),
        "GITHUB_REPOSITORY": world.repository,
        "GITHUB_RUN_ID": "1",
        "GITHUB_RUN_ATTEMPT": "1",
    }
    out = io.StringIO()
    with capture_stdout(out):
        code = cli.main(["coordinate"], environ, clock=clock, session=session)
    assert code == 2
    assert "source-ref" in out.getvalue()
    assert adapter.sent == []
    with capture_stdout(out):
        code = cli.main(
            ["coordinate"],
            {
                **environ,
                env_name("source-ref"): "refs/heads/main",
                env_name("workflow-ref"): "a/../b",
            },
            clock=clock,
            session=session,
        )
    assert code == 2
    assert adapter.sent == []


#: Deep enough for any stack, short enough for the `workload` input's length limit.
DEEP_SHORT_JSON = "[" * 20_000 + "]" * 20_000


def coordinator_inputs(sha: str) -> dict[str, str]:
    return {
        "workflow": "runner-worker.yml",
        "workflow-ref": "main",
        "source-ref": SOURCE_REF,
        "source-sha": sha,
        "runner-type": "cpu",
        "queue-timeout-minutes": "1",
        "execution-timeout-minutes": "5",
        "runners": json.dumps([{"group": GROUP, "labels": CPU16}]),
    }


@pytest.mark.found_by("review", issue=26)
@pytest.mark.parametrize(
    ("name", "value"),
    [("runners", DEEP_SHORT_JSON), ("workload", '{"a": ' + DEEP_SHORT_JSON + "}")],
)
def test_deep_runners_and_workload_json_are_input_errors(no_network, name: str, value: str):
    """`runners` and `workload` nested 20,000 deep (under the workload's length limit).

    Already so (a regression test): exit 2, the input named, no request, no traceback.
    """
    session, adapter = no_network
    clock = FakeClock()
    world, sha = standard_world(clock, FakeGitHub(clock))
    environ = {env_name(k): v for k, v in {**coordinator_inputs(sha), name: value}.items()}
    environ |= {
        env_name("token"): TOKEN,
        "GITHUB_REPOSITORY": world.repository,
        "GITHUB_RUN_ID": str(PARENT_RUN_ID),
        "GITHUB_RUN_ATTEMPT": "1",
    }
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["coordinate"], environ, clock=clock, session=session)
    text = out.getvalue()
    assert code == 2, text
    assert f"::error title=error%3A Invalid input::input '{name}' is JSON too deeply nested" in text
    assert "Traceback" not in text
    assert adapter.sent == []


# json.loads raised RecursionError/ValueError (not JSONDecodeError) on deep nesting and 4300+
# digit numbers, and str.isdigit() accepted digits int() refuses: a traceback instead of an
# input error (found by tests/test_fuzz_inputs.py). Fixed in inputs.py/overrides.py (parse_json,
# _whole).
DEEP = "[" * 100_000 + "]" * 100_000
HUGE = "1" * 5000
INPUT_CRASHES = [
    pytest.param("runners", DEEP, id="runners-nested-100000-deep"),
    pytest.param(
        "runners",
        f'[{{"group": "nv-cpu-general", "labels": "linux-amd64-cpu16", '
        f'"queue-timeout-minutes": {HUGE}}}]',
        id="runners-deadline-with-5000-digits",
    ),
    pytest.param("workload", DEEP, id="workload-nested-100000-deep"),
    pytest.param("workload", f'{{"shard": {HUGE}}}', id="workload-number-with-5000-digits"),
    pytest.param("execution-timeout-minutes", "\u00b2", id="execution-timeout-superscript-two"),
    pytest.param("execution-timeout-minutes", HUGE, id="execution-timeout-5000-digits"),
]


@pytest.mark.found_by("fuzz")
@pytest.mark.parametrize(("name", "value"), INPUT_CRASHES)
def test_known_input_crash_becomes_an_input_error(name: str, value: str):
    """Before: a traceback from the coordinate step. Expected: exit 2 naming the input."""
    values = InputSet({**VALID, "runner-type": "cpu", name: value}, frozenset({name}), via_cli=True)
    with pytest.raises(InputErrors) as caught:
        read_coordinator_inputs(values.environ(), PROFILES)
    assert [error.name for error in caught.value.errors] == [name]
    run = run_cli(values)
    assert run.code == 2
    assert run.sent == []
