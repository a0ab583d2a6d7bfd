"""Fuzz the real coordinator (and the guard in the child) against random worlds on virtual time.

Hypothesis draws a configuration (runner type, policy, overrides, deadlines, execution timeout,
source policy) and a world (pool availability over time, cancel delays and reporting lags, the
workload, API faults of every kind with bounded counts, the repository's quota spent by other
workflows, at a random moment or inside a phase of the sequence (startup, queue, execution, a
parent check, the cancellation proof, the lost-reply search), source/workflow changes, the parent
cancelled or re-run, a SIGTERM, GitHub's own 2026 behaviours (`Platform`: re-queues after an
assignment, runs that never get a job, a cancel that does not take, a job run on a second runner
it never shows)), runs `coordinate` and its post step through the simulation harness, and checks
the invariants of DESIGN.md and the spec's bounds after every run
(`tests.invariants.check_invariants`, `check_spec_bounds`, `check_truth`, invariants 8 and 11:
`check_no_child_left_for_quota`, `check_started_workloads`, and a second execution of a job
never running its workload).

A `Case` is plain data, so every bug the fuzzer finds is replayed by name, as its own `Case`, in
the test file of the module it broke (marked `found_by("fuzz")`).
Profiles (`RQF_FUZZ_PROFILE`): `ci` (default, derandomized) and `nightly` (see conftest.py).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import io
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import event, given, note, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from runner_queue_fallback import cli
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.errors import Interrupted
from runner_queue_fallback.core.hosted import HOSTED_EXAMPLES
from runner_queue_fallback.core.inputs import PoolSettings, env_name, read_pool_settings
from runner_queue_fallback.core.main import Main
from runner_queue_fallback.core.profiles import Candidate, load_profiles
from runner_queue_fallback.fake_github import WorkerContext, WorkerHook
from runner_queue_fallback.fake_github.faults import FAULT_KINDS, Fault, FaultPlan
from runner_queue_fallback.fake_github.model import (
    FakeRun,
    Platform,
    Pool,
    Timings,
    Workload,
    pool_key,
)
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import API_VERSIONS, OLDER_SERVER, FakeGitHub
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.tools.simulate.steps import (
    PARENT_RUN_ID,
    SOURCE_REF,
    TOKEN,
    SimulationRun,
    guard_hook,
    run_coordinator,
    standard_world,
)
from runner_queue_fallback.workflow.plan import make_plan
from tests.invariants import (
    Observed,
    Send,
    api_error,
    check_invariants,
    check_no_child_left_for_quota,
    check_spec_bounds,
    check_started_workloads,
    check_truth,
    children_left_at_exit,
    rate_limited,
)
from tests.outside import PLANTS, Tamper, lag_rule, odd_header_rule, plant_rule, watch_stdout

PROFILES = load_profiles()
FOREVER = 10.0**9


def _guard_available() -> bool:
    """Whether `cli.main(["guard"])` exists (it was being added while this file was written)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        return cli.main(["guard", "--help"], {}) == 0


GUARD = _guard_available()


@dataclass(frozen=True)
class PoolPlan:
    """One runner pool of the world: `runners=0` never serves; no runner is free inside `busy`."""

    group: str
    labels: str | tuple[str, ...]
    runners: int = 1
    busy: tuple[tuple[float, float], ...] = ()
    #: GitHub-hosted runners (issue 33): `runners` is the concurrency limit, past it jobs queue
    hosted: bool = False


@dataclass(frozen=True)
class Case:
    """Everything one fuzz run needs: the coordinator's inputs and the world it meets."""

    inputs: Mapping[str, str]
    pools: tuple[PoolPlan, ...] = ()
    timings: Timings = field(default_factory=Timings)
    workload: Workload = field(default_factory=Workload)
    faults: tuple[Fault, ...] = ()
    seed: int = 0
    move_source_at: float | None = None
    change_workflow_at: float | None = None
    parent_cancel_at: float | None = None
    parent_rerun_at: float | None = None
    parent_visible_after: float = 0.0
    interrupt_at: float | None = None
    guard: bool = True
    unassigned_runner_as_zero: bool = False
    #: an index into `tests.outside.PLANTS`: outside text planted in every string GitHub sends
    plant: int | None = None
    #: a completed child run shows a null conclusion for this many reads
    lag_reads: int = 0
    #: every rate-limit header carries this odd value (NaN, inf, a date without zone, ...)
    odd_header: str | None = None
    #: other workflows sharing the token spend the whole hourly quota at this time
    quota_spent_at: float | None = None
    #: requests left in the quota when the coordinator starts (None: all of it)
    quota_left: int | None = None
    #: an older GitHub Enterprise Server: no API version 2026-03-10, dispatch answers 204
    older_server: bool = False
    #: other workflows spend the whole quota inside this phase of the sequence (`QUOTA_PHASES`)
    quota_phase: str | None = None
    #: ...this many seconds after the phase's moment (see `spend_in_phase`)
    quota_phase_delay: float = 0.0
    #: ...of the n-th dispatch, runner or parent read
    quota_phase_nth: int = 1
    #: what GitHub does beyond the tidy model (issue 28): re-queues, zombies, unheeded cancels
    platform: Platform = field(default_factory=Platform)
    #: hand dispatches of the child workflow in the 55 s before the first dispatch; the parent
    #: attempt then started 10 minutes before the coordinator (issue 44: past 1,000 runs, the
    #: guard's window is split)
    crowd: int = 0


@dataclass
class Outcome:
    """What a case produced: the world, the run, and what the instruments saw."""

    case: Case
    world: FakeGitHub
    clock: FakeClock
    run: SimulationRun
    settings: PoolSettings
    observed: Observed


