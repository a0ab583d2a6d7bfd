"""The original's polling policy, as its README describes it, on our coordinator and client.

What the original does (spec, "Behavior and limits"): poll once per minute while queued or
executing, four reads a poll (the child run, its jobs, the source ref, the parent run), no
conditional requests, and the queue deadline is only noticed at the next minute poll.

`OriginalCoordinator` is our `Coordinator` with only that polling policy swapped in: the queue
wait and the execution wait. Everything else is the coordinator's own code, so it cannot drift:
the parent check, the preflight, dispatch once, the startup window (15 s, then 5 s), the fresh
read at the deadline, cancel-and-confirm (5 s polls in one 2-minute window), the verdict on a
finished child and the cleanup after an error. Give it a client with `conditional=False`.
"""

from __future__ import annotations

from runner_queue_fallback.action.coordinator import Attempt, Coordinator
from runner_queue_fallback.action.observe import Observation
from runner_queue_fallback.action.sequence.execution import execution_timeout
from runner_queue_fallback.action.sequence.facts import Allocated, Next, Phase, PhaseResult
from runner_queue_fallback.action.sequence.state import observe

__all__ = ["POLL_SECONDS", "OriginalCoordinator"]

#: "Poll once per minute while queued or executing": the original's only polling interval.
POLL_SECONDS = 60.0


class OriginalCoordinator(Coordinator):
    """Our coordinator with the original's minute polls; `run()` never raises an RQFError."""

    def _minute_poll(self, attempt: Attempt) -> Phase[Observation]:
        """One minute poll, always four reads: the child run, its jobs, the source ref, the parent."""
        observation = yield from observe(self.seq, attempt)
        self.seq.check_source()
        self.seq.check_parent_still_active()
        return observation

    def _wait_in_queue(self, attempt: Attempt, observation: Observation) -> Phase[PhaseResult]:
        """Sleep a full minute, poll, and only then look at the deadline; DEADLINE: it has passed.

        The deadline is noticed up to a minute late, and no poll is aimed at it. What follows
        the deadline (the fresh read, cancel and confirmation) is the coordinator's.
        """
        if observation.has_evidence or observation.finished:
            return PhaseResult(Next.EXECUTION, observation)
        assert attempt.queued_at is not None  # set when startup saw the job queued
        deadline = attempt.queued_at + attempt.candidate.queue_seconds
        while True:
            self.seq.clock.sleep(POLL_SECONDS)
            observation = yield from self._minute_poll(attempt)
            if observation.has_evidence or observation.finished:
                return PhaseResult(Next.EXECUTION, observation)
            if self.seq.clock.monotonic() >= deadline:
                return PhaseResult(Next.DEADLINE)

    def _wait_for_result(self, attempt: Attempt, observation: Observation) -> Phase[PhaseResult]:
        """Minute polls of four reads until the child is over; the verdict is the coordinator's.

        Ours skips the source and parent reads on the poll that finds the child finished and
        aims its last poll at the execution deadline; the original does neither.
        """
        now = self.seq.clock.monotonic()
        # Book the queue's end now, when the runner was seen (the coordinator only sets these
        # when they are unset; it would otherwise book them once the child is over).
        yield Allocated(now, now, None, None, runner_seen=False)
        deadline = now + self.seq.inputs.pools.execution_timeout_minutes * 60
        while not observation.finished:
            if self.seq.clock.monotonic() >= deadline:
                return execution_timeout(self.seq, attempt)
            self.seq.clock.sleep(POLL_SECONDS)
            observation = yield from self._minute_poll(attempt)
        return (yield from super()._wait_for_result(attempt, observation))
