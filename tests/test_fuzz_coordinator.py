"""Fuzz the real coordinator (and the guard in the child) against random worlds on virtual time.

Hypothesis draws a configuration (runner type, policy, overrides, deadlines, execution timeout,
source policy) and a world (pool availability over time, cancel delays and reporting lags, the
workload, API faults of every kind with bounded counts, the repository's quota spent by other
workflows, source/workflow changes, the parent cancelled or re-run, a SIGTERM), runs `coordinate`
and its post step through the simulation harness, and checks the invariants of DESIGN.md and
the spec's bounds after every run (`tests.invariants.check_invariants` and `check_spec_bounds`).

A `Case` is plain data, so every bug the fuzzer finds is replayed by name in test_regressions.py.
Profiles (`RQF_FUZZ_PROFILE`): `ci` (default, derandomized) and `nightly` (see conftest.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import pytest
from hypothesis import event, given, note, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from runner_queue_fallback import cli
from runner_queue_fallback.clock import FakeClock
from runner_queue_fallback.commands import Main
from runner_queue_fallback.errors import Interrupted
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.inputs import PoolSettings, env_name, read_pool_settings
from runner_queue_fallback.plan import make_plan
from runner_queue_fallback.profiles import Candidate, load_profiles
from runner_queue_fallback.sim.faults import FAULT_KINDS, Fault, FaultPlan
from runner_queue_fallback.sim.model import Timings, Workload
from runner_queue_fallback.sim.world import API_VERSIONS, OLDER_SERVER, FakeGitHub
from runner_queue_fallback.simulation import (
    PARENT_RUN_ID,
    SOURCE_REF,
    SimulationRun,
    guard_hook,
    run_coordinator,
    standard_world,
)
from tests.invariants import (
    Observed,
    Send,
    check_invariants,
    check_spec_bounds,
    check_truth,
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
    return read_pool_settings({env_name(k): v for k, v in inputs.items()}, PROFILES)


# ------------------------------------------------------------------------------- running


@contextlib.contextmanager
def _instruments(clock: FakeClock, observed: Observed) -> Iterator[None]:
    """Record every HTTP send with the client's attempt number."""
    real_send = GitHubClient._send

    def send(self: GitHubClient, method: str, path: str, **kwargs: Any) -> Any:
        body = kwargs.get("json")
        observed.sends.append(
            Send(
                token=self._token,
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


def build_world(case: Case, clock: FakeClock, observed: Observed) -> tuple[FakeGitHub, str]:
    """The fake repository of `case`, with the real guard as the child's first step."""
    world = FakeGitHub(
        clock,
        timings=case.timings,
        workload=case.workload,
        faults=FaultPlan(list(case.faults), case.seed),
        unassigned_runner_as_zero=case.unassigned_runner_as_zero,
        api_versions=OLDER_SERVER if case.older_server else API_VERSIONS,
        direct=True,  # requests' own path is under test elsewhere; here it would cost a third
    )
    if case.guard and GUARD:
        world.on_worker_start = guard_hook(
            world, clock, observed.guard_logs, main=_recording_main(clock, observed)
        )
    world, sha = standard_world(clock, world)
    rules = [plant_rule(PLANTS[case.plant])] if case.plant is not None else []
    rules += [lag_rule(case.lag_reads)] if case.lag_reads else []
    rules += [odd_header_rule(case.odd_header)] if case.odd_header is not None else []
    if rules:
        Tamper(world, rules, keep_304=True).install()
    world.runs[PARENT_RUN_ID].visible_at = case.parent_visible_after
    for pool in case.pools:
        world.add_pool(pool.group, pool.labels, runners=pool.runners, busy=pool.busy)
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
    return world, sha


def execute(case: Case) -> Outcome:
    """Run `case` through the harness and check every invariant and spec bound."""
    clock = FakeClock()
    observed = Observed()
    world, sha = build_world(case, clock, observed)
    inputs = {**case.inputs, "source-sha": sha}
    settings = resolve(inputs)
    if case.interrupt_at is not None:
        _interrupt(clock, case.interrupt_at, observed)
    with _instruments(clock, observed):
        run = run_coordinator(world, clock, inputs, main=_recording_main(clock, observed))
    run.guard_logs = list(observed.guard_logs)
    if currently_in_test_context():
        note(
            f"exit {run.exit_code}, post {run.post_exit_code}; log:\n{run.log}\npost:\n{run.post_log}"
        )
    outcome = Outcome(case, world, clock, run, settings, observed)
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
    return outcome


# ---------------------------------------------------------------------------- strategies

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


def weighted(*choices: tuple[int, Any]) -> st.SearchStrategy[Any]:
    """Values with weights: `weighted((8, 0.0), (1, 125.0))` is 0.0 eight times in nine."""
    return st.sampled_from([value for weight, value in choices for _ in range(weight)])


@st.composite
def candidate_overrides(draw: st.DrawFn, runner_type: str) -> str:
    """A valid `runners` JSON list for `runner_type`: a reordered subset, maybe a final re-wait."""
    profile = PROFILES[runner_type]
    pools = [(p.group, p.labels) for p in profile.pools]
    if profile.family == "cpu":
        extra = [f"linux-{profile.arch}-cpu{n}" for n in (4, 64)]
        pools += [("nv-cpu-general", label) for label in extra]
    chosen = draw(st.lists(st.sampled_from(pools), min_size=1, max_size=6, unique=True))
    items: list[dict[str, object]] = []
    for group, labels in chosen:
        item: dict[str, object] = {"group": group, "labels": labels}
        if draw(st.booleans()):
            item["labels"] = [labels]
        if draw(st.integers(0, 3)) == 0:
            item["queue-timeout-minutes"] = draw(st.sampled_from([1, 1.5, 2, 4]))
        items.append(item)
    if len(items) < 7 and draw(st.integers(0, 3)) == 0:
        first = items[draw(st.integers(0, len(items) - 1))]
        items.append(
            {"group": first["group"], "labels": first["labels"], "queue-timeout-minutes": 2}
        )
    return json.dumps(items)


@st.composite
def configurations(draw: st.DrawFn, family: str | None = None) -> dict[str, str]:
    """Valid coordinator inputs: runner type, policy, overrides, deadlines, source policy."""
    types = sorted(t for t, p in PROFILES.items() if family in {None, p.family})
    runner_type = draw(st.sampled_from(types))
    inputs = base_inputs()
    inputs["runner-type"] = runner_type
    policy = draw(weighted((2, None), (2, "standard"), (1, "extended")))
    if policy is not None:
        inputs["queue-policy"] = policy
    # Short deadlines keep a run cheap; the profile defaults (10, 15, 60 min) still appear.
    minutes = draw(weighted(*((3, m) for m in SMALL_DEADLINES), (1, "2.5"), (1, "5"), (1, None)))
    if minutes is not None:
        inputs["queue-timeout-minutes"] = minutes
    if draw(st.integers(0, 2)) == 0:
        inputs["runners"] = draw(candidate_overrides(PROFILES[runner_type].runner_type))
    execution = draw(weighted((2, "1"), (2, "2"), (2, "5"), (2, "15"), (1, "30"), (1, None)))
    if execution is not None:
        inputs["execution-timeout-minutes"] = execution
    source_policy = draw(st.sampled_from([None, "current", "pinned-after-start"]))
    if source_policy is not None:
        inputs["source-policy"] = source_policy
    if draw(st.booleans()):
        inputs["workload"] = '{"shard": 1, "artifact": "build-7"}'
    if draw(st.integers(0, 5)) == 0:
        inputs["workflow-ref"] = "refs/heads/main"
    api_version = draw(weighted((6, None), (2, "auto"), (2, "2022-11-28"), (1, "2026-03-10")))
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


Busy = tuple[tuple[float, float], ...]


def moment(horizon: float) -> st.SearchStrategy[float]:
    """A virtual second spread evenly over the run (floats would crowd 0 and the end)."""
    return st.integers(0, 1000).map(lambda n: round(n * horizon / 1000, 1))


@st.composite
def busy_intervals(draw: st.DrawFn, start: float, deadline: float, horizon: float) -> Busy:
    """When a pool has no free runner: free, full, a race with the deadline, or random gaps."""
    shape = draw(weighted((3, "free"), (4, "full"), (2, "race"), (2, "until"), (2, "random")))
    if shape == "free":
        return ()
    if shape == "full":
        return ((0.0, FOREVER),)
    if shape == "race":  # frees up around the queue deadline: the queue/start race
        end = start + 15 + deadline + draw(st.floats(-20, 60))
        return ((0.0, max(0.0, end)),)
    if shape == "until":
        return ((0.0, draw(moment(horizon))),)
    spans = draw(
        st.lists(
            st.tuples(moment(horizon), st.sampled_from([30.0, 200.0, 900.0, FOREVER])),
            max_size=3,
        )
    )
    return tuple((s, s + d) for s, d in spans)


@st.composite
def faults(draw: st.DrawFn, horizon: float) -> tuple[Fault, ...]:
    """API faults of every kind the simulator has, each with a bounded count so runs end."""
    found = []
    for _ in range(draw(weighted((5, 0), (4, 1), (2, 2), (1, 3), (1, 4)))):
        # Permission failures end a run at once: rarer, so the other kinds get deep runs.
        kind = draw(
            weighted(
                *((3, k) for k in FAULT_KINDS if k not in _FINAL),
                (1, "unauthorized"),
                (1, "forbidden"),
            )
        )
        status = None
        if kind == "status":
            status = draw(st.sampled_from([500, 502, 503, 504, 408]))
        elif kind in {"primary_rate_limit", "secondary_rate_limit"}:
            status = draw(st.sampled_from([None, 429]))
        elif kind == "lost_reply":
            status = draw(st.sampled_from([None, 502]))
        start = draw(st.sampled_from([0.0, draw(moment(horizon))]))
        found.append(
            Fault(
                kind=kind,
                method=draw(weighted((2, "*"), (1, "GET"), (1, "POST"))),
                path=draw(st.sampled_from(PATHS)),
                start=start,
                end=start + draw(st.sampled_from([30.0, 300.0, 3600.0, math.inf])),
                count=draw(st.integers(1, 4)),
                probability=draw(weighted((2, 1.0), (1, 0.5))),
                status=status,
                retry_after=draw(st.sampled_from([0, 1, 5, 30, 60, 61, 120, 3600])),
            )
        )
    return tuple(found)


_FINAL = frozenset({"unauthorized", "forbidden"})


@st.composite
def timings(draw: st.DrawFn) -> Timings:
    """How GitHub paces the child: mostly prompt, sometimes slow, now and then past a window."""
    return Timings(
        visibility_delay=draw(
            weighted(
                (8, 3.0), (3, 0.0), (3, 10.0), (2, 40.0), (1, 119.0), (1, 125.0), (1, 10_000.0)
            )
        ),
        jobs_delay=draw(weighted((8, 2.0), (2, 0.0), (2, 10.0), (1, 60.0), (1, 130.0))),
        start_delay=draw(weighted((4, 5.0), (1, 0.0), (1, 30.0))),
        guard_duration=draw(weighted((2, 2.0), (1, 0.0), (1, 30.0))),
        cancel_delay=draw(
            weighted(
                (6, 3.0),
                (2, 0.0),
                (2, 10.0),
                (2, 30.0),
                (1, 59.0),
                (1, 61.0),
                (1, 115.0),
                (1, 130.0),
                (1, 10_000.0),
            )
        ),
        force_cancel_delay=draw(weighted((4, 1.0), (1, 0.0), (1, 10.0), (1, 70.0), (1, 10_000.0))),
        run_completion_lag=draw(weighted((6, 0.0), (2, 2.0), (1, 10.0), (1, 40.0), (1, 200.0))),
        job_completion_lag=draw(weighted((6, 0.0), (2, 2.0), (1, 10.0), (1, 40.0), (1, 200.0))),
        latency=draw(weighted((6, 0.0), (1, 0.25), (1, 1.0), (1, 3.0))),
        timeout_minutes=draw(weighted((4, 15.0), (1, 1.0), (1, 5.0), (1, 60.0))),
        requested_delay=draw(weighted((6, 0.0), (1, 2.0), (1, 20.0))),
        pending_delay=draw(weighted((6, 0.0), (1, 5.0), (1, 40.0), (1, 150.0))),
        listing_delay=draw(weighted((6, 0.0), (1, 20.0), (1, 100.0), (1, 150.0), (1, 10_000.0))),
    )


@st.composite
def cases(draw: st.DrawFn, family: str | None = None) -> Case:
    """A random configuration (of CPU or GPU runner types) and a random world for it."""
    inputs = draw(configurations(family))
    settings = resolve({**inputs, "source-sha": "0" * 40})
    starts = _rough_starts(settings.candidates)
    horizon = starts[-1] + settings.candidates[-1].queue_seconds + 300
    pools: dict[tuple[str, tuple[str, ...]], PoolPlan] = {}
    for start, candidate in zip(starts, settings.candidates, strict=True):
        labels = (candidate.labels,) if isinstance(candidate.labels, str) else candidate.labels
        key = (candidate.group, tuple(sorted(labels)))
        if key in pools or draw(st.integers(0, 9)) == 0:
            continue  # a pool the repository has no runners for at all
        pools[key] = PoolPlan(
            candidate.group,
            candidate.labels,
            runners=draw(weighted((6, 1), (1, 2), (1, 0))),
            busy=draw(busy_intervals(start, candidate.queue_seconds, horizon)),
        )
    workload = Workload(
        outcome=draw(weighted((3, "success"), (1, "failure"))),
        duration=draw(weighted((3, 30.0), (1, 1.0), (2, 120.0), (1, 600.0), (1, 3000.0))),
    )

    def sometimes(one_in: int) -> float | None:
        return draw(moment(horizon)) if draw(st.integers(1, one_in)) == 1 else None

    return Case(
        inputs=inputs,
        pools=tuple(pools.values()),
        timings=draw(timings()),
        workload=workload,
        faults=draw(faults(horizon)),
        seed=draw(st.integers(0, 2**16)),
        move_source_at=sometimes(10),
        change_workflow_at=sometimes(12),
        parent_cancel_at=sometimes(12),
        parent_rerun_at=sometimes(15),
        parent_visible_after=draw(weighted((12, 0.0), (2, 20.0), (1, 110.0), (1, 130.0))),
        interrupt_at=sometimes(12),
        guard=draw(st.integers(0, 4)) != 0,
        unassigned_runner_as_zero=draw(st.booleans()),
        plant=draw(weighted((4, None), *((1, n) for n in range(len(PLANTS))))),
        lag_reads=draw(weighted((6, 0), (1, 1), (1, 3), (1, 30))),
        odd_header=draw(weighted((6, None), *((1, value) for value in ODD_HEADERS))),
        quota_spent_at=sometimes(8),
        quota_left=draw(weighted((12, None), (1, 0), (1, 30), (1, 200))),
        older_server=draw(weighted((3, False), (1, True))),
    )


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