def base_inputs(changes: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """Valid coordinator inputs for the standard world (source-sha is filled in by `execute`).

    `changes` maps input names as spelled in action.yml to values; None removes the input.
    """
    inputs: dict[str, str | None] = {
        "workflow": "runner-worker.yml",
        "workflow-ref": "main",
        "source-ref": SOURCE_REF,
        "runner-type": "cpu",
    }
    inputs.update(changes or {})
    return {k: v for k, v in inputs.items() if v is not None}


def resolve(inputs: Mapping[str, str]) -> PoolSettings:
    """The candidates and deadlines the coordinator will use for `inputs`."""
    return _resolved(frozenset(inputs.items()))


@functools.lru_cache(maxsize=4096)
def _resolved(inputs: frozenset[tuple[str, str]]) -> PoolSettings:
    """`resolve`, kept: a case resolves its inputs twice, and hypothesis' mutations repeat them."""
    return read_pool_settings({env_name(k): v for k, v in inputs}, PROFILES)


# ------------------------------------------------------------------------------- running


@contextlib.contextmanager
def _instruments(clock: FakeClock, observed: Observed) -> Iterator[None]:
    """Record every HTTP send with the client's attempt number."""
    real_send = GitHubClient._send

    def send(self: GitHubClient, method: str, path: str, **kwargs: Any) -> Any:
        body = kwargs.get("json")
        observed.sends.append(
            Send(
                token=str(self._token),  # a str for every client the fuzzer builds
                method=method,
                url=kwargs.get("url") or self._url(path, {}),
                attempts=kwargs.get("attempts", 1),
                time=clock.monotonic(),
                inputs=dict(body.get("inputs", {})) if isinstance(body, dict) else {},
            )
        )
        return real_send(self, method, path, **kwargs)

    with mock.patch.object(GitHubClient, "_send", send), watch_stdout() as watch:
        yield
    # Invariant 9: no line the runner would read as a command comes from outside text.
    assert watch.problems() == [], watch.problems()


def _recording_main(clock: FakeClock, observed: Observed) -> Main:
    """The composition root, recording when each command (coordinate, guard, cleanup) runs."""

    def main(argv: Any = None, environ: Any = None, **kwargs: Any) -> int:
        command = str(next(iter(argv or ["?"])))
        observed.stack.append(command)
        start = clock.monotonic()
        try:
            return cli.main(argv, environ, **kwargs)
        except Exception as exc:
            # Invariant 10: only the project's errors may reach main (and those are handled there).
            raise AssertionError(f"{type(exc).__name__} reached main ({command}): {exc!r}") from exc
        finally:
            observed.stack.pop()
            observed.commands.append((command, start, clock.monotonic()))

    return main


def _interrupt(clock: FakeClock, at: float, observed: Observed) -> None:
    """SIGTERM to the coordinator's container: raised in `coordinate`, never in the guard's step.

    With one FakeClock the guard runs inside a coordinator request; a signal arriving then is
    delivered when that request returns, as it would interrupt the coordinator's wait on it.
    """

    def check() -> None:
        in_coordinate = bool(observed.stack) and observed.stack[-1] == "coordinate"
        if observed.interrupted_at is None and clock.monotonic() >= at and in_coordinate:
            observed.interrupted_at = clock.monotonic()
            raise Interrupted("SIGTERM")

    clock.on_advance(check)


def _add_pool(world: FakeGitHub, pool: PoolPlan) -> None:
    if pool.hosted:
        world.add_hosted_pool(pool.labels, concurrency=pool.runners, busy=pool.busy)
    else:
        world.add_pool(pool.group, pool.labels, runners=pool.runners, busy=pool.busy)


def _planted_runner(hook: WorkerHook, plant: int) -> WorkerHook:
    """The guard's RUNNER_NAME carries the plant, as the runner's name does in every job GitHub
    shows (`plant_rule`): one name, read from the runner and from GitHub."""

    def planted(context: WorkerContext) -> bool:
        environ = dict(context.environ)
        if environ.get("RUNNER_NAME"):
            environ["RUNNER_NAME"] += PLANTS[plant]
        return hook(replace(context, environ=environ))

    return planted


def build_world(case: Case, clock: FakeClock, observed: Observed) -> tuple[FakeGitHub, str]:
    """The fake repository of `case`, with the real guard as the child's first step."""
    world = FakeGitHub(
        clock,
        timings=case.timings,
        workload=case.workload,
        faults=FaultPlan(list(case.faults), case.seed),
        unassigned_runner_as_zero=case.unassigned_runner_as_zero,
        api_versions=OLDER_SERVER if case.older_server else API_VERSIONS,
        platform=case.platform,
        direct=True,  # requests' own path is under test elsewhere; here it would cost a third
    )
    if case.guard and GUARD:
        hook = guard_hook(world, clock, observed.guard_logs, main=_recording_main(clock, observed))
        world.on_worker_start = hook if case.plant is None else _planted_runner(hook, case.plant)
    world, sha = standard_world(clock, world)
    rules = [plant_rule(PLANTS[case.plant])] if case.plant is not None else []
    rules += [lag_rule(case.lag_reads)] if case.lag_reads else []
    rules += [odd_header_rule(case.odd_header)] if case.odd_header is not None else []
    if rules:
        Tamper(world, rules, keep_304=True).install()
    world.runs[PARENT_RUN_ID].visible_at = case.parent_visible_after
    for pool in case.pools:
        _add_pool(world, pool)
    source = SOURCE_REF.removeprefix("refs/")
    if case.move_source_at is not None:
        world.move_ref(source, at=case.move_source_at)
    if case.change_workflow_at is not None:
        world.change_workflow("runner-worker.yml", "main", at=case.change_workflow_at)
    if case.parent_cancel_at is not None:
        world.finish_parent(PARENT_RUN_ID, "cancelled", at=case.parent_cancel_at)
    if case.parent_rerun_at is not None:
        world.rerun_parent(PARENT_RUN_ID, at=case.parent_rerun_at)
    if case.quota_left is not None:
        world.spend_quota(world.quota - case.quota_left)
    if case.quota_spent_at is not None:
        world._at(case.quota_spent_at, lambda: world.spend_quota(world.quota))
    spend_in_phase(world, case)
    _crowd_before_first_dispatch(world, case.crowd)
    return world, sha


def _crowd_before_first_dispatch(world: FakeGitHub, count: int) -> None:
    """`count` hand dispatches in the 55 s before the first child; the attempt began long before.

    The parent attempt starts 10 minutes before the coordinator, so that the crowd falls inside
    both the older window (from the attempt's start) and the stated one (from a minute before
    the dispatch), wherever the first dispatch comes.
    """
    if not count:
        return
    parent = world.runs[PARENT_RUN_ID]
    parent.created_at = parent.started_at = -600.0
    real = world.dispatch

    def dispatch(file: str, ref: str, inputs: Mapping[str, object]) -> Any:
        if not world.history:  # the first dispatch: no child exists yet
            now = world.now()
            world.add_hand_dispatches(file, count, start=now - 55.0, end=now)
        return real(file, ref, inputs)

    world.dispatch = dispatch  # type: ignore[method-assign]  # the route calls the instance


#: Where a spent quota may fall (issue 27): after a dispatch, before the child's first identity
#: read and through its startup window; after its job is listed queued; after a runner takes it;
#: at a parent check; after the cancel POST, inside the proof; after a dispatch whose reply was
#: lost, during the run-name search.
QUOTA_PHASES = ("startup", "queue", "execution", "parent", "cancel", "search")


def spend_in_phase(world: FakeGitHub, case: Case) -> None:
    """Other workflows spend the whole quota at a moment of `case.quota_phase`.

    startup, search: `delay` after the n-th dispatch; queue: after its job is listed; execution:
    after the n-th runner is assigned; parent: just before the coordinator's n-th parent read;
    cancel: `delay` after its first accepted cancel POST.
    """
    phase, delay, nth = case.quota_phase, case.quota_phase_delay, case.quota_phase_nth

    def spend() -> None:
        world.spend_quota(world.quota)

    def later(at: float) -> None:
        world._at(at, spend)

    if phase in {"startup", "queue", "search"}:
        _after_dispatch(world, nth, lambda run: later(_phase_base(run, phase) + delay))
    elif phase == "execution":
        real_assign = world._assign
        assigned: list[int] = []

        def assign(run: FakeRun, pool: Pool) -> None:
            real_assign(run, pool)
            assigned.append(run.id)
            if len(assigned) == nth:
                later(world.now() + delay)

        world._assign = assign  # type: ignore[method-assign]  # the model calls the instance
    elif phase in {"parent", "cancel"}:
        _around_requests(world, phase, nth, spend, later, delay)


def _phase_base(run: FakeRun, phase: str | None) -> float:
    """The dispatch, or (queue) when the child's job is listed queued."""
    if phase == "queue" and run.job_at is not None:
        return run.job_at
    return run.created_at


def _after_dispatch(world: FakeGitHub, nth: int, then: Any) -> None:
    """Call `then(run)` once the n-th dispatch has created its run."""
    real = world.dispatch
    made: list[int] = []

    def dispatch(file: str, ref: str, inputs: Mapping[str, object]) -> Any:
        outcome = real(file, ref, inputs)
        if isinstance(outcome, FakeRun):
            made.append(outcome.id)
            if len(made) == nth:
                then(outcome)
        return outcome

    world.dispatch = dispatch  # type: ignore[method-assign]  # the route calls the instance


def _around_requests(  # noqa: PLR0917  # one phase's trigger and its actions
    world: FakeGitHub, phase: str, nth: int, spend: Any, later: Any, delay: float
) -> None:
    """Spend before the coordinator's n-th parent read, or `delay` after its first cancel."""
    real = world.handle
    seen: list[str] = []
    parent = f"/actions/runs/{PARENT_RUN_ID}"

    def handle(method: str, path_and_query: str, headers: Any, body: bytes = b"") -> Reply:
        path = path_and_query.split("?", 1)[0]
        auth = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
        mine = auth.endswith(f" {TOKEN}")
        if phase == "parent" and mine and method.upper() == "GET" and path.endswith(parent):
            seen.append(path)
            if len(seen) == nth:
                spend()  # this read is the first to be refused
        reply = real(method, path_and_query, headers, body)
        cancel = method.upper() == "POST" and path.endswith("/cancel")
        if phase == "cancel" and mine and cancel and reply.status == 202 and not seen:
            seen.append(path)
            later(world.now() + delay)
        return reply

    world.handle = handle  # type: ignore[method-assign]  # the adapters call the instance


def simulate_case(case: Case) -> Outcome:
    """Run `case` through the harness (invariant 9 is checked on the way: `_instruments`)."""
    clock = FakeClock()
    observed = Observed()
    world, sha = build_world(case, clock, observed)
    inputs = {**case.inputs, "source-sha": sha}
    settings = resolve(inputs)
    if case.interrupt_at is not None:
        _interrupt(clock, case.interrupt_at, observed)
    with _instruments(clock, observed):
        run = run_coordinator(
            world, clock, inputs, main=_recording_main(clock, observed), step_files=_step_files()
        )
    run.guard_logs = list(observed.guard_logs)
    return Outcome(case, world, clock, run, settings, observed)


@functools.cache
def _step_files() -> Path:
    """One directory of step files per process, emptied by each run (see `run_coordinator`)."""
    path = Path(tempfile.mkdtemp(prefix="rqf-fuzz-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def execute(case: Case) -> Outcome:
    """Run `case` through the harness and check every invariant and spec bound."""
    outcome = simulate_case(case)
    world, clock, run = outcome.world, outcome.clock, outcome.run
    settings, observed = outcome.settings, outcome.observed
    if currently_in_test_context():
        note(
            f"exit {run.exit_code}, post {run.post_exit_code}; log:\n{run.log}\npost:\n{run.post_log}"
        )
    check_invariants(world, run, candidates=len(settings.candidates))
    # Invariant 10: no exception of a foreign type was raised anywhere, even one caught and
    # cleaned up after (`UnexpectedError`), in the main step, the post step or a guard.
    everything = "\n".join([run.log, run.post_log, *run.guard_logs])
    assert "Unexpected error" not in everything, everything
    check_spec_bounds(
        world,
        run,
        clock,
        observed,
        settings=settings,
        budget_seconds=make_plan(settings).timeout_minutes * 60,
        guard=case.guard and GUARD,
        latency=case.timings.latency,
    )
    check_truth(world, run, observed, latency=case.timings.latency)
    if case.crowd:  # issue 44: past 1,000 runs the guard's window is split, within its bound
        incomplete = [
            line
            for log in run.guard_logs
            for line in log.splitlines()
            if "listed, not every" in line and "changed while it was read" not in line
        ]
        assert incomplete == [], incomplete
    # Invariants 11 and 8 (issue 27): what a user loses.
    check_started_workloads(
        world,
        run,
        observed,
        execution_minutes=settings.execution_timeout_minutes,
        source_policy=case.inputs.get("source-policy", "current"),
        latency=case.timings.latency,
        listing_delay=case.timings.listing_delay,
    )
    check_no_child_left_for_quota(world, run, observed, other_trouble=other_trouble(outcome))
    # Issue 44: a job GitHub runs on a second runner (`Platform.twice`) runs its workload once;
    # the guard there finds the job shown on the other runner and refuses.
    for kid in world.history.values():
        assert kid.second_guard_passed is not True, (kid.run_id, kid.second_runner)
    return outcome


#: GitHub slower than one of the windows: showing the run or its job after the startup window,
#: listing it after the run-name search's, completing a cancel after the proof's 2 minutes.
SLOW = {
    "visibility_delay": 119.0,
    "jobs_delay": 130.0,
    "pending_delay": 150.0,
    "listing_delay": 100.0,
    "cancel_delay": 115.0,
    "force_cancel_delay": 70.0,
}


def other_trouble(outcome: Outcome) -> bool:
    """Whether a child left running at exit has a cause besides the quota (invariant 8).

    None is needed when no child is left, or GitHub never refused a request for a rate limit.
    These are causes: a signal (the signal path and the post step keep their limits, whatever
    the quota), rate-limit headers GitHub should never send (no reset to wait for), an API fault
    that fired (an outage can prevent cleanup: spec), GitHub slower than a window (`SLOW`).
    Otherwise the same case is run again with the quota never spent by others: a child left
    there too was left by something else.
    """
    world, case = outcome.world, outcome.case
    if not children_left_at_exit(world, outcome.observed):
        return False
    if not any(rate_limited(e) for e in world.ledger):
        return True
    if outcome.observed.interrupted_at is not None or case.odd_header is not None:
        return True
    if any(api_error(e) for e in world.ledger):
        return True
    if any(getattr(case.timings, name) >= slow for name, slow in SLOW.items()):
        return True
    calm = replace(case, quota_phase=None, quota_spent_at=None, quota_left=None)
    calm_outcome = simulate_case(calm)
    return bool(children_left_at_exit(calm_outcome.world, calm_outcome.observed))


# ---------------------------------------------------------------------------- strategies
#
# Every strategy is built once, at import: a strategy made afresh for each draw (a `weighted`
# list, a `moment` map, a nested composite) cost more than the draw itself, since hypothesis
# validates and labels each new one. A case is one composite whose helpers draw plain values
# (an index, an integer, a float) from these constants and build the scenario's objects in plain
# code; every field keeps the distribution, the shrink order (towards the first value) and the
# conditions it always had.

SMALL_DEADLINES = ("1", "1.5", "2", "3")
PATHS = (
    "",
    r"/dispatches$",
    r"/actions/runs/\d+$",
    r"/jobs$",
    r"/cancel$",
    r"/force-cancel$",
    r"/git/ref/",
    r"/contents/",
    r"/workflows/[^/]+/runs$",
)
#: 90 minutes: longer than a wait for the quota's reset.
LONG_WORKLOAD = 5400.0
#: Seconds after the phase's moment at which the quota is spent, by phase (see `spend_in_phase`).
PHASE_DELAYS: dict[str, tuple[float, ...]] = {
    # before the first identity read (15 s), just after it, and on to the window's last seconds
    "startup": (0.0, 5.0, 14.0, 16.0, 30.0, 60.0, 100.0, 118.0),
    # before the guard's reads (the runner starts its steps 5 s after it is assigned), then later
    "execution": (0.0, 3.0, 6.0, 8.0, 30.0, 120.0, 600.0),
    "parent": (0.0,),
    # right after the cancel POST, during the proof's 5 s polls, and near its 2-minute end
    "cancel": (0.0, 1.0, 5.0, 30.0, 100.0),
    # while the run-name search looks for the run whose dispatch reply was lost
    "search": (0.0, 5.0, 30.0, 60.0),
}
#: The startup window (the issue's failure) and the run-name search drawn twice as often.
PHASE_WEIGHTS = {"startup": 2, "search": 2}
#: Fractions of the candidate's queue deadline after its job is listed: early, late, at it, past.
QUEUE_FRACTIONS = (0.0, 0.3, 0.9, 1.0, 1.05)
#: Which of the coordinator's parent reads is the first refused: the one before the first
#: dispatch, or one while a child exists (the parent is read with the child's polls).
NTH_READ = (1, 2, 3, 4, 6, 10)
#: Header values GitHub should never send, read as absent.
ODD_HEADERS = (
    "nan",
    "inf",
    "-5",
    "1e400",
    "\u00b2",
    "Thu, 01 Jan 2026 00:00:30 -0000",
    "Thu, 01 Jan 2026 00:00:30",
    "soon",
)
#: Permission failures end a run at once: drawn rarer, so the other kinds get deep runs.
_FINAL = frozenset({"unauthorized", "forbidden"})

Busy = tuple[tuple[float, float], ...]


def weighted(*choices: tuple[int, Any]) -> st.SearchStrategy[Any]:
    """Values with weights: `weighted((8, 0.0), (1, 125.0))` is 0.0 eight times in nine."""
    return st.sampled_from([value for weight, value in choices for _ in range(weight)])


def _types_of(family: str | None) -> st.SearchStrategy[str]:
    """The runner types of a family; those for 3 to 8 GPUs (no pools) one draw in six."""
    types = [t for t, p in PROFILES.items() if family in {None, p.family}]
    pooled = sorted(t for t in types if PROFILES[t].pools)
    wide = sorted(t for t in types if not PROFILES[t].pools)
    if not wide:
        return st.sampled_from(pooled)
    return weighted((5, st.sampled_from(pooled)), (1, st.sampled_from(wide))).flatmap(
        lambda strategy: strategy
    )


_TYPES = {family: _types_of(family) for family in (None, "cpu", "gpu")}


@functools.cache
def _ints(low: int, high: int) -> st.SearchStrategy[int]:
    """`st.integers(low, high)`, one strategy per range."""
    return st.integers(low, high)


_BOOL = st.booleans()
#: A moment of the run in thousandths of its horizon (see `_moment`).
_PERMILLE = st.integers(0, 1000)
_POLICY = weighted((2, None), (2, "standard"), (1, "extended"))
# Short deadlines keep a run cheap; the profile defaults (10, 15, 60 min) still appear.
_QUEUE_MINUTES = weighted(*((3, m) for m in SMALL_DEADLINES), (1, "2.5"), (1, "5"), (1, None))
_EXECUTION = weighted((2, "1"), (2, "2"), (2, "5"), (2, "15"), (1, "30"), (1, "120"), (1, None))
_SOURCE_POLICY = st.sampled_from([None, "current", "pinned-after-start"])
_API_VERSION = weighted((6, None), (2, "auto"), (2, "2022-11-28"), (1, "2026-03-10"))
_OVERRIDE_MINUTES = st.sampled_from([1, 1.5, 2, 4])
_HOSTED_MINUTES = st.sampled_from([1, 2, 4])
_RUNNERS = weighted((6, 1), (1, 2), (1, 0))
_BUSY_SHAPE = weighted((3, "free"), (4, "full"), (2, "race"), (2, "until"), (2, "random"))
_RACE = st.floats(-20, 60)
_SPANS = st.lists(st.tuples(_PERMILLE, st.sampled_from([30.0, 200.0, 900.0, FOREVER])), max_size=3)
_OUTCOME = weighted((3, "success"), (1, "failure"))
_DURATION = weighted((3, 30.0), (1, 1.0), (2, 120.0), (1, 600.0), (1, 3000.0), (1, LONG_WORKLOAD))
_FAULT_COUNT = weighted((5, 0), (4, 1), (2, 2), (1, 3), (1, 4))
_FAULT_KIND = weighted(
    *((3, k) for k in FAULT_KINDS if k not in _FINAL), (1, "unauthorized"), (1, "forbidden")
)
_FAULT_STATUS = {
    "status": st.sampled_from([500, 502, 503, 504, 408]),
    "primary_rate_limit": st.sampled_from([None, 429]),
    "secondary_rate_limit": st.sampled_from([None, 429]),
    "lost_reply": st.sampled_from([None, 502]),
}
#: Whether a fault starts at 0 or at its drawn moment (the index of `(0.0, moment)`).
_AT_ZERO_OR_MOMENT = st.sampled_from([0, 1])
_FAULT_METHOD = weighted((2, "*"), (1, "GET"), (1, "POST"))
_FAULT_PATH = st.sampled_from(PATHS)
_FAULT_SPAN = st.sampled_from([30.0, 300.0, 3600.0, math.inf])
_FAULT_PROBABILITY = weighted((2, 1.0), (1, 0.5))
_RETRY_AFTER = st.sampled_from([0, 1, 5, 30, 60, 61, 120, 3600])
#: How GitHub paces the child: mostly prompt, sometimes slow, now and then past a window.
_TIMINGS: dict[str, st.SearchStrategy[float]] = {
    "visibility_delay": weighted(
        (8, 3.0), (3, 0.0), (3, 10.0), (2, 40.0), (1, 119.0), (1, 125.0), (1, 10_000.0)
    ),
    "jobs_delay": weighted((8, 2.0), (2, 0.0), (2, 10.0), (1, 60.0), (1, 130.0)),
    "start_delay": weighted((4, 5.0), (1, 0.0), (1, 30.0)),
    "guard_duration": weighted((2, 2.0), (1, 0.0), (1, 30.0)),
    "cancel_delay": weighted(
        (6, 3.0),
        (2, 0.0),
        (2, 10.0),
        (2, 30.0),
        (1, 59.0),
        (1, 61.0),
        (1, 115.0),
        (1, 130.0),
        (1, 10_000.0),
    ),
    "force_cancel_delay": weighted((4, 1.0), (1, 0.0), (1, 10.0), (1, 70.0), (1, 10_000.0)),
    "run_completion_lag": weighted((6, 0.0), (2, 2.0), (1, 10.0), (1, 40.0), (1, 200.0)),
    "job_completion_lag": weighted((6, 0.0), (2, 2.0), (1, 10.0), (1, 40.0), (1, 200.0)),
    "latency": weighted((6, 0.0), (1, 0.25), (1, 1.0), (1, 3.0)),
    "timeout_minutes": weighted((4, 15.0), (1, 1.0), (1, 5.0), (1, 60.0)),
    "requested_delay": weighted((6, 0.0), (1, 2.0), (1, 20.0)),
    "pending_delay": weighted((6, 0.0), (1, 5.0), (1, 40.0), (1, 150.0)),
    "listing_delay": weighted((6, 0.0), (1, 20.0), (1, 100.0), (1, 150.0), (1, 10_000.0)),
}
#: GitHub's 2026 behaviours (issue 28), each now and then: re-queues, zombies, unheeded cancels.
_PLATFORM: dict[str, st.SearchStrategy[Any]] = {
    "requeue": weighted((6, "off"), (1, "invisible"), (1, "visible")),
    "requeues": weighted((3, 1), (1, 2)),
    "requeue_after": weighted((3, 60.0), (1, 20.0), (1, 90.0)),
    "zombies": weighted((12, ()), (1, (1,)), (1, (2,))),
    "unheeded_cancel": weighted((6, False), (1, True)),
    "twice": weighted((12, ()), (1, (1,)), (1, (2,))),
}
_QUOTA_PHASE = weighted((12, None), *((PHASE_WEIGHTS.get(p, 1), p) for p in QUOTA_PHASES))
_NTH = weighted((3, 1), (1, 2))
_NTH_READ = st.sampled_from(NTH_READ)
_QUEUE_FRACTION = st.sampled_from(QUEUE_FRACTIONS)
_PHASE_DELAY = {phase: st.sampled_from(delays) for phase, delays in PHASE_DELAYS.items()}
_PARENT_VISIBLE = weighted((12, 0.0), (2, 20.0), (1, 110.0), (1, 130.0))
_PLANT = weighted((4, None), *((1, n) for n in range(len(PLANTS))))
_LAG_READS = weighted((6, 0), (1, 1), (1, 3), (1, 30))
_ODD_HEADER = weighted((6, None), *((1, value) for value in ODD_HEADERS))
_QUOTA_LEFT = weighted((12, None), (1, 0), (1, 30), (1, 200))
_OLDER_SERVER = weighted((3, False), (1, True))
#: A flood of hand dispatches just before the first child, now and then (issue 44).
#: A crowd is costly (each guard lists 1,200 runs): about one draw in 128, on a value that is no
#: bound (hypothesis favours the bounds of a range, and `weighted`'s first choice).
_CROWD = st.integers(0, 127).map(lambda n: 1200 if n == 91 else 0)


#: A pool an override names: group ("" none), labels (() none), the candidate's declaration.
OverridePool = tuple[str, tuple[str, ...], tuple[tuple[str, object], ...]]


@functools.cache
def _override_pools(runner_type: str) -> tuple[list[OverridePool], st.SearchStrategy[Any]]:
    """The pools an override of `runner_type` may name, and the strategy of its subsets.

    Besides the catalogue's, a team's own (issue 42): GitHub's default labels with no group
    (CPU), its own labels with a declaration (GPU), and a group alone with a declaration.
    """
    profile = PROFILES[runner_type]
    declared = (("os", "linux"), ("arch", profile.arch), ("gpus", profile.gpus))
    pools: list[OverridePool] = [(p.group, (p.labels,), ()) for p in profile.pools]
    if profile.family == "cpu":
        extra = [f"linux-{profile.arch}-cpu{n}" for n in (4, 64)]
        pools += [("nv-cpu-general", (label,), ()) for label in extra]
        arch_label = "X64" if profile.arch == "amd64" else "ARM64"
        pools.append(("", ("self-hosted", "Linux", arch_label), ()))
    else:
        pools.append(("team-gpu", ("self-hosted", "nvidia", "a6000"), declared))
    pools.append((f"team-{runner_type}", (), declared))
    return pools, st.lists(st.sampled_from(pools), min_size=1, max_size=6, unique=True)


def _override_item(group: str, labels: tuple[str, ...], declared: Any) -> dict[str, object]:
    """The candidate object of a pool: group and/or labels, as runs-on takes them, declared."""
    item: dict[str, object] = dict(declared)
    if group:
        item["group"] = group
    if labels:
        item["labels"] = labels[0] if len(labels) == 1 else list(labels)
    return item


def _overrides(draw: st.DrawFn, runner_type: str) -> str:
    """A valid `runners` list for `runner_type`: a reordered subset, maybe a re-wait, maybe hosted."""
    profile = PROFILES[runner_type]
    chosen = draw(_override_pools(runner_type)[1])
    items: list[dict[str, object]] = []
    for group, labels, declared in chosen:
        item = _override_item(group, labels, declared)
        if len(labels) == 1 and draw(_BOOL):
            item["labels"] = list(labels)
        if draw(_ints(0, 3)) == 0:
            item["queue-timeout-minutes"] = draw(_OVERRIDE_MINUTES)
        items.append(item)
    if len(items) < 7 and draw(_ints(0, 3)) == 0:
        first = dict(items[draw(_ints(0, len(items) - 1))])
        items.append({**first, "queue-timeout-minutes": 2})
    if profile.family == "cpu" and len(items) < 7 and draw(_BOOL):
        hosted: dict[str, object] = {"hosted": HOSTED_EXAMPLES[profile.arch]}  # issue 33: last
        if draw(_BOOL):
            hosted["queue-timeout-minutes"] = draw(_HOSTED_MINUTES)
        items.append(hosted)
    return json.dumps(items)


@st.composite
def _overrides_of(draw: st.DrawFn, runner_type: str) -> str:
    return _overrides(draw, runner_type)


@functools.cache
def candidate_overrides(runner_type: str) -> st.SearchStrategy[str]:
    """The `runners` JSON of `_overrides` as a strategy (the input fuzz test draws it too)."""
    return _overrides_of(runner_type)


def _configuration(draw: st.DrawFn, family: str | None) -> dict[str, str]:
    """Valid coordinator inputs: runner type, policy, overrides, deadlines, source policy."""
    runner_type = draw(_TYPES[family])
    profile = PROFILES[runner_type]
    inputs = base_inputs()
    inputs["runner-type"] = runner_type
    policy = draw(_POLICY)
    if policy is not None:
        inputs["queue-policy"] = policy
    minutes = draw(_QUEUE_MINUTES)
    if minutes is not None:
        inputs["queue-timeout-minutes"] = minutes
    if draw(_ints(0, 2)) == 0 or not profile.pools:  # 3 to 8 GPUs: `runners` is required
        inputs["runners"] = _overrides(draw, profile.runner_type)
    elif profile.family == "cpu" and draw(_BOOL):
        inputs["hosted-last-resort"] = HOSTED_EXAMPLES[profile.arch]
    execution = draw(_EXECUTION)
    if execution is not None:
        inputs["execution-timeout-minutes"] = execution
    source_policy = draw(_SOURCE_POLICY)
    if source_policy is not None:
        inputs["source-policy"] = source_policy
    if draw(_BOOL):
        inputs["workload"] = '{"shard": 1, "artifact": "build-7"}'
    if draw(_ints(0, 5)) == 0:
        inputs["workflow-ref"] = "refs/heads/main"
    api_version = draw(_API_VERSION)
    if api_version is not None:
        inputs["api-version"] = api_version
    return inputs


def _rough_starts(candidates: tuple[Candidate, ...]) -> list[float]:
    """Roughly when each candidate is dispatched if every earlier queue times out."""
    starts, t = [], 0.0
    for candidate in candidates:
        starts.append(t)
        t += 15 + candidate.queue_seconds + 10
    return starts


def _moment(draw: st.DrawFn, horizon: float) -> float:
    """A virtual second spread evenly over the run (floats would crowd 0 and the end)."""
    return _at_permille(draw(_PERMILLE), horizon)


def _at_permille(permille: int, horizon: float) -> float:
    return round(permille * horizon / 1000, 1)


def _busy(draw: st.DrawFn, start: float, deadline: float, horizon: float) -> Busy:
    """When a pool has no free runner: free, full, a race with the deadline, or random gaps."""
    shape = draw(_BUSY_SHAPE)
    if shape == "free":
        return ()
    if shape == "full":
        return ((0.0, FOREVER),)
    if shape == "race":  # frees up around the queue deadline: the queue/start race
        end = start + 15 + deadline + draw(_RACE)
        return ((0.0, max(0.0, end)),)
    if shape == "until":
        return ((0.0, _moment(draw, horizon)),)
    spans = [(_at_permille(s, horizon), d) for s, d in draw(_SPANS)]
    return tuple((s, s + d) for s, d in spans)


def _faults(draw: st.DrawFn, horizon: float) -> tuple[Fault, ...]:
    """API faults of every kind the simulator has, each with a bounded count so runs end."""
    found = []
    for _ in range(draw(_FAULT_COUNT)):
        kind = draw(_FAULT_KIND)
        status = draw(_FAULT_STATUS[kind]) if kind in _FAULT_STATUS else None
        at = _moment(draw, horizon)
        start = at if draw(_AT_ZERO_OR_MOMENT) else 0.0
        found.append(
            Fault(
                kind=kind,
                method=draw(_FAULT_METHOD),
                path=draw(_FAULT_PATH),
                start=start,
                end=start + draw(_FAULT_SPAN),
                count=draw(_ints(1, 4)),
                probability=draw(_FAULT_PROBABILITY),
                status=status,
                retry_after=draw(_RETRY_AFTER),
            )
        )
    return tuple(found)


def _pools(draw: st.DrawFn, settings: PoolSettings, horizon: float) -> tuple[PoolPlan, ...]:
    """The repository's runners for each candidate: none at all one time in ten, else a pool."""
    pools: dict[tuple[str, tuple[str, ...]], PoolPlan] = {}
    for start, candidate in zip(
        _rough_starts(settings.candidates), settings.candidates, strict=True
    ):
        key = pool_key(candidate.group, candidate.labels)
        if key in pools or draw(_ints(0, 9)) == 0:
            continue  # a pool the repository has no runners for at all
        pools[key] = PoolPlan(
            candidate.group,
            candidate.labels,
            runners=draw(_RUNNERS),
            busy=_busy(draw, start, candidate.queue_seconds, horizon),
            hosted=candidate.hosted,
        )
    return tuple(pools.values())


@functools.cache
def cases(family: str | None = None) -> st.SearchStrategy[Case]:
    """A random configuration (of CPU or GPU runner types) and a random world for it."""
    return _cases(family)


@st.composite
def _cases(draw: st.DrawFn, family: str | None) -> Case:
    inputs = _configuration(draw, family)
    settings = resolve({**inputs, "source-sha": "0" * 40})
    starts = _rough_starts(settings.candidates)
    horizon = starts[-1] + settings.candidates[-1].queue_seconds + 300
    pools = _pools(draw, settings, horizon)
    workload = Workload(outcome=draw(_OUTCOME), duration=draw(_DURATION))

    def sometimes(one_in: int) -> float | None:
        return _moment(draw, horizon) if draw(_ints(1, one_in)) == 1 else None

    phase = _quota_phase(draw, settings.candidates)
    lost_dispatch = phase.pop("lost_dispatch", None)
    lost = (lost_dispatch,) if lost_dispatch is not None else ()
    child_timings = Timings(**{name: draw(values) for name, values in _TIMINGS.items()})
    long_workload: bool = bool(phase) and draw(_BOOL)
    if long_workload:
        # A workload still running at the quota's reset, within its execution timeout and its
        # job's: what a coordinator that gave up during the wait would cancel when it comes back.
        workload = replace(workload, duration=LONG_WORKLOAD)
        inputs = {**inputs, "execution-timeout-minutes": "120"}
        child_timings = replace(child_timings, timeout_minutes=180.0)

    return Case(
        inputs=inputs,
        pools=pools,
        timings=child_timings,
        workload=workload,
        faults=lost + _faults(draw, horizon),
        seed=draw(_ints(0, 2**16)),
        move_source_at=sometimes(10),
        change_workflow_at=sometimes(12),
        parent_cancel_at=sometimes(12),
        parent_rerun_at=sometimes(15),
        parent_visible_after=draw(_PARENT_VISIBLE),
        interrupt_at=sometimes(12),
        guard=draw(_ints(0, 4)) != 0,
        unassigned_runner_as_zero=draw(_BOOL),
        plant=draw(_PLANT),
        lag_reads=draw(_LAG_READS),
        odd_header=draw(_ODD_HEADER),
        quota_spent_at=sometimes(8),
        quota_left=draw(_QUOTA_LEFT),
        older_server=draw(_OLDER_SERVER),
        platform=Platform(**{name: draw(values) for name, values in _PLATFORM.items()}),
        crowd=draw(_CROWD),
        **phase,
    )


def _quota_phase(draw: st.DrawFn, candidates: tuple[Candidate, ...]) -> dict[str, Any]:
    """Case fields: the quota spent inside one phase (two cases in five), or not at all.

    For the lost-reply search the first dispatch's reply is lost too (`lost_dispatch`: a fault
    for the case's list; its run really exists).
    """
    phase = draw(_QUOTA_PHASE)
    if phase is None:
        return {}
    nth = draw(_NTH) if phase != "parent" else draw(_NTH_READ)
    if phase == "queue":
        queue = candidates[min(nth, len(candidates)) - 1].queue_seconds
        delay = round(draw(_QUEUE_FRACTION) * queue, 1)
    else:
        delay = draw(_PHASE_DELAY[phase])
    fields: dict[str, Any] = {
        "quota_phase": phase,
        "quota_phase_delay": delay,
        "quota_phase_nth": 1 if phase == "search" else nth,
    }
    if phase == "search":
        status = draw(_FAULT_STATUS["lost_reply"])
        lost = Fault(kind="lost_reply", method="POST", path=r"/dispatches$", count=1, status=status)
        fields["lost_dispatch"] = lost
    return fields


# ---------------------------------------------------------------------------------- tests


#: The profile's examples are split between CPU and GPU runner types, and each half into shards
#: that pytest-xdist spreads over the cores (each parametrisation draws its own cases).
SHARDS = 8


@pytest.mark.parametrize("shard", range(SHARDS))
@pytest.mark.parametrize("family", ["cpu", "gpu"])
@settings(max_examples=max(1, settings().max_examples // (2 * SHARDS)))
@given(data=st.data())
def test_fuzz_coordinator_keeps_the_invariants_and_the_spec_bounds(
    family: str, shard: int, data: st.DataObject
) -> None:
    case = data.draw(cases(family), label="case")
    note(repr(case))
    outcome = execute(case)
    _classify(outcome)
    _record_mix(outcome)


def _classify(outcome: Outcome) -> None:
    """Label the run for `--hypothesis-show-statistics`: how it ended and what it went through."""
    run, world = outcome.run, outcome.world
    error = next((line for line in run.log.splitlines() if line.startswith("::error")), "")
    reason = error.split("::", 2)[-1][:60] if error else "success"
    event(f"exit {run.exit_code}: {reason}")
    event(f"dispatches: {len(world.history)}")
    fired = sorted({e.fault for e in world.ledger if e.fault})
    event(f"faults fired: {len(fired)}")
    for kind in fired:
        event(f"fault fired: {kind}")
    if outcome.observed.interrupted_at is not None:
        event("interrupted")
    if "NOT confirmed" in run.log + run.post_log:
        event("cleanup not confirmed")
    if any(e.fault is None and e.status in {403, 429} for e in world.ledger):
        event("quota spent")
    if "Waiting for API quota" in run.log:
        event("admission wait")
    _case_events(outcome.case)
    for kid in world.history.values():
        if kid.workload_started_at is not None and kid.conclusion == "cancelled":
            event("started workload cancelled")
        if kid.pool is not None and kid.pool[0] == "":  # `runs-on` without a group (issue 33)
            event("hosted child dispatched" + (", ran" if kid.allocated_at is not None else ""))


def _case_events(case: Case) -> None:
    """Label what the case drew: a quota spent inside a phase, a crowd before the first child."""
    if case.quota_phase is not None:
        event(f"quota spent in phase: {case.quota_phase}")
    if case.crowd:
        event(f"crowd of {case.crowd} hand dispatches before the first child")


#: `RQF_FUZZ_MIX=FILE` appends one JSON line per fuzzed run to FILE: the faults drawn and fired,
#: the phase the run reached, the quota phase drawn (`scripts/fuzz_cost.py` prints the shares).
MIX_FILE = os.environ.get("RQF_FUZZ_MIX")


def _record_mix(outcome: Outcome) -> None:
    """Keep what the run went through, so a change to the strategies can show the mix it keeps."""
    if MIX_FILE:
        with open(MIX_FILE, "a", encoding="utf-8") as out:  # noqa: PTH123  # one line per run
            out.write(json.dumps(run_mix(outcome)) + "\n")


def run_mix(outcome: Outcome) -> dict[str, Any]:
    """The faults drawn and fired, the furthest phase reached, and the flags of the run."""
    case, world, observed = outcome.case, outcome.world, outcome.observed
    end = next((stop for name, _, stop in observed.commands if name == "coordinate"), math.inf)
    kids = sorted(world.history.values(), key=lambda h: h.dispatched_at)
    reached = "no dispatch"
    for kid in kids:
        for phase, at in (
            ("startup", kid.dispatched_at),
            ("queue", kid.job_queued_at),
            ("execution", kid.allocated_at),
            ("workload", kid.workload_started_at),
        ):
            if (
                at is not None
                and at <= end
                and PHASES_REACHED.index(phase) > PHASES_REACHED.index(reached)
            ):
                reached = phase
    return {
        "family": next(p.family for t, p in PROFILES.items() if t == case.inputs["runner-type"]),
        "drawn": sorted({f.kind for f in case.faults}),
        "fired": sorted({e.fault for e in world.ledger if e.fault}),
        "reached": reached,
        "quota_phase": case.quota_phase,
        "flags": sorted(
            name
            for name, on in (
                ("fallback", len(kids) > 1),
                ("cancel", any(k.cancel_requested_at is not None for k in kids)),
                ("interrupted", observed.interrupted_at is not None),
                ("rate limited", any(rate_limited(e) for e in world.ledger)),
                ("success", outcome.run.exit_code == 0),
            )
            if on
        ),
    }


#: The phases of a child, in the order a run reaches them (`run_mix`).
PHASES_REACHED = ("no dispatch", "startup", "queue", "execution", "workload")
