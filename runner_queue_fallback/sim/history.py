"""A realistic past for the fake GitHub: many finished fallback sequences across runner pools.

Each sequence is one coordinator run: its children try pools in order, each waiting a queue time
drawn from that pool's distribution; a wait past the deadline is a child cancelled with no runner
(the coordinator moves on), a runner arriving while the cancel is in flight is a race (the
sequence stops), and a few unrelated runs of the same workflow (manual dispatches) are mixed in.
Everything is served by the ordinary endpoints, pagination and JSON of `FakeGitHub`.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from runner_queue_fallback.sim.actions import ActionsModel

__all__ = ["Exponential", "HistorySpec", "LogNormal", "Never", "PoolHistory", "generate_history"]

#: Seconds between a child's cancel and the next candidate's dispatch (confirm, preflight).
NEXT_CANDIDATE_DELAY = 12.0
#: Seconds a cancel takes to land on GitHub: a runner arriving inside it is a race.
CANCEL_LANDS = 3.0


@dataclass(frozen=True)
class Exponential:
    """Queue waits `delay + Exp(mean)` seconds: a busy pool that frees runners at random."""

    mean: float
    delay: float = 0.0

    def sample(self, rng: random.Random) -> float:
        """One wait."""
        return self.delay + rng.expovariate(1.0 / self.mean)

    def cdf(self, seconds: float) -> float:
        """P(wait <= seconds), the truth a measurement should find."""
        return 0.0 if seconds < self.delay else 1.0 - math.exp(-(seconds - self.delay) / self.mean)


@dataclass(frozen=True)
class LogNormal:
    """Queue waits with median `median` seconds and log-spread `sigma`: mostly quick, long tail."""

    median: float
    sigma: float

    def sample(self, rng: random.Random) -> float:
        """One wait."""
        return rng.lognormvariate(math.log(self.median), self.sigma)

    def cdf(self, seconds: float) -> float:
        """P(wait <= seconds)."""
        if seconds <= 0:
            return 0.0
        z = (math.log(seconds) - math.log(self.median)) / self.sigma
        return 0.5 * math.erfc(-z / math.sqrt(2))


@dataclass(frozen=True)
class Never:
    """A pool whose runners never come (offline, or not granted to the repository)."""

    def sample(self, rng: random.Random) -> float:
        """Always infinite."""
        del rng
        return math.inf

    def cdf(self, seconds: float) -> float:
        """Always 0."""
        del seconds
        return 0.0


Distribution = Exponential | LogNormal | Never


@dataclass(frozen=True)
class PoolHistory:
    """One pool of the past: where it is and how long its queue made children wait."""

    group: str
    labels: str
    waits: Distribution

    @property
    def runner(self) -> str:
        """The child's `runner` input for this pool."""
        return json.dumps({"group": self.group, "labels": self.labels}, separators=(",", ":"))


@dataclass(frozen=True)
class HistorySpec:
    """What to generate: pools, the orders (pool index, deadline minutes) sequences used, when."""

    pools: Sequence[PoolHistory]
    orders: Sequence[Sequence[tuple[int, float]]]
    sequences: int = 300
    days: float = 14.0
    seed: int = 1
    workflow: str = "runner-worker.yml"
    unrelated: int = 5  # runs of the same workflow that are not ours (manual dispatches)
    workload_seconds: float = 600.0
    failure_rate: float = 0.1
    first_run_id: int = 7_000_001  # parent run ids of the generated sequences
    truth: dict[str, list[float]] = field(default_factory=dict)  # every drawn wait, by labels


def generate_history(world: ActionsModel, spec: HistorySpec) -> int:
    """Add `spec.sequences` finished sequences (and unrelated runs) before now; the child count.

    Every drawn wait is appended to `spec.truth[labels]`, censored or not, so a test can compare
    a measurement with what really happened as well as with the distribution.
    """
    rng = random.Random(spec.seed)
    now = world.now()
    starts = sorted(now - rng.uniform(2 * 3600, spec.days * 86400) for _ in range(spec.sequences))
    unrelated = {rng.randrange(len(starts)) for _ in range(spec.unrelated)} if starts else set()
    children = 0
    for number, start in enumerate(starts):
        if number in unrelated:
            _add_unrelated(world, spec, start - 60.0)
        order = spec.orders[rng.randrange(len(spec.orders))]
        children += _add_sequence(
            world, spec, rng, parent=spec.first_run_id + number, start=start, order=order
        )
    return children


def _add_unrelated(world: ActionsModel, spec: HistorySpec, at: float) -> None:
    """A manual dispatch of the worker workflow: its run-name is no request id."""
    pool = spec.pools[0]
    world.add_past_run(
        spec.workflow,
        "Runner worker",
        inputs={"runner": pool.runner, "request-id": ""},
        created_at=at,
        completed_at=at + 120.0,
        conclusion="success",
        allocated_at=at + 30.0,
        workload_started=True,
    )


def _add_sequence(
    world: ActionsModel,
    spec: HistorySpec,
    rng: random.Random,
    *,
    parent: int,
    start: float,
    order: Sequence[tuple[int, float]],
) -> int:
    at = start
    token = f"{rng.getrandbits(32):08x}"
    for candidate, (index, minutes) in enumerate(order, start=1):
        pool = spec.pools[index]
        wait = pool.waits.sample(rng)
        spec.truth.setdefault(pool.labels, []).append(wait)
        deadline = minutes * 60.0
        queued = at + world.timings.jobs_delay
        inputs = {
            "request-id": f"rqf-{parent}-1-{candidate}-{token}",
            "parent-run-id": str(parent),
            "parent-run-attempt": "1",
            "runner": pool.runner,
        }

        title = inputs["request-id"]
        if wait <= deadline:
            end = queued + wait + spec.workload_seconds
            outcome = "failure" if rng.random() < spec.failure_rate else "success"
            world.add_past_run(
                spec.workflow,
                title,
                inputs=inputs,
                created_at=at,
                completed_at=end,
                conclusion=outcome,
                allocated_at=queued + wait,
                workload_started=True,
            )
            return candidate
        if wait <= deadline + CANCEL_LANDS:  # the runner came while the cancel was in flight
            world.add_past_run(
                spec.workflow,
                title,
                inputs=inputs,
                created_at=at,
                completed_at=queued + wait + 1.0,
                conclusion="cancelled",
                allocated_at=queued + wait,
            )
            return candidate
        cancelled = queued + deadline + CANCEL_LANDS
        world.add_past_run(
            spec.workflow,
            title,
            inputs=inputs,
            created_at=at,
            completed_at=cancelled,
            conclusion="cancelled",
        )
        at = cancelled + NEXT_CANDIDATE_DELAY
    return len(order)
