"""A spent API quota while a child exists or may exist: the sequence's one way to wait for the reset.

Every wait is the client's (`GitHubClient.wait_for_quota_reset`: told to the job-end warning below,
counted in `quota_waited`, then taken); `pause` says in the log what waits, and `through_quota`
sends a read the spent quota stopped again at the reset. The waiting phases' windows count only
the time the quota let them read (`SequenceState.paused_window`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from runner_queue_fallback.action.sequence.state import SequenceState, seconds
from runner_queue_fallback.core.errors import QuotaSpent

__all__ = ["job_end_warning", "pause", "through_quota"]

_T = TypeVar("_T")


def pause(seq: SequenceState, says: Callable[[float], str]) -> float:
    """When the quota is spent: log `says(wait)`, wait for the reset; the seconds waited.

    Nothing is sent before the reset (0.0 when the reset is already past: the next read may go).
    """
    wait = seq.client.quota_reset_in()
    if wait is None:
        return 0.0
    seq.report.log(says(wait))
    seq.client.wait_for_quota_reset(wait)
    return wait


def through_quota(seq: SequenceState, read: Callable[[], _T], paused: Callable[[], str]) -> _T:
    """`read()`; each time the spent quota stops it, wait for the reset and read again at once.

    `paused()` names what pauses (`the startup window of child 5 (80s of it left)`). At the
    reset the phase goes on from a fresh read, judged by its usual rules.
    """
    while True:
        try:
            return read()
        except QuotaSpent:
            if not pause(seq, lambda wait: _paused_line(seq, paused(), wait)):
                raise  # no reset ahead to wait for: the caller's window decides


def _paused_line(seq: SequenceState, paused: str, wait: float) -> str:
    return (
        f"The API quota is spent until its reset at {seq.client.reset_time()}: {paused} "
        f"pauses for {seconds(wait)}; nothing is sent before the reset, then a fresh read of "
        "the child decides"
    )


def job_end_warning(seq: SequenceState) -> Callable[[float], None]:
    """The client's `on_quota_wait`: a wait with a child present that would reach the job's end.

    The runner cancels the job at its end, and the cancellation cancels the child: the warning
    names the child and its link while there is still time to look. One warning a reset.
    """
    warned: float | None = None

    def before_wait(wait: float) -> None:
        nonlocal warned
        ends, child = seq.job_ends_at, seq.child_text()
        if ends is None or child is None:
            return
        left = ends - seq.clock.monotonic()
        reset = seq.client.stats.rate_reset
        if wait < left or (reset is not None and reset == warned):
            return
        warned = reset
        seq.report.warning(
            f"the API quota is spent until its reset at {seq.client.reset_time()} "
            f"({seconds(wait)} from now), but this job reaches its end "
            f"({seq.job_end_text or 'its timeout-minutes'}) in {seconds(max(0.0, left))}: the "
            f"runner will cancel the job during the wait, and with it {child}. Check that run",
            title="Job ends during a quota wait",
        )

    return before_wait
