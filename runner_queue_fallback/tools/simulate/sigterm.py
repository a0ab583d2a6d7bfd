"""The runner's SIGTERM to the main step, delivered on a virtual clock as a real one would be."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from runner_queue_fallback.core.clock import Clock
from runner_queue_fallback.core.errors import Interrupted


class Signalled:
    """The main step's clock with the runner's SIGTERM due at `at`, delivered as a real one is.

    A signal cuts short the sleep it lands in (Python re-raises a handler's exception out of
    `time.sleep`): a sleep that would pass `at` ends there, and Interrupted is raised at exactly
    the signal's virtual second. Time that passes outside a sleep (a request's latency, advanced
    by the fake GitHub) delivers it as soon as the clock reaches `at`.
    """

    def __init__(self, clock: Clock, at: float) -> None:
        """Arm the signal on `clock`, which must announce its moves (`on_advance`)."""
        on_advance: Callable[[Callable[[], None]], None] | None = getattr(clock, "on_advance", None)
        if on_advance is None:
            raise TypeError("interrupt_at needs a clock with on_advance (FakeClock, VirtualClock)")
        self._clock = clock
        self._at = at
        self.fired = False
        on_advance(self._check)

    def monotonic(self) -> float:
        """The wrapped clock's reading."""
        return self._clock.monotonic()

    def now(self) -> datetime:
        """The wrapped clock's wall-clock time."""
        return self._clock.now()

    def sleep(self, seconds: float) -> None:
        """Sleep, unless the signal comes first: then sleep until it and raise Interrupted."""
        if seconds < 0:
            raise ValueError("time can't go backwards")
        left = self._at - self._clock.monotonic()
        if self.fired or left > seconds:
            self._clock.sleep(seconds)
            return
        self._clock.sleep(max(0.0, left))  # the listener may deliver it as time reaches `at`
        self._deliver()  # ... or float rounding left the clock a hair short of it

    def disarm(self) -> None:
        """The main step ended: the runner signals the main step, never the post step."""
        self.fired = True

    def _check(self) -> None:
        if not self.fired and self._clock.monotonic() >= self._at:
            self._deliver()

    def _deliver(self) -> None:
        if not self.fired:
            self.fired = True
            raise Interrupted("SIGTERM")
