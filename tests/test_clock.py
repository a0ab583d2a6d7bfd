"""The Clock: a FakeClock that records every wait, and a SystemClock that reads real UTC time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from runner_queue_fallback.core.clock import EPOCH, Clock, FakeClock, SystemClock


def test_fake_clock_starts_at_the_epoch() -> None:
    """A new FakeClock reads the fixed EPOCH and monotonic 0."""
    clock = FakeClock()
    assert clock.now() == EPOCH
    assert clock.now().tzinfo is UTC
    assert clock.monotonic() == 0.0


def test_fake_clock_can_start_elsewhere() -> None:
    """The start instant is configurable."""
    start = datetime(2030, 1, 1, tzinfo=UTC)
    assert FakeClock(start).now() == start


def test_sleep_records_and_moves_time() -> None:
    """Every sleep is recorded in order and moves both clocks forward."""
    clock = FakeClock()
    clock.sleep(5)
    clock.sleep(10.5)
    clock.sleep(0)
    assert clock.sleeps == [5, 10.5, 0]
    assert clock.monotonic() == 15.5
    assert clock.now() == EPOCH + timedelta(seconds=15.5)


def test_advance_moves_time_without_recording_a_sleep() -> None:
    """The world's own passage of time is not a sleep."""
    clock = FakeClock()
    clock.advance(60)
    assert clock.sleeps == []
    assert clock.monotonic() == 60


@pytest.mark.parametrize("move", ["sleep", "advance"])
def test_time_cannot_go_backwards(move: str) -> None:
    """A negative sleep or advance is refused and changes nothing."""
    clock = FakeClock()
    with pytest.raises(ValueError, match="backwards"):
        getattr(clock, move)(-1)
    assert clock.monotonic() == 0
    assert clock.sleeps == []


def test_listeners_run_after_every_move() -> None:
    """Listeners see the new time after each sleep and advance."""
    clock = FakeClock()
    seen: list[float] = []
    clock.on_advance(lambda: seen.append(clock.monotonic()))
    clock.sleep(5)
    clock.advance(2)
    assert seen == [5, 7]


def test_system_clock_reads_aware_utc() -> None:
    """SystemClock.now is timezone-aware UTC and close to the machine's time."""
    now = SystemClock().now()
    assert now.tzinfo is UTC
    assert abs(now - datetime.now(UTC)) < timedelta(seconds=5)


def test_system_clock_monotonic_never_goes_back() -> None:
    """Two readings of the monotonic clock never decrease; a zero sleep returns at once."""
    clock = SystemClock()
    first = clock.monotonic()
    clock.sleep(0)
    assert clock.monotonic() >= first


def test_both_clocks_satisfy_the_protocol() -> None:
    """FakeClock and SystemClock can stand wherever a Clock is asked for."""
    clocks: list[Clock] = [FakeClock(), SystemClock()]
    assert all(isinstance(clock.monotonic(), float) for clock in clocks)
