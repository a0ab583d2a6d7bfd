"""The only door to time: every wait and every reading of the clock goes through a Clock.

Prior art: trio's MockClock and twisted's task.Clock. Product code asks a Clock, so tests run
hours of queueing on a FakeClock in milliseconds and assert the exact sleeps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["EPOCH", "Clock", "FakeClock", "SystemClock", "elapsed"]

#: Where every FakeClock starts unless told otherwise: a fixed, readable instant.
EPOCH = datetime(2026, 11, 2, 9, 0, 0, tzinfo=UTC)


class Clock(Protocol):
    """What the coordinator, guard, cleanup and client may know about time."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards; only differences mean anything."""

    def now(self) -> datetime:
        """The current wall-clock time in UTC."""

    def sleep(self, seconds: float) -> None:
        """Wait for `seconds` (never negative)."""


class SystemClock:
    """Real time: the only class in the product that touches the `time` module."""

    def monotonic(self) -> float:
        """Read the process's monotonic clock."""
        return time.monotonic()

    def now(self) -> datetime:
        """Read the wall clock in UTC."""
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        """Sleep for real."""
        time.sleep(max(0.0, seconds))


class FakeClock:
    """Virtual time that moves only when something sleeps on it or advances it.

    Every sleep is recorded in `sleeps`, so tests assert the exact waits. Listeners run after
    each move: the simulator uses one to let its runner pools catch up with the new time.
    """

    def __init__(self, start: datetime = EPOCH) -> None:
        """Start at `start` (UTC) with monotonic time 0."""
        self._start = start
        self._elapsed = 0.0
        self.sleeps: list[float] = []
        self._listeners: list[Callable[[], None]] = []
        self._lock = threading.RLock()

    def monotonic(self) -> float:
        """Virtual seconds since the clock was made."""
        return self._elapsed

    def now(self) -> datetime:
        """The virtual wall-clock time."""
        return self._start + timedelta(seconds=self._elapsed)

    def sleep(self, seconds: float) -> None:
        """Record the wait and jump forward by it."""
        if seconds < 0:
            raise ValueError("time can't go backwards")
        self.sleeps.append(seconds)
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        """Move time forward without recording a sleep (the world's own passage of time)."""
        if seconds < 0:
            raise ValueError("time can't go backwards")
        with self._lock:
            self._elapsed += seconds
        for listener in list(self._listeners):
            listener()

    def on_advance(self, listener: Callable[[], None]) -> None:
        """Call `listener` after every move of the clock."""
        self._listeners.append(listener)


def elapsed(seconds: float) -> str:
    """A measured duration for a person: tenths of a second at most, never an exponent.

    `f"{x:g}"` writes a guard's 76 microseconds as `7.5881e-05`; this writes `0s`, and 1.25 s as
    `1.2s`, 3,600 s as `3600s`.
    """
    tenths = round(seconds, 1) + 0.0  # + 0.0: a -0.0 from rounding prints as 0
    return f"{tenths:.1f}".removesuffix(".0") + "s"
