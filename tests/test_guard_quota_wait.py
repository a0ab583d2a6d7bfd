"""The guard waits out a spent quota's near reset, then runs every check again (a departure).

`guard-quota-wait-minutes` (default 10): a pass refused because the primary quota is spent, with
its reset at most that far away, waits for the reset on the Clock and runs every check from the
start under the usual rules; a reset further away, none the replies name, or `0` fails closed as
before, naming the reset and the input. The fake GitHub's quota is one hourly window that starts
with its first counted request: spending it at 0 s puts the reset at 3,600 s.
"""

from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.action.guard import (
    CHECKS,
    IDENTITY,
    ORIGINAL,
    PARENT,
    QUOTA_WAIT_INPUT,
    SOURCE,
    GuardResult,
)
from runner_queue_fallback.core.clock import EPOCH, FakeClock
from runner_queue_fallback.core.inputs import env_name
from runner_queue_fallback.fake_github import FakeGitHub, Fault
from tests.test_guard import (
    PARENT_ID,
    dispatch_child,
    guard_environ,
    make_world,
    refused_at,
    requests_to,
    run_guard,
)

#: The quota's reset: its window began with the first counted request, at 0 s.
RESET = 3600.0
RESET_TIME = (EPOCH + timedelta(seconds=RESET)).strftime("%H:%M:%SZ")
#: The wait the guard takes for it from `now`: to the reset, and the client's 1 s margin.
MARGIN = 1.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def spent_before_the_listing(clock: FakeClock, *, at: float) -> tuple[FakeGitHub, int]:
    """A child whose guard starts at `at`: its own run and its parent are read (the last two
    requests of the hour), and the quota refuses the copy check's list request."""
    world = make_world(clock)
    world.quota = 10
    world.spend_quota(world.quota - 2)  # other workflows, at 0 s: the window ends at 3,600 s
    clock.advance(at)
    return world, dispatch_child(world)


def reads(world: FakeGitHub, run_id: int) -> tuple[int, int]:
    """How often the child's own run and its parent were read (any reply)."""
    return requests_to(world, f"/actions/runs/{run_id}"), requests_to(
        world, f"/actions/runs/{PARENT_ID}"
    )


def guard(
    world: FakeGitHub, clock: FakeClock, run_id: int, **inputs: str
) -> tuple[GuardResult, str]:
    environ = guard_environ(world, run_id, **{env_name(k): v for k, v in inputs.items()})
    log = io.StringIO()
    return run_guard(world, clock, environ, log), log.getvalue()


def test_a_near_reset_is_waited_for_and_every_check_runs_again(clock: FakeClock):
    world, run_id = spent_before_the_listing(clock, at=RESET - 300.0)
    result, log = guard(world, clock, run_id)
    assert result.passed, result.log_lines()
    assert [c.name for c in result.checks] == list(CHECKS)
    assert 300.0 + MARGIN in clock.sleeps  # to the reset, on the Clock
    assert clock.monotonic() >= RESET
    assert reads(world, run_id) == (2, 2)  # the first pass and the second: every check again
    listing = [e for e in world.ledger if "created=" in e.query]
    assert [e.status for e in listing] == [403, 200]
    notice = next(line for line in log.splitlines() if line.startswith("::notice"))
    assert "title=Guard waiting for API quota" in notice
    assert RESET_TIME in notice
    assert QUOTA_WAIT_INPUT in notice
    assert f"{ORIGINAL} could not be read" in notice
    said = f"Waited 301s for the API quota's reset ({ORIGINAL} could not be read), then ran every"
    assert result.waits == [f"{said} check again"]
    assert result.waits[0] in "\n".join(result.log_lines())
    assert result.waits[0] in result.markdown()


def test_a_parent_cancelled_during_the_wait_is_refused_after_it(clock: FakeClock):
    world, run_id = spent_before_the_listing(clock, at=RESET - 300.0)
    world.finish_parent(PARENT_ID, "cancelled", at=RESET - 100.0)
    result, _ = guard(world, clock, run_id)
    refusal = refused_at(result, PARENT)
    assert "cancelled" in refusal.observed
    assert clock.monotonic() >= RESET  # it waited, then read the parent again
    assert requests_to(world, "/git/ref/heads/feature") == 0  # nothing after the parent
    assert len(result.waits) == 1


def test_a_source_moved_during_the_wait_is_refused_after_it(clock: FakeClock):
    world, run_id = spent_before_the_listing(clock, at=RESET - 300.0)
    world.move_ref("heads/feature", at=RESET - 100.0)
    result, _ = guard(world, clock, run_id)
    refusal = refused_at(result, SOURCE)
    assert world.refs["heads/feature"] in refusal.observed


def test_a_far_reset_fails_closed_at_once_naming_it_and_the_input(clock: FakeClock):
    world, run_id = spent_before_the_listing(clock, at=RESET - 1800.0)
    result, _ = guard(world, clock, run_id)
    refusal = refused_at(result, ORIGINAL)
    assert f"reset at {RESET_TIME}, in 1801s" in refusal.observed
    assert f"further than {QUOTA_WAIT_INPUT} (10) allows" in refusal.observed
    assert result.checks[list(CHECKS).index(ORIGINAL)].observed == refusal.observed
    assert clock.sleeps == []  # no retry, no wait: it fails closed as before
    assert reads(world, run_id) == (1, 1)
    assert result.waits == []


