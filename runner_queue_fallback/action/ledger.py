"""The one place the sequence's state and the attempt ledger change: the facts the phases found.

The phases (`action/sequence/`) only read the state; each fact they yield or return is applied
here, by the coordinator, the moment it is found. What the post step needs is saved with the
change (`core/hand_off`), and the client's patience follows from one thing: whether a child
exists or may exist.
"""

from __future__ import annotations

from runner_queue_fallback.action.attempts import Attempt, AttemptState
from runner_queue_fallback.action.sequence.facts import (
    AdmissionWaited,
    Allocated,
    Became,
    ChildFound,
    ChildOver,
    ChildReplaced,
    CopyFound,
    DefinitionRead,
    DispatchRefused,
    DispatchSent,
    EarlierRun,
    Fact,
    FoundByName,
    JobEnd,
    JobRead,
    QueueLeft,
    Race,
    RelistDone,
    RunnerOnJob,
    RunUnseen,
    Skipped,
    Verdict,
)
from runner_queue_fallback.action.sequence.state import SequenceState
from runner_queue_fallback.core import hand_off
from runner_queue_fallback.github.retry import Patience

__all__ = ["apply"]


def apply(seq: SequenceState, attempt: Attempt | None, fact: Fact) -> None:
    """Apply what a phase found to the state and to `attempt` (the candidate being tried)."""
    if not _apply_to_state(seq, fact):
        assert attempt is not None  # noqa: S101  # every other fact is about an attempt
        _apply_to_attempt(seq, attempt, fact)
    seq.client.patience = Patience.CHILD_EXISTS if seq.child_exists else Patience.SPEC


def _apply_to_state(seq: SequenceState, fact: Fact) -> bool:
    """The facts about the sequence as a whole; False for a fact about the attempt."""
    match fact:
        case JobEnd(ends_at, text):
            seq.job_ends_at, seq.job_end_text = ends_at, text
        case AdmissionWaited(waited):
            seq.result.admission_waited += waited
        case DefinitionRead(commit, blob):
            seq.commit = commit
            if seq.definition_sha is None:
                seq.definition_sha = blob
        case RunUnseen():
            seq.run_unseen = True
        case CopyFound(run_id):
            add_other(seq, run_id)
        case RelistDone():
            seq.relist_at = None
        case ChildOver():
            child_over(seq)
        case _:
            return False
    return True


def _apply_to_attempt(seq: SequenceState, attempt: Attempt, fact: Fact) -> None:  # noqa: C901, PLR0912, PLR0915  # one case a fact
    """The facts about the attempt being tried (and the state they move with it)."""
    match fact:
        case Became(state):
            attempt.state = state
        case Skipped(skip):
            attempt.state, attempt.skip = AttemptState.SKIPPED, skip
        case DispatchSent(expected, at, waited):
            seq.expected = expected
            attempt.state = AttemptState.NOT_DISPATCHED  # until its reply: a refusal is over
            attempt.dispatched_at = at
            seq.waited_at_dispatch = waited
            seq.in_flight = attempt
        case DispatchRefused():
            seq.in_flight = None
            attempt.state = AttemptState.REFUSED
        case ChildFound(run_id, url, by_name):
            attempt.run_id, attempt.run_url, attempt.job_url = run_id, url, None
            seq.active, seq.in_flight, seq.run_unseen = run_id, None, False
            hand_off.save_child(seq.report, run_id, attempt.request_id, url, by_name=by_name)
        case FoundByName(search, relist_at):
            attempt.found_by_run_name = True
            seq.by_name, seq.relist_at = search, relist_at
        case ChildReplaced():
            attempt.queued_at, seq.last_queued_read = None, None
            attempt.state = AttemptState.DISPATCHED
        case JobRead(step_started, queued_read, job_url, queued_at):
            attempt.step_started = attempt.step_started or step_started
            if queued_read is not None:
                seq.last_queued_read = queued_read
            if job_url is not None:
                attempt.job_url = job_url
                hand_off.save_job_url(seq.report, job_url)  # the post step's link
            if queued_at is not None:
                attempt.queued_at = queued_at
                attempt.state = AttemptState.QUEUED
        case QueueLeft(at):
            attempt.queue_left_at = at
            attempt.state = AttemptState.CANCELLING
        case Race(at):
            seq.result.race = True
            attempt.allocated_at = at
            attempt.state = AttemptState.RACE
        case Allocated(queued_at, queue_left_at, allocated_at, runner_name, runner_seen):
            if attempt.queued_at is None:  # already allocated at the first look: no queue seen
                attempt.queued_at = queued_at
            if attempt.queue_left_at is None:
                attempt.queue_left_at = max(queue_left_at, attempt.queued_at)
            attempt.state = AttemptState.ALLOCATED
            if attempt.allocated_at is None and allocated_at is not None:
                attempt.allocated_at = allocated_at
            if runner_seen:
                attempt.runner_name = runner_name
        case RunnerOnJob(runner_name, requeued_from):
            if requeued_from is not None:
                attempt.requeued_from.append(requeued_from)
            attempt.runner_name = runner_name
        case EarlierRun(child, at):
            add_other(seq, child)
            attempt.state = AttemptState.EARLIER_RUN
            attempt.allocated_at = attempt.allocated_at or at  # it had a runner
        case Verdict(run, worker):
            attempt.state = AttemptState.FINISHED
            attempt.conclusions = (run, worker)


def add_other(seq: SequenceState, run_id: int) -> None:
    """Another run bearing our request id: cleanup cancels it too (so does the post step)."""
    if run_id != seq.active and run_id not in seq.others:
        seq.others.append(run_id)
        hand_off.save_copies(seq.report, seq.others)


def child_over(seq: SequenceState) -> None:
    """The active child was confirmed over (cancelled cleanly, or finished and judged).

    The state says so, and the post step then has nothing to read or cancel.
    """
    if seq.active is not None:
        hand_off.save_over(seq.report, seq.active)
    seq.active = None
