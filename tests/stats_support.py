"""Helpers for the stats tests: a fake GitHub with a generated past, and running `stats` on it."""

from __future__ import annotations

import json
from typing import Any

from runner_queue_fallback.cli import main
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github import FakeGitHub
from runner_queue_fallback.fake_github.history import (
    Exponential,
    HistorySpec,
    LogNormal,
    PoolHistory,
    generate_history,
)
from runner_queue_fallback.fake_github.model import fake_token

GROUP = "nv-cpu-general"
CPU16, CPU8, CPU32 = "linux-amd64-cpu16", "linux-amd64-cpu8", "linux-amd64-cpu32"
TOKEN = fake_token("stats_reader_token")


def runners(*steps: tuple[str, float]) -> str:
    return json.dumps(
        [{"group": GROUP, "labels": labels, "queue-timeout-minutes": m} for labels, m in steps]
    )


def slow_first_spec(sequences: int = 400, seed: int = 7) -> HistorySpec:
    """cpu16 is slow (heavily censored at 10 min), cpu8 is clearly faster; both orders seen."""
    return HistorySpec(
        pools=(
            PoolHistory(GROUP, CPU16, Exponential(mean=20 * 60.0)),
            PoolHistory(GROUP, CPU8, LogNormal(median=60.0, sigma=0.8)),
        ),
        orders=(((0, 10.0), (1, 10.0)), ((0, 10.0), (1, 10.0)), ((1, 10.0), (0, 10.0))),
        sequences=sequences,
        seed=seed,
    )


def history_world(spec: HistorySpec, **kwargs: Any) -> tuple[FakeGitHub, FakeClock]:
    clock = FakeClock()
    world = FakeGitHub(clock, **kwargs)
    world.add_workflow("runner-worker.yml", "main")
    world.add_workflow("runner-check.yml", "main")
    generate_history(world, spec)
    return world, clock


def run_stats(world: FakeGitHub, clock: FakeClock, *args: str, session: Any = None) -> int:
    """Run `stats` through the composition root (read the output with capsys)."""
    environ = {
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_REPOSITORY": world.repository,
        "GITHUB_API_URL": world.api_url,
    }
    return main(
        ["stats", *args]
        if "--workflow" in args
        else ["stats", "--workflow", "runner-worker.yml", *args],
        environ,
        clock=clock,
        session=session or world.session(),
    )
