"""Issue 26, items 5 and 6: odd headers cannot stop a cleanup, and deep input is an input error.

Each test drives `cli.main` (on the fake GitHub where a step talks to it) and failed before the
fix; its docstring says what happened then.
"""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from runner_queue_fallback import cli
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.inputs import env_name
from runner_queue_fallback.fake_github.model import RunHistory, Timings
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.lint import model
from runner_queue_fallback.tools.simulate.steps import (
    PARENT_RUN_ID,
    SOURCE_REF,
    TOKEN,
    SimulationRun,
    run_coordinator,
    standard_world,
)
from tests.invariants import children
from tests.outside import Rule, Tamper, json_body, with_json

GROUP, CPU16 = "nv-cpu-general", "linux-amd64-cpu16"
#: An `x-ratelimit-reset` of 17 digits: a year no date can hold.
HUGE_RESET = "12345678901234567"
#: JSON nested far deeper than Python's stack.
DEEP_JSON = "[" * 100_000 + "]" * 100_000
#: Deep enough for any stack, short enough for the `workload` input's length limit.
DEEP_SHORT_JSON = "[" * 20_000 + "]" * 20_000
#: YAML nested far deeper than libyaml's limit (1000) and Python's stack.
DEEP_YAML = "[" * 100_000 + "]" * 100_000


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


# -- 5. odd headers cannot stop a cleanup -------------------------------------------------


def huge_reset(*, spent_after_dispatch: bool) -> Rule:
    """Every reply says the quota resets in a year no date holds (`GET /rate_limit` too); once a
    child exists, with `spent_after_dispatch`, every reply also says that none is left."""

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        del method
        spent = spent_after_dispatch and bool(world.history)
        headers = {
            key: HUGE_RESET
            if key.lower() == "x-ratelimit-reset"
            else "0"
            if spent and key.lower() == "x-ratelimit-remaining"
            else value
            for key, value in reply.headers.items()
        }
        body = json_body(reply)
        if path == "/rate_limit" and isinstance(body, dict):
            for resource in [body.get("rate"), *(body.get("resources") or {}).values()]:
                if isinstance(resource, dict):
                    resource["reset"] = int(HUGE_RESET)
                    resource["remaining"] = 0 if spent else resource.get("remaining")
            reply = with_json(reply, body)
        return replace(reply, headers=headers)

    return rule


def run_with_huge_reset(
    *, spent: bool, interrupt_at: float | None = None, cancel_delay: float = 0.0
) -> tuple[SimulationRun, RunHistory, list[float]]:
    """One candidate whose child stays queued; every reply carries the 17-digit reset."""
    clock = FakeClock()
    world, sha = standard_world(
        clock, FakeGitHub(clock, timings=Timings(cancel_delay=cancel_delay))
    )
    world.add_pool(GROUP, CPU16, runners=1, busy=((0.0, 10.0**9),))
    tamper = Tamper(world, [huge_reset(spent_after_dispatch=spent)]).install()
    result = run_coordinator(
        world, clock, coordinator_inputs(sha), main=cli.main, interrupt_at=interrupt_at
    )
    assert tamper.fired
    cancels = [e.time for e in world.ledger if e.method == "POST" and e.path.endswith("/cancel")]
    [kid] = children(world)
    return result, kid, cancels


@pytest.mark.parametrize("spent", [False, True], ids=["quota-left", "quota-spent"])
def test_a_17_digit_reset_on_every_reply_does_not_stop_the_main_steps_cancel(spent: bool):
    """The queue deadline passes with a 17-digit `x-ratelimit-reset` on every reply.

    Before (quota spent): `reset_time()` raised ValueError ("year ... is out of range") before the
    cancel was sent; the child stayed queued. After: the reset is absent, the cancel is sent and
    confirmed.
    """
    result, kid, cancels = run_with_huge_reset(spent=spent)
    assert cancels, result.log
    assert kid.conclusion == "cancelled"
    assert "Traceback" not in result.log
    assert f"Cancellation check: run {kid.run_id} completed/cancelled" in result.log
    assert "exhausted" in result.log
    assert result.exit_code == 1  # the one queue was exhausted: a clean failure
    assert result.post_exit_code == 0


