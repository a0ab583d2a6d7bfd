"""The bench's workloads: its settings, the single-coordinator scenarios and the concurrency mix.

Shared by the bench (bench/run.py) and the load sweep (bench/sweep.py), so that neither imports
the other to build the same coordinators.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bench.harness import FOREVER, CoordinatorSpec, PoolSpec

__all__ = ["CPU8", "CPU16", "CPU32", "Settings", "mix_specs", "single_specs"]

ROLES = {"Q": "queued", "E": "executing", "F": "falling back"}
CPU16, CPU8, CPU32 = "linux-amd64-cpu16", "linux-amd64-cpu8", "linux-amd64-cpu32"
GOLDEN = (math.sqrt(5) - 1) / 2


@dataclass(frozen=True)
class Settings:
    """Horizons and search bounds of one bench run."""

    quick: bool
    #: the concurrency mix of roles, repeated: 5 queued, 2 executing, 1 falling back in every 8
    mix: str = "QQEQFQEQ"
    latency: float = 0.25  # virtual seconds per API reply (GitHub answers in 100-500 ms)
    quota: int = 1000  # GITHUB_TOKEN: 1,000 requests an hour per repository
    queued_minutes: float = 60.0  # the queued scenario: one 60-minute queue that times out
    executing_seconds: float = 3600.0  # the executing scenario: a one-hour workload
    fallback_minutes: float = 10.0  # the fallback scenario: 10-minute queues, two time out
    fallback_workload: float = 900.0
    #: the deadlines scenario: seven pools that never free, one queue timeout each (minutes)
    deadline_minutes: tuple[float, ...] = (1, 2.5, 5, 7, 10, 15, 20)
    horizon: float = 3600.0  # each coordinator of the concurrency mix runs about this long
    stagger: float = 300.0  # their starts spread over this many seconds
    generations: int = 2  # each of the N lanes runs this many coordinators back to back
    #: the coordinators' `admission-timeout-minutes` (None: the input's default, 60)
    admission_minutes: int | None = None
    ladder: tuple[int, ...] = (4, 8, 16, 32, 64, 96, 128, 192, 256)
    max_n: int = 256
    cold_runs: int = 7

    @classmethod
    def make(cls, *, quick: bool, latency: float, max_n: int | None) -> Settings:
        """Full settings, or quick ones (short horizons, a 100-request quota, N up to 8)."""
        if not quick:
            return cls(quick=False, latency=latency, max_n=max_n or 256)
        return cls(
            quick=True,
            latency=latency,
            quota=100,
            queued_minutes=4.0,
            deadline_minutes=(1, 1.5, 2.5),
            executing_seconds=240.0,
            fallback_minutes=2.0,
            fallback_workload=120.0,
            horizon=360.0,
            stagger=30.0,
            ladder=(2, 4, 8),
            max_n=max_n or 8,
            cold_runs=3,
        )


# -- scenarios --------------------------------------------------------------------------------


def single_specs(settings: Settings) -> dict[str, CoordinatorSpec]:
    """One coordinator each: queued until its deadline, executing, and a fallback sequence."""
    execution = math.ceil(settings.executing_seconds / 60) + 30
    fall = settings.fallback_minutes
    return {
        "queued": CoordinatorSpec(
            "queued", (PoolSpec(CPU16, settings.queued_minutes, busy_for=FOREVER),)
        ),
        "executing": CoordinatorSpec(
            "executing",
            (PoolSpec(CPU16, 10, workload_seconds=settings.executing_seconds),),
            execution_minutes=execution,
        ),
        "fallback": CoordinatorSpec(
            "falling back",
            (
                PoolSpec(CPU16, fall, busy_for=FOREVER),
                PoolSpec(CPU8, fall, busy_for=FOREVER),
                PoolSpec(CPU32, fall, workload_seconds=settings.fallback_workload),
            ),
            execution_minutes=math.ceil(settings.fallback_workload / 60) + 30,
        ),
        "deadlines": CoordinatorSpec(
            "falling back",
            tuple(
                PoolSpec(f"linux-amd64-cpu{cores}", minutes, busy_for=FOREVER)
                for cores, minutes in zip(
                    (4, 8, 16, 32, 48, 64, 96), settings.deadline_minutes, strict=False
                )
            ),
        ),
    }


def mix_specs(count: int, settings: Settings) -> list[CoordinatorSpec]:
    """`count` lanes in the settings' mix of roles, starts spread over `stagger`, about `horizon` each.

    Each lane runs `generations` coordinators back to back (the next starts `horizon` + 2 minutes
    after the previous one did, when it has ended), so at most `count` run at once and the quota
    windows after the first see a steady state, not just the first hour's burst of starts.

    queued: one queue as long as the horizon; a runner frees at 90 % of it; a short job.
    executing: a free runner at once; the workload lasts 95 % of the horizon.
    falling back: two 10-minute queues time out, the third pool is free; the job lasts half.
    Every coordinator succeeds when the quota allows it.
    """
    horizon = settings.horizon
    queue = max(1.0, min(60.0, horizon / 60))
    fall = settings.fallback_minutes
    execution = math.ceil(horizon / 60) + 30
    roles = {
        "Q": (PoolSpec(CPU16, queue, busy_for=0.9 * horizon, workload_seconds=0.08 * horizon),),
        "E": (PoolSpec(CPU16, fall, workload_seconds=0.95 * horizon),),
        "F": (
            PoolSpec(CPU16, fall, busy_for=FOREVER),
            PoolSpec(CPU8, fall, busy_for=FOREVER),
            PoolSpec(CPU32, fall, workload_seconds=0.5 * horizon),
        ),
    }
    specs = []
    for generation in range(settings.generations):
        for index in range(count):
            letter = settings.mix[index % len(settings.mix)]
            start = generation * (horizon + 120) + (index * GOLDEN) % 1.0 * settings.stagger
            specs.append(
                CoordinatorSpec(
                    ROLES[letter],
                    roles[letter],
                    round(start, 1),
                    execution,
                    index,
                    admission_minutes=settings.admission_minutes,
                )
            )
    return specs
