"""The virtual multi-thread clock: one participant at a time, time jumps, deterministic order."""

from __future__ import annotations

import pytest

from runner_queue_fallback.fake_github import VirtualClock
from tests.test_sim_support import AUTH, REPO, dispatch, make_world


def test_two_participants_interleave_by_wake_up_time():
    clock = VirtualClock()
    log: list[tuple[str, float]] = []

    def participant(name: str, waits: list[float]):
        def run() -> str:
            for wait in waits:
                log.append((name, clock.monotonic()))
                clock.sleep(wait)
            log.append((name, clock.monotonic()))
            return name

        return run

    results = clock.run_all([participant("a", [10, 10, 10]), participant("b", [15, 5])])
    assert results == ["a", "b"]
    assert log == [
        ("a", 0.0),
        ("b", 0.0),
        ("a", 10.0),
        ("b", 15.0),
        ("a", 20.0),
        ("b", 20.0),  # tie at 20: a slept first, so a ran first
        ("a", 30.0),
    ]
    assert clock.sleeps == {0: [10, 10, 10], 1: [15, 5]}
    assert clock.monotonic() == 30.0


def test_the_same_participants_give_the_same_interleaving():
    def trace() -> list[int]:
        clock = VirtualClock()
        order: list[int] = []

        def make(index: int):
            def run() -> None:
                for step in range(5):
                    order.append(index)
                    clock.sleep(1.0 + (index * step) % 3)

            return run

        clock.run_all([make(i) for i in range(4)])
        return order

    assert trace() == trace()


def test_listeners_let_the_fake_github_catch_up_and_quota_is_shared():
    clock = VirtualClock()
    world = make_world(clock, quota=10)
    url = f"https://api.github.test{REPO}/actions/runs/4242"

    def coordinator(token: str):
        def run() -> list[int]:
            session = world.session()
            statuses = []
            for _ in range(8):
                statuses.append(
                    session.get(
                        url, headers={"Authorization": f"Bearer {token}"}, timeout=5
                    ).status_code
                )
                clock.sleep(60.0)
            return statuses

        return run

    first, second = clock.run_all([coordinator("one"), coordinator("two")])
    assert first == [200] * 5 + [403] * 3
    assert second == [200] * 5 + [403] * 3
    assert [e.client for e in world.ledger[:4]] == [0, 1, 0, 1]
    assert world.now() == clock.monotonic() == 480.0


def test_the_fake_advances_with_the_virtual_clock():
    clock = VirtualClock()
    world = make_world(clock)
    run_id = dispatch(world)

    def waiter() -> None:
        clock.sleep(200.0)

    clock.run_all([waiter])
    assert world.history[run_id].conclusion == "success"
    assert world.history[run_id].completed_at == 72.0
    assert (
        world.handle("GET", f"{REPO}/actions/runs/{run_id}", AUTH).json()["status"] == "completed"
    )


def test_exceptions_come_back_after_everyone_finished():
    clock = VirtualClock()
    done: list[str] = []

    def boom() -> None:
        clock.sleep(1.0)
        raise RuntimeError("boom")

    def fine() -> None:
        clock.sleep(5.0)
        done.append("fine")

    with pytest.raises(RuntimeError, match="boom"):
        clock.run_all([boom, fine])
    assert done == ["fine"]


def test_sleeping_outside_run_all_just_jumps():
    clock = VirtualClock()
    clock.sleep(3.0)
    clock.advance(2.0)
    assert clock.monotonic() == 5.0
    assert clock.sleeps == {-1: [3.0]}
    with pytest.raises(ValueError, match="backwards"):
        clock.sleep(-1)


def test_a_worker_hook_may_sleep_on_the_virtual_clock():
    clock = VirtualClock()
    calls: list[float] = []

    def guard(_context) -> bool:
        calls.append(clock.monotonic())
        clock.sleep(4.0)
        return True

    world = make_world(clock, on_worker_start=guard)
    run_id = dispatch(world)

    def waiter() -> None:
        clock.sleep(200.0)

    clock.run_all([waiter])
    history = world.history[run_id]
    assert len(calls) == 1
    assert (history.started_at, history.workload_started_at, history.completed_at) == (10, 14, 74)
