"""A thread-aware virtual clock: several participants, one running at a time, time jumps between.

Each participant of `run_all` runs in its own thread; only the one holding the turn runs. When it
sleeps, the sleeper with the earliest wake-up (ties: whoever slept first) gets the turn, and time
jumps to its wake-up. Nothing waits for real, and the same participants give the same interleaving
every time. Listeners (like `FakeClock.on_advance`) run in the resumed participant's thread, after
the jump and before it continues, so a fake GitHub catches up before anyone looks at it.

Limits: a participant must not block on anything but this clock (a lock held by a sleeping
participant would deadlock); threads that are not participants (a loopback server's handlers) may
read the clock, and their sleeps jump time directly.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from runner_queue_fallback.core.clock import EPOCH

__all__ = ["VirtualClock"]


class VirtualClock:
    """Virtual time shared by cooperating threads (implements the Clock protocol)."""

    def __init__(self, start: datetime = EPOCH) -> None:
        """Start at `start` (UTC) with monotonic time 0 and no participants."""
        self._start = start
        self._now = 0.0
        self._announced = 0.0
        self._cond = threading.Condition()
        self._listeners: list[Callable[[], None]] = []
        self._sleepers: list[tuple[float, int, int]] = []  # (wake-up, order, participant)
        self._order = itertools.count()
        self._turn: int | None = None
        self._members: dict[int, int] = {}  # thread ident -> participant index
        #: every sleep, per participant index; sleeps outside `run_all` go under -1
        self.sleeps: dict[int, list[float]] = {}

    def monotonic(self) -> float:
        """Virtual seconds since the clock was made."""
        return self._now

    def now(self) -> datetime:
        """The virtual wall-clock time."""
        return self._start + timedelta(seconds=self._now)

    def on_advance(self, listener: Callable[[], None]) -> None:
        """Call `listener` after every move of the clock."""
        self._listeners.append(listener)

    def sleep(self, seconds: float) -> None:
        """Record the wait; let the others run until this participant's wake-up comes first."""
        if seconds < 0:
            raise ValueError("time can't go backwards")
        me = self._members.get(threading.get_ident())
        self.sleeps.setdefault(-1 if me is None else me, []).append(seconds)
        self._wait(me, seconds)

    def advance(self, seconds: float) -> None:
        """Let `seconds` pass for the caller without recording a sleep (e.g. request latency)."""
        if seconds < 0:
            raise ValueError("time can't go backwards")
        self._wait(self._members.get(threading.get_ident()), seconds)

    def run_all(self, participants: Sequence[Callable[[], Any]]) -> list[Any]:
        """Run each callable in its own thread, one at a time; return their results in order.

        The first exception raised by a participant (in participant order) is re-raised after
        all of them have finished.
        """
        results: list[Any] = [None] * len(participants)
        errors: list[BaseException | None] = [None] * len(participants)
        started = threading.Barrier(len(participants) + 1)

        def body(index: int, function: Callable[[], Any]) -> None:
            with self._cond:
                self._members[threading.get_ident()] = index
            started.wait()
            self._await_turn(index)
            try:
                results[index] = function()
            except BaseException as exc:  # noqa: BLE001 (handed back to the caller of run_all)
                errors[index] = exc
            finally:
                with self._cond:
                    del self._members[threading.get_ident()]
                    self._pass_turn()

        threads = [
            threading.Thread(target=body, args=(i, f), name=f"vclock-{i}", daemon=True)
            for i, f in enumerate(participants)
        ]
        with self._cond:
            for index in range(len(participants)):
                self.sleeps.setdefault(index, [])
                heapq.heappush(self._sleepers, (self._now, next(self._order), index))
        for thread in threads:
            thread.start()
        started.wait()
        with self._cond:
            self._pass_turn()
        for thread in threads:
            thread.join()
        for error in errors:
            if error is not None:
                raise error
        return results

    # -------------------------------------------------------------------------- internals

    def _wait(self, me: int | None, seconds: float) -> None:
        if me is None:  # not a participant: time just jumps, as on a FakeClock
            with self._cond:
                self._now += seconds
            self._announce()
            return
        with self._cond:
            heapq.heappush(self._sleepers, (self._now + seconds, next(self._order), me))
            self._pass_turn()
        self._await_turn(me)

    def _pass_turn(self) -> None:
        """Give the turn to the earliest sleeper (caller holds the condition)."""
        if not self._sleepers:
            self._turn = None
            self._cond.notify_all()
            return
        wake, _, index = heapq.heappop(self._sleepers)
        self._now = max(self._now, wake)
        self._turn = index
        self._cond.notify_all()

    def _await_turn(self, me: int) -> None:
        with self._cond:
            while self._turn != me:
                self._cond.wait()
        self._announce()

    def _announce(self) -> None:
        if self._now > self._announced:
            self._announced = self._now
            for listener in list(self._listeners):
                listener()
