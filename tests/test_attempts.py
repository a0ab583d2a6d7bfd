"""An attempt's state: the words people read come from `AttemptState.words`, and state is compared
as the enum (the words stay exactly those the summary, the logs and the scenario files show)."""

from __future__ import annotations

import pytest

from runner_queue_fallback.action.attempts import Attempt, AttemptState
from runner_queue_fallback.action.pool_access import SKIPPED
from runner_queue_fallback.core.profiles import Candidate

WORDS = {
    AttemptState.NOT_DISPATCHED: "not dispatched",
    AttemptState.SKIPPED: "skipped",
    AttemptState.REFUSED: "dispatch refused",
    AttemptState.REPLY_LOST: "dispatch reply lost",
    AttemptState.RUN_NOT_FOUND: "dispatch accepted, run not found",
    AttemptState.DISPATCHED: "dispatched",
    AttemptState.QUEUED: "queued",
    AttemptState.ALLOCATED: "runner allocated",
    AttemptState.CANCELLING: "cancelling after queue timeout",
    AttemptState.CANCELLED: "cancelled before a runner (queue timeout)",
    AttemptState.RACE: "runner acquired during cancellation (race)",
    AttemptState.EXECUTION_TIMEOUT: "execution timeout",
    AttemptState.EARLIER_RUN: "an earlier run bears its run-name",
}


def attempt(state: AttemptState, conclusions=(None, None)) -> Attempt:
    made = Attempt(1, Candidate("grp", "pool", 10.0, "pool"), "rqf-1")
    made.state, made.conclusions = state, conclusions
    return made


@pytest.mark.parametrize(("state", "words"), WORDS.items(), ids=str)
def test_each_state_reads_as_the_words_the_outputs_have_always_shown(state, words):
    assert attempt(state).outcome == words


def test_a_finished_child_reads_as_its_run_and_worker_conclusions():
    assert attempt(AttemptState.FINISHED, ("success", "success")).outcome == (
        "run success, worker success"
    )
    assert attempt(AttemptState.FINISHED, ("failure", "missing")).outcome == (
        "run failure, worker missing"
    )
    assert attempt(AttemptState.FINISHED, ("cancelled", None)).outcome == (
        "run cancelled, worker None"
    )


def test_every_state_has_its_words():
    assert set(WORDS) | {AttemptState.FINISHED} == set(AttemptState)


def test_a_skip_reads_as_the_word_its_attempts_json_entry_shows():
    """The summary's row and `attempts-json`'s `"outcome"` say the same word."""
    assert attempt(AttemptState.SKIPPED).outcome == SKIPPED == "skipped"


def test_only_a_child_that_may_still_run_is_in_flight():
    running = {AttemptState.DISPATCHED, AttemptState.QUEUED, AttemptState.ALLOCATED}
    assert {state for state in AttemptState if state.in_flight} == running


@pytest.mark.parametrize("state", list(AttemptState), ids=lambda s: s.name)
def test_a_dispatch_counts_as_sent_unless_github_refused_it(state):
    sent = attempt(state)
    sent.dispatched_at = 5.0
    assert sent.sent is (state is not AttemptState.REFUSED)
    assert attempt(state).sent is False  # never dispatched