def test_a_reset_just_past_the_inputs_minutes_is_not_waited_for(clock: FakeClock):
    world, run_id = spent_before_the_listing(clock, at=RESET - 301.0)
    result, _ = guard(world, clock, run_id, **{QUOTA_WAIT_INPUT: "5"})
    assert "further than guard-quota-wait-minutes (5)" in refused_at(result, ORIGINAL).observed
    near = FakeClock()
    world, run_id = spent_before_the_listing(near, at=RESET - 300.0)
    assert guard(world, near, run_id, **{QUOTA_WAIT_INPUT: "5"})[0].passed


def test_zero_fails_closed_at_once_as_the_spec_says(clock: FakeClock):
    world, run_id = spent_before_the_listing(clock, at=RESET - 60.0)
    result, log = guard(world, clock, run_id, **{QUOTA_WAIT_INPUT: "0"})
    refusal = refused_at(result, ORIGINAL)
    assert f"{QUOTA_WAIT_INPUT} is 0" in refusal.observed
    assert f"reset at {RESET_TIME}" in refusal.observed
    assert clock.sleeps == []  # even a reset a minute away is not waited for
    assert "::notice" not in log


@pytest.mark.parametrize(("minutes", "passes"), [("0", False), ("1", True)])
def test_zero_never_waits_even_for_a_reset_already_due(clock: FakeClock, minutes, passes):
    """Each of the spec's three attempts is refused with the reset at its own second: the last
    names a reset due now, a wait of only the 1 s margin, which 0 does not take either."""
    world = make_world(clock)
    run_id = dispatch_child(world)
    world.inject(Fault("primary_rate_limit", retry_after=0, count=3))
    result, _ = guard(world, clock, run_id, **{QUOTA_WAIT_INPUT: minutes})
    assert result.passed is passes
    assert clock.sleeps == [1.0, 1.0] + ([MARGIN] if passes else [])
    if not passes:
        assert f"{QUOTA_WAIT_INPUT} is 0" in refused_at(result, IDENTITY).observed


def test_the_waits_together_stay_within_the_input(clock: FakeClock):
    """The quota is spent again at its reset: the next reset is an hour on, and not waited for."""
    world, run_id = spent_before_the_listing(clock, at=RESET - 300.0)
    world._at(RESET + 0.5, lambda: world.spend_quota(world.quota))
    result, _ = guard(world, clock, run_id)
    refusal = refused_at(result, IDENTITY)
    assert "after the 301s already waited" in refusal.observed
    assert len(result.waits) == 1


def test_a_parent_check_that_runs_out_on_a_spent_quota_waits_too(clock: FakeClock):
    """The reset 51 s after the parent read, past the 2-minute window: the parent check polls
    on QuotaSpent until the window closes, and the guard waits for the reset from there."""
    world = make_world(clock, visibility=100.0)
    world.spend_quota(1)  # the window begins at 0 s
    clock.advance(RESET - 150.0)
    run_id = dispatch_child(world)  # visible at 3,550 s; the guard's window ends at 3,570 s
    # other workflows leave one request, which reads the child's own run at 3,550 s
    world._at(RESET - 50.5, lambda: world.spend_quota(world.quota - world._quota_used() - 1))
    result, log = guard(world, clock, run_id)
    assert result.passed, result.log_lines()
    assert f"({PARENT} could not be read)" in result.waits[0]
    assert "QuotaSpent" in log  # what the parent check saw while it polled
    parent = [(e.time, e.status) for e in world.ledger if e.path.endswith(f"/runs/{PARENT_ID}")]
    assert parent[0] == (RESET - 50.0, 403)
    assert parent[-2:] == [(RESET - 30.0, 403), (RESET + MARGIN, 200)]  # polled to 3,570 s


def test_a_secondary_limit_is_not_waited_for(clock: FakeClock):
    """Only a spent primary quota has a reset to wait for; a secondary limit fails as before."""
    world = make_world(clock)
    run_id = dispatch_child(world)
    world.inject(Fault("secondary_rate_limit", retry_after=300))
    result, _ = guard(world, clock, run_id)
    assert "secondary rate limit" in refused_at(result, IDENTITY).observed
    assert clock.sleeps == []
    assert result.waits == []


def cli_environ(world: FakeGitHub, run_id: int, tmp_path: Path, **inputs: str) -> dict[str, str]:
    summary = tmp_path / "summary.md"
    summary.write_text("")
    environ = guard_environ(world, run_id, GITHUB_STEP_SUMMARY=str(summary))
    return environ | {env_name(k): v for k, v in inputs.items()}


@pytest.mark.parametrize("value", ["61", "-1", "ten", "1.5", "10 minutes"])
def test_a_bad_value_is_an_input_error_before_any_request(
    clock: FakeClock, tmp_path: Path, capsys, value: str
):
    world, run_id = spent_before_the_listing(clock, at=RESET - 300.0)
    environ = cli_environ(world, run_id, tmp_path, **{QUOTA_WAIT_INPUT: value})
    before = len(world.ledger)
    assert cli.main(["guard"], environ, clock=clock, session=world.session()) == 2
    assert len(world.ledger) == before  # no request
    out = capsys.readouterr().out
    assert f"input '{QUOTA_WAIT_INPUT}'" in out
    assert json.dumps(value)[1:-1] in out
    assert "allowed: 0 (fail closed at once) to 60" in out


def test_the_cli_guard_waits_and_passes_with_exit_0(clock: FakeClock, tmp_path: Path, capsys):
    world, run_id = spent_before_the_listing(clock, at=RESET - 120.0)
    environ = cli_environ(world, run_id, tmp_path)
    assert cli.main(["guard"], environ, clock=clock, session=world.session()) == 0
    out = capsys.readouterr().out
    assert "::notice title=Guard waiting for API quota::" in out
    assert "Waited 121s for the API quota's reset" in (tmp_path / "summary.md").read_text()
