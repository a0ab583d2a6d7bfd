"""The invariants of DESIGN.md, checked from what the fake GitHub saw (not from our own logs)."""

from __future__ import annotations

import itertools
import math

from runner_queue_fallback.sim.world import FakeGitHub
from runner_queue_fallback.simulation import TOKEN, SimulationRun


def dispatch_posts(world: FakeGitHub) -> list[float]:
    """Virtual times of every dispatch POST the fake received."""
    return [e.time for e in world.ledger if e.method == "POST" and e.path.endswith("/dispatches")]


def children(world: FakeGitHub) -> list:  # type: ignore[type-arg]  # RunHistory list
    return sorted(world.history.values(), key=lambda h: h.dispatched_at)


def check_invariants(world: FakeGitHub, run: SimulationRun, *, candidates: int) -> None:
    """Invariants 1-5 and 7 (6, no real sleep, is enforced by the autouse fixture)."""
    kids = children(world)
    # 1. At most one child of the sequence is non-terminal at any time.
    for earlier, later in itertools.pairwise(kids):
        end = earlier.completed_at if earlier.completed_at is not None else math.inf
        assert end <= later.dispatched_at, (
            f"child {later.run_id} dispatched while {earlier.run_id} was live"
        )
    # 2. No dispatch after allocation or execution evidence.
    for kid in kids[:-1]:
        assert kid.allocated_at is None, (
            f"child {kid.run_id} had a runner, yet another was dispatched"
        )
        assert kid.workload_started_at is None
    # 3. Success implies a successful worker of matching identity.
    if run.exit_code == 0:
        last = kids[-1]
        assert last.conclusion == "success"
        assert last.workload_started_at is not None
        assert run.outputs["run-id"] == str(last.run_id)
    # 4. The dispatch POST is sent at most once per candidate.
    assert len(dispatch_posts(world)) <= candidates
    assert run.outputs.get("attempts", "0") == str(len(dispatch_posts(world)))
    # 5. Every child is confirmed over at exit, or reported unconfirmed by run id.
    for kid in kids:
        if kid.completed_at is None:
            text = run.log + run.post_log
            assert f"NOT confirmed for child run {kid.run_id}" in text, (
                f"child {kid.run_id} left running"
            )
    # 7. The token never appears in logs, outputs or summaries.
    # The ::add-mask:: command itself is how the runner learns the secret; it is never displayed.
    text = (
        run.log
        + run.post_log
        + run.summary
        + "".join(run.outputs.values())
        + "".join(run.guard_logs)
    )
    everything = "\n".join(
        line for line in text.splitlines() if not line.startswith("::add-mask::")
    )
    assert TOKEN not in everything
    assert "ghs_worker_token" not in everything