@pytest.mark.parametrize("spent", [False, True], ids=["quota-left", "quota-spent"])
def test_a_17_digit_reset_on_every_reply_does_not_stop_the_signal_cleanup(spent: bool):
    """SIGTERM while the child is queued: the main step cancels and confirms within the grace.

    Before (quota spent): the cleanup raised in `reset_time()` and sent no cancel.
    """
    result, kid, cancels = run_with_huge_reset(spent=spent, interrupt_at=30.0)
    assert cancels, result.log
    assert kid.conclusion == "cancelled"
    assert "Traceback" not in result.log + result.post_log
    assert f"cleanup confirmed: child run {kid.run_id}" in result.log
    assert result.post_exit_code == 0


@pytest.mark.parametrize("spent", [False, True], ids=["quota-left", "quota-spent"])
def test_a_17_digit_reset_on_every_reply_does_not_stop_the_post_steps_cancel(spent: bool):
    """The cancel takes longer than the signal grace: the post step cancels and confirms.

    Before (quota spent): neither step sent a cancel (both raised in `reset_time()`). After: the
    post step sends its cancel and confirms the child over.
    """
    result, kid, cancels = run_with_huge_reset(spent=spent, interrupt_at=30.0, cancel_delay=20.0)
    assert f"NOT confirmed for child run {kid.run_id}" in result.log
    assert f"Cancel requested for child run {kid.run_id}" in result.post_log
    assert len(cancels) == 2, cancels  # the main step's, and the post step's own
    assert "Traceback" not in result.log + result.post_log
    assert f"cleanup confirmed: child run {kid.run_id}" in result.post_log
    assert result.post_exit_code == 0
    assert kid.conclusion == "cancelled"


# -- 6. deep input is an input error ------------------------------------------------------


def run_main(argv: list[str], environ: dict[str, str] | None = None) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(argv, environ or {}, clock=FakeClock())
    return code, out.getvalue()


def test_deep_waits_json_is_an_input_error(tmp_path: Path):
    """`simulate --waits` on JSON nested 100,000 deep.

    Before: RecursionError, a traceback. After: exit 2, the flag named, no traceback.
    """
    waits = tmp_path / "stats.json"
    waits.write_text(DEEP_JSON)
    code, out = run_main(["simulate", "--waits", str(waits), "--runner-type", "cpu"])
    assert code == 2, out
    assert "--waits" in out
    assert "too deeply nested" in out
    assert "Traceback" not in out


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


@pytest.fixture(params=["libyaml", "pure-python"])
def yaml_loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both loaders `model` may use: libyaml (its own depth limit) or PyYAML's recursive one."""
    if request.param == "pure-python":
        monkeypatch.setattr(model, "_LOADER", yaml.SafeLoader)
    elif not hasattr(yaml, "CSafeLoader"):  # pragma: no cover - libyaml ships in PyYAML's wheels
        pytest.skip("PyYAML without libyaml")
    return str(request.param)


def test_deep_yaml_in_a_linted_workflow_is_an_input_error(tmp_path: Path, yaml_loader: str):
    """`lint` on a workflow file nested 100,000 deep.

    Before (PyYAML's own loader): RecursionError, a traceback. After: RQF000, exit 1.
    """
    coordinator = tmp_path / "deep.yml"
    coordinator.write_text(f"on: {DEEP_YAML}\n")
    code, out = run_main(["lint", str(coordinator)])
    assert code == 1, out
    assert "RQF000" in out
    assert "nesting" in out
    assert "Traceback" not in out


def test_deep_yaml_in_the_child_file_that_preflight_reads(yaml_loader: str):
    """`preflight` reads the child file from GitHub: one nested 100,000 deep.

    Before (PyYAML's own loader): RecursionError, a traceback. After: the child check fails
    with RQF000, exit 1, and nothing is posted.
    """
    clock = FakeClock()
    world, sha = standard_world(clock, FakeGitHub(clock))
    world.add_pool(GROUP, CPU16, runners=1)
    world.add_workflow("runner-worker.yml", "main", content=f"on: {DEEP_YAML}\n")
    environ = {env_name(k): v for k, v in coordinator_inputs(sha).items()}
    environ |= {
        env_name("token"): TOKEN,
        "GITHUB_REPOSITORY": world.repository,
        "GITHUB_API_URL": world.api_url,
        "GITHUB_RUN_ID": str(PARENT_RUN_ID),
        "GITHUB_RUN_ATTEMPT": "1",
    }
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["preflight"], environ, clock=clock, session=world.session())
    text = out.getvalue()
    assert code == 1, text
    assert "RQF000" in text
    assert "Traceback" not in text
    assert [e for e in world.ledger if e.method == "POST"] == []
