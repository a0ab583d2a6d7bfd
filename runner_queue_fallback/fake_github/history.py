"""A realistic past for the fake GitHub: many finished fallback sequences across runner pools.

Each sequence is one coordinator run: its children try pools in order, each waiting a queue time
drawn from that pool's distribution; a wait past the deadline is a child cancelled with no runner
(the coordinator moves on), a runner arriving while the cancel is in flight is a race (the
sequence stops), and a few unrelated runs of the same workflow (manual dispatches) are mixed in.
Two traps of real history can be added (github-api.md 12): children re-run with "re-run failed
jobs", whose worker job is carried into attempt 2 with its old `started_at` and a newer
`created_at`, and children whose job still shows `queued` (no runner) although its steps ran.
Everything is served by the ordinary endpoints, pagination and JSON of `FakeGitHub`.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from runner_queue_fallback.core.labels import Labels, as_list, canonical, label_names
from runner_queue_fallback.fake_github.actions import ActionsModel
from runner_queue_fallback.fake_github.model import FakeRun

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
    """One pool of the past: where it is and how long its queue made children wait.

    A group, labels or both, as `runs-on` takes them ("" and (): not given).
    """

    group: str
    labels: Labels
    waits: Distribution

    @property
    def runner(self) -> str:
        """The child's `runner` input for this pool: what is given of its group and labels."""
        runs_on: dict[str, object] = {"group": self.group} if self.group else {}
        if label_names(self.labels):
            runs_on["labels"] = (
                self.labels if isinstance(self.labels, str) else as_list(self.labels)
            )
        return json.dumps(runs_on, separators=(",", ":"))


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
    carried_forward: int = 0  # allocated children re-run later, their job carried into attempt 2
    queued_with_steps: int = 0  # allocated children whose job still shows `queued`
    #: every drawn wait, by the pool's labels as a set (`core/labels.py: canonical`)
    truth: dict[str, list[float]] = field(default_factory=dict)


def generate_history(world: ActionsModel, spec: HistorySpec) -> int:
    """Add `spec.sequences` finished sequences (and unrelated runs) before now; the child count.

    Every drawn wait is appended to `spec.truth[canonical(labels)]`, censored or not, so a test
    can compare a measurement with what really happened as well as with the distribution.
    """
    rng = random.Random(spec.seed)
    now = world.now()
    starts = sorted(now - rng.uniform(2 * 3600, spec.days * 86400) for _ in range(spec.sequences))
    unrelated = {rng.randrange(len(starts)) for _ in range(spec.unrelated)} if starts else set()
    children = 0
    before = set(world.runs)
    for number, start in enumerate(starts):
        if number in unrelated:
            _add_unrelated(world, spec, start - 60.0)
        order = spec.orders[rng.randrange(len(spec.orders))]
        children += _add_sequence(
            world, spec, rng, parent=spec.first_run_id + number, start=start, order=order
        )
    ran = [r for i, r in world.runs.items() if i not in before and r.job and r.job.runner_id]
    _add_traps(world, spec, [r for r in ran if r.display_title.startswith("rqf-")])
    return children


def _add_traps(world: ActionsModel, spec: HistorySpec, ran: list[FakeRun]) -> None:
    """Re-run some allocated children, and leave some jobs showing `queued` (own seed)."""
    if not spec.carried_forward + spec.queued_with_steps:
        return
    rng = random.Random(spec.seed + 1)
    picked = rng.sample(ran, min(len(ran), spec.carried_forward + spec.queued_with_steps))
    for run in picked[: spec.carried_forward]:
        _carry_forward(world, run, rng)
    for run in picked[spec.carried_forward :]:
        _still_queued(run)


def _carry_forward(world: ActionsModel, run: FakeRun, rng: random.Random) -> None:
    """Attempt 2 by "re-run failed jobs": the worker keeps its times but is created anew."""
    job = run.job
    assert job is not None  # noqa: S101  # picked among runs with a job
    ended = job.completed_at if job.completed_at is not None else run.updated_at
    at = min(world.now() - 60.0, ended + rng.uniform(600.0, 86_400.0))
    run.attempts[run.attempt] = (run.status, run.conclusion, run.updated_at, run.started_at)
    run.attempt += 1
    run.started_at, run.updated_at = at, at + 120.0
    job.created_at = at


def _still_queued(run: FakeRun) -> None:
    """The job ran (its steps say so) but GitHub still shows it `queued` with no runner."""
    job = run.job
    assert job is not None  # noqa: S101  # picked among runs with a job
    job.status, job.conclusion, job.completed_at = "queued", None, None
    job.runner_id = job.runner_group_id = None
    job.runner_name = job.runner_group_name = None


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
        spec.truth.setdefault(canonical(pool.labels), []).append(wait)
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
