"""What a simple world should do to a coordinator, worked out before it runs: story and expectation.

`simulate` states an expectation for every run. A catalogue scenario states its own; when flags
change a scenario's pools or workload (or there is no scenario, only flags), the expectation and
the one-line story are recomputed here from the pools' busy spans, the candidates' deadlines and
the workload. A world whose outcome hinges on a few seconds (a pool freed right at a deadline, a
workload ending right at its timeout) still runs: `TooClose` says what the outcome turns on, and
`simulate` says afterwards which way it went. One with faults, events, several coordinators,
GitHub's own surprises (`Platform`: re-queues, runs without a job, a cancel that does not take)
or runner groups (whose settings decide which pools take the child) is not predicted:
`Unpredictable` says which flag to change.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from runner_queue_fallback.core.labels import same_labels
from runner_queue_fallback.core.profiles import Candidate
from runner_queue_fallback.fake_github.model import DEFAULT_PLATFORM
from runner_queue_fallback.fake_github.scenario import PoolSpec, Scenario
from runner_queue_fallback.tools.simulate.scenarios import Expectation

__all__ = ["Prediction", "TooClose", "Unpredictable", "predict"]

#: Dispatch to the worker job being listed (visibility + jobs delays), and to the first check.
_JOB_LISTED = 5.0
_FIRST_CHECK = 15.0
#: From a deadline to the next dispatch: cancel, confirm (5 s polls), the next preflight.
_BETWEEN = 15.0
#: Runner assigned to workload start: the start delay and the guard.
_TO_WORKLOAD = 10.0
#: Closer than this (plus a little per candidate, as estimates add up) is too close to call.
_MARGIN = 60.0
_MARGIN_PER_CANDIDATE = 30.0


class Unpredictable(ValueError):
    """The outcome cannot be stated in advance; the message says what to change."""


class TooClose(Unpredictable):
    """The outcome turns on a few seconds: the world runs, and which way it went is told after.

    `story`: what is known before the hinge; `pool`: the labels of the pool freed near its
    deadline (None: the workload ends near its timeout); `hinge`: what the outcome turns on.
    """

    def __init__(self, hinge: str, story: Sequence[str], *, pool: str | None) -> None:
        """One message: what is known, then what the outcome turns on."""
        super().__init__(hinge)
        self.hinge = hinge
        self.story = "; ".join([*story, hinge])
        self.pool = pool


@dataclass(frozen=True)
class Prediction:
    """The expectation and a one-line story of what happens."""

    expect: Expectation
    story: str


def _free_from(pool: PoolSpec | None, start: float) -> float:
    """The first moment at or after `start` when `pool` has a free runner (inf: never)."""
    if pool is None or pool.runners < 1:
        return math.inf
    at, moved = start, True
    while moved:
        moved = False
        for begin, end in pool.busy:
            if begin <= at < end:
                at, moved = end, True
    return at


def _pool_of(world: Scenario, candidate: Candidate) -> PoolSpec | None:
    for pool in world.pools:
        # a hosted candidate has no group: it matches the hosted pool of its labels
        same = pool.hosted if candidate.hosted else pool.group == candidate.group
        if same and same_labels(pool.labels, candidate.labels):
            return pool
    return None


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min"


def _busy_past(name: str, free: float, queue_seconds: float) -> str:
    """A pool busy beyond its queue deadline, as its busy span says (from the run's start)."""
    deadline = f"its {_minutes(queue_seconds)} queue deadline"
    if math.isinf(free):
        return f"{name} never has a free runner, so {deadline} passes"
    return f"{name} has no free runner until {_minutes(free)} into the run, after {deadline}"


def predict(world: Scenario, candidates: Sequence[Candidate], execution_minutes: int) -> Prediction:
    """The expectation for one coordinator with `candidates` in `world` (or Unpredictable)."""
    if world.faults or world.events:
        raise Unpredictable("its world has faults or repository events")
    if world.runner_groups is not None:
        raise Unpredictable(
            "its world has runner groups, whose settings decide which pools may take the child "
            "(and, with `runners-token`, which the coordinator skips); run it without flags"
        )
    if world.platform != DEFAULT_PLATFORM:
        raise Unpredictable(
            "its world re-queues jobs, never gives a run its job, or ignores a cancel (its "
            "`platform`); run it without flags"
        )
    story: list[str] = []
    start = 0.0
    for number, candidate in enumerate(candidates, start=1):
        pool = _pool_of(world, candidate)
        deadline = start + _FIRST_CHECK + candidate.queue_seconds
        free = _free_from(pool, start + _JOB_LISTED)
        margin = _MARGIN + _MARGIN_PER_CANDIDATE * number
        name = candidate.label_text
        if abs(free - deadline) < margin:
            raise TooClose(
                f"{name} frees a runner {_minutes(free)} into the run, within {margin:.0f} s of its "
                f"{_minutes(candidate.queue_seconds)} queue deadline: whether it gets the job or "
                "its child is cancelled depends on the timing",
                story,
                pool=name,
            )
        if free < deadline:
            return _served(
                world,
                pool,
                candidate,
                number=number,
                allocated=free,
                execution_minutes=execution_minutes,
                story=story,
            )
        story.append(_busy_past(name, free, candidate.queue_seconds))
        start = deadline + _BETWEEN
    story.append("every queue is exhausted")
    expect = Expectation(exit_code=1, attempts=len(candidates), served_by=None)
    return Prediction(expect, "; ".join(story))


def _served(
    world: Scenario,
    pool: PoolSpec | None,
    candidate: Candidate,
    *,
    number: int,
    allocated: float,
    execution_minutes: int,
    story: list[str],
) -> Prediction:
    workload = (pool.workload if pool is not None else None) or world.workload
    limit = min(execution_minutes, world.timings.timeout_minutes) * 60.0
    runs_for = _TO_WORKLOAD + workload.duration
    waited = f" after about {allocated / 60:.0f} min" if allocated > _JOB_LISTED else ""
    story.append(f"{candidate.label_text} gives the worker a runner{waited}")
    if abs(runs_for - limit) < _MARGIN:
        raise TooClose(
            f"the workload ({_minutes(workload.duration)}) ends within {_MARGIN:.0f} s of its "
            f"{_minutes(limit)} timeout: whether it finishes or is cut off depends on the timing",
            story,
            pool=None,
        )
    if runs_for > limit:
        story.append(f"the workload is cut off at the {_minutes(limit)} timeout")
        exit_code = 1
    else:
        story.append(
            f"the workload {'succeeds' if workload.outcome == 'success' else 'fails'} "
            f"after {_minutes(workload.duration)}"
        )
        exit_code = 0 if workload.outcome == "success" else 1
    served = candidate.label_text or candidate.group  # a group alone is named by the group
    expect = Expectation(exit_code=exit_code, attempts=number, served_by=served)
    return Prediction(expect, "; ".join(story))
