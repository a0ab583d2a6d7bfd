"""`simulate --write-history FILE`: a history file from a simulated fleet, for `stats --history`.

The fleet is the `cpu` runner type's three pools over 14 days: cpu16 (first in the profile) busy,
cpu8 fair, cpu32 quick, with the traps of real history mixed in (a few children re-run, a few jobs
still shown queued although they ran). Its past is generated in the fake GitHub (`sim.history`),
then read through the real client exactly as `stats` reads GitHub (pages, windows, one jobs
request per child) and saved. So `stats --history FILE --runner-type cpu` shows the whole report
offline in one command; the seed makes the file reproducible. Composition, like `simulate`.
"""

from __future__ import annotations

import argparse
from datetime import timedelta
from pathlib import Path
from typing import TextIO

from runner_queue_fallback.core.actions_io import escape_log_line
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github.history import (
    Exponential,
    HistorySpec,
    LogNormal,
    PoolHistory,
    generate_history,
)
from runner_queue_fallback.fake_github.model import fake_token
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.tools.stats.history import read_history
from runner_queue_fallback.tools.stats.history_file import SavedHistory, save

__all__ = ["WORKFLOW", "fleet_spec", "run"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
WORKFLOW = "runner-worker.yml"
GROUP = "nv-cpu-general"
DAYS = 14
MAX_SEED = 2**31
_TOKEN = fake_token("fleet_history_reader")


def fleet_spec(seed: int = 1, sequences: int = 260) -> HistorySpec:
    """The simulated fleet: most sequences in the profile's order, some in others."""
    profile = ((0, 10.0), (1, 10.0), (2, 10.0))
    return HistorySpec(
        pools=(
            PoolHistory(GROUP, "linux-amd64-cpu16", Exponential(mean=15 * 60.0)),
            PoolHistory(GROUP, "linux-amd64-cpu8", LogNormal(median=150.0, sigma=1.0)),
            PoolHistory(GROUP, "linux-amd64-cpu32", LogNormal(median=50.0, sigma=0.9)),
        ),
        orders=(profile, profile, profile, ((2, 5.0), (1, 10.0), (0, 10.0))),
        sequences=sequences,
        days=DAYS,
        seed=seed,
        workflow=WORKFLOW,
        carried_forward=3,
        queued_with_steps=2,
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Generate the fleet's past, read it as `stats` would, save it to `--write-history`."""
    path = Path(args.write_history)
    seed_text = "1" if args.seed is None else args.seed.strip()
    if not seed_text.isdigit() or len(seed_text) > 10 or int(seed_text) > MAX_SEED:
        return _error(out, f"--seed must be a whole number from 0 to {MAX_SEED}, got {args.seed!r}")
    if not path.parent.is_dir():
        return _error(out, f"--write-history {str(path)!r}: its directory does not exist")
    seed = int(seed_text)
    clock = FakeClock()
    world = FakeGitHub(clock, quota=100_000)
    world.add_workflow(WORKFLOW, "main")
    spec = fleet_spec(seed)
    generate_history(world, spec)
    client = GitHubClient(world.session(), world.api_url, world.repository, _TOKEN, clock)
    now = clock.now()
    since = now - timedelta(days=DAYS)
    history = read_history(client, WORKFLOW, since=since, now=now, max_runs=10_000)
    try:
        save(path, SavedHistory(world.repository, WORKFLOW, since, now, "simulate", history))
    except OSError as exc:
        print(escape_log_line(f"simulate: error: --write-history {path}: {exc.strerror}"), file=out)
        return EXIT_FAILED
    wrote = (
        f"simulate: wrote {path}: {len(history.children)} children of {spec.sequences} "
        f"sequences on {len(spec.pools)} pools over {DAYS} days (seed {seed}), read through "
        f"{client.stats.sent} requests to the fake GitHub"
    )
    lines = [
        wrote,
        f"read it offline: runner-queue-fallback stats --history {path} --runner-type cpu",
    ]
    print("\n".join(escape_log_line(line) for line in lines), file=out)
    return EXIT_OK


def _error(out: TextIO, message: str) -> int:
    print(escape_log_line(f"simulate: error: {message}"), file=out)
    return EXIT_BAD_INPUT
