"""The ledger applies what the phases found; the client's patience follows whether a child exists.

While a child exists or may exist (a run whose id is not known yet), a spent quota is waited out
rather than the child abandoned (`Patience.CHILD_EXISTS`); once none is left, the spec's rule
(`Patience.SPEC`) holds again.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from runner_queue_fallback.action import ledger
from runner_queue_fallback.action.attempts import Attempt, AttemptState, Result
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
    EarlierRun,
    JobRead,
    RunnerOnJob,
    RunUnseen,
    Verdict,
)
from runner_queue_fallback.action.sequence.state import SequenceState
from runner_queue_fallback.core.profiles import Candidate
from runner_queue_fallback.github.retry import Patience


class Saved:
    def __init__(self) -> None:
        self.state: list[tuple[str, str]] = []

    def save_state(self, name: str, value: str) -> None:
        self.state.append((name, value))


class _Fields:
    """The state's fields the ledger writes, with `SequenceState`'s own `child_exists` rule."""

    child_exists = SequenceState.child_exists

    def __init__(self) -> None:
        self.client = SimpleNamespace(patience=Patience.SPEC)
        self.report = Saved()
        self.result = Result()
        self.active: int | None = None
        self.in_flight: Attempt | None = None
        self.run_unseen = False
        self.others: list[int] = []
        self.definition_sha: str | None = None
        self.commit = ""
        self.last_queued_read: float | None = None


def state() -> SequenceState:
    return cast("SequenceState", _Fields())


def patience(seq: SequenceState) -> Patience:
    return seq.client.patience


def saved(seq: SequenceState) -> list[tuple[str, str]]:
    return cast("Saved", seq.report).state


def attempt() -> Attempt:
    return Attempt(1, Candidate("grp", "pool", 10.0, "pool"), "rqf-1")


def test_a_known_child_makes_the_client_wait_out_a_spent_quota_until_it_is_over():
    seq, a = state(), attempt()
    ledger.apply(seq, a, ChildFound(7, "https://x/7"))
    assert (seq.active, seq.client.patience) == (7, Patience.CHILD_EXISTS)
    assert (a.run_id, a.run_url) == (7, "https://x/7")
    ledger.apply(seq, a, ChildOver())
    assert (seq.active, seq.client.patience) == (None, Patience.SPEC)
    assert ("child-over", "7") in saved(seq)


def test_a_run_whose_id_is_unknown_is_waited_for_until_it_is_found_and_over():
    seq, a = state(), attempt()
    ledger.apply(seq, a, RunUnseen())
    assert patience(seq) is Patience.CHILD_EXISTS
    ledger.apply(seq, a, ChildFound(8, "https://x/8", by_name=True))
    assert seq.run_unseen is False
    ledger.apply(seq, a, ChildOver())
    assert patience(seq) is Patience.SPEC


def test_a_refused_dispatch_leaves_nothing_in_flight_and_is_no_dispatch_sent():
    seq, a = state(), attempt()
    seq.in_flight = a
    a.dispatched_at = 1.0
    ledger.apply(seq, a, DispatchRefused())
    assert seq.in_flight is None
    assert a.state is AttemptState.REFUSED
    assert not a.sent


def test_the_first_definition_read_is_the_one_every_later_must_match():
    seq = state()
    ledger.apply(seq, None, DefinitionRead("c1", "b1"))
    ledger.apply(seq, None, DefinitionRead("c2", "b2"))
    assert (seq.commit, seq.definition_sha) == ("c2", "b1")


def test_admission_waits_add_up():
    seq = state()
    ledger.apply(seq, None, AdmissionWaited(2.5))
    ledger.apply(seq, None, AdmissionWaited(1.5))
    assert seq.result.admission_waited == 4.0


def test_a_copy_is_named_once_and_never_the_child_itself():
    seq, a = state(), attempt()
    ledger.apply(seq, a, ChildFound(7, "u"))
    for run_id in (7, 9, 9):
        ledger.apply(seq, a, CopyFound(run_id))
    assert seq.others == [9]
    assert saved(seq).count(("child-copies", "9")) == 1


def test_the_queue_clock_starts_once_and_a_replaced_child_starts_it_again():
    seq, a = state(), attempt()
    ledger.apply(seq, a, JobRead(step_started=False, queued_read=3.0, job_url="j", queued_at=2.0))
    assert (a.queued_at, a.state, a.job_url, seq.last_queued_read) == (
        2.0,
        AttemptState.QUEUED,
        "j",
        3.0,
    )
    ledger.apply(seq, a, JobRead(step_started=True))
    assert (a.queued_at, a.step_started, seq.last_queued_read) == (2.0, True, 3.0)
    ledger.apply(seq, a, JobRead(step_started=False))
    assert a.step_started, "a step once seen begun stays seen"
    ledger.apply(seq, a, ChildReplaced())
    assert (a.queued_at, seq.last_queued_read, a.state) == (None, None, AttemptState.DISPATCHED)


def test_an_allocation_books_only_the_times_not_yet_known():
    a = attempt()
    ledger.apply(state(), a, Allocated(5.0, 5.0, 5.0, "r1", runner_seen=True))
    assert (a.queued_at, a.queue_left_at, a.allocated_at, a.runner_name) == (5.0, 5.0, 5.0, "r1")
    b = attempt()
    b.queued_at, b.allocated_at = 9.0, 4.0
    ledger.apply(state(), b, Allocated(5.0, 5.0, 6.0, None, runner_seen=False))
    assert (b.queued_at, b.queue_left_at, b.allocated_at, b.runner_name) == (9.0, 9.0, 4.0, None)
    assert b.state is AttemptState.ALLOCATED


def test_a_requeue_keeps_the_runner_it_was_taken_from():
    a = attempt()
    ledger.apply(state(), a, RunnerOnJob("r1"))
    ledger.apply(state(), a, RunnerOnJob(None, requeued_from="r1"))
    assert (a.runner_name, a.requeued_from) == (None, ["r1"])


def test_an_earlier_run_names_the_child_a_copy_and_keeps_its_first_allocation():
    seq, a = state(), attempt()
    a.allocated_at = 3.0
    ledger.apply(seq, a, EarlierRun(7, 10.0))
    assert (seq.others, a.state, a.allocated_at) == ([7], AttemptState.EARLIER_RUN, 3.0)
    b = attempt()
    ledger.apply(state(), b, EarlierRun(7, 10.0))
    assert b.allocated_at == 10.0


def test_a_verdict_reads_as_the_childs_conclusions():
    a = attempt()
    ledger.apply(state(), a, Verdict("failure", "missing"))
    ledger.apply(state(), a, Became(AttemptState.FINISHED))
    assert a.outcome == "run failure, worker missing"
