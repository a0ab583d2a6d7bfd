"""Admission before every dispatch: the shared API quota must cover one whole candidate.

Every coordinator in a repository spends one `GITHUB_TOKEN` quota (`x-ratelimit-limit`: 1,000
requests an hour on github.com, more on Enterprise Cloud; read, never assumed). Before each
dispatch the quota left is taken from the replies already received (`GET /rate_limit`, which
counts against no primary quota, only when none says it). Below `RESERVE_REQUESTS` no child is
dispatched: the sequence waits until the reset plus a random spread (so coordinators that waited
together do not all wake together). `admission-timeout-minutes` bounds the waits of the whole
sequence: a reset beyond what is left of it fails the sequence at once, with no child (the
spread, at most `timing.ADMISSION_SPREAD_SECONDS`, may run past it). No child exists during
this wait, so it is always safe for a child; for the job it is not: a wait after which the candidate
could not run its course before the coordinator's job ends fails at once too (`job_time.py`), and
the spread is cut to what the job leaves.

Admission only lowers the odds of exhausting the quota (many coordinators read the same
`remaining`); once a child exists, the client waits out a spent quota instead (`Patience`).

A secondary limit (GitHub's requests per minute, shared by the repository) that refuses a read
or the dispatch before any child exists is admission's too (`wait_out_limit`): GitHub's wait plus
a random spread, from the same budget, then every check before the dispatch again. A dispatch
refused by a rate limit created nothing, so it is sent again then (a departure from the spec).
"""

from __future__ import annotations

import math

from runner_queue_fallback.action.attempts import Attempt
from runner_queue_fallback.action.sequence import job_time
from runner_queue_fallback.action.sequence.facts import AdmissionWaited, Phase
from runner_queue_fallback.action.sequence.state import SequenceState, seconds
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.errors import (
    AppTokenUnavailable,
    NotFound,
    RateLimited,
    SequenceError,
)
from runner_queue_fallback.github.retry import RESET_MARGIN_SECONDS

__all__ = [
    "CANDIDATE_COST_REQUESTS",
    "RESERVE_REQUESTS",
    "admit",
    "rate_limit_behind",
    "wait_out_limit",
]

#: Requests one candidate sends from its preflight to the proof that its child was cancelled,
#: measured on the fake GitHub by `tests/test_quota.py` (which fails if it grows): preflight 3,
#: dispatch 1, startup 2, a ten-minute queue 12 (six polls), the fresh read 2, cancel 1 and one
#: proof read 2. Sent, not counted: 304s are free only while ETags hold, so none is relied on.
CANDIDATE_COST_REQUESTS = 23
#: The quota below which no child is dispatched: the measured cost with a margin of 37 for a
#: fallback's parent check, a slow cancellation (each further proof read costs 2, a force-cancel
#: 1) and what other coordinators spend between our read of `remaining` and our last request.
RESERVE_REQUESTS = 60


def admit(seq: SequenceState, attempt: Attempt) -> Phase[None]:
    """Return when the quota covers one candidate; else wait for the reset, or fail with no child."""
    budget = seq.inputs.pools.admission_timeout_minutes * 60
    while True:
        remaining = _remaining(seq)
        if remaining is None or remaining >= RESERVE_REQUESTS:
            return
        reset_in = seq.client.seconds_to_reset()
        left = budget - seq.result.admission_waited
        quota = (
            f"{remaining} of {seq.client.stats.rate_limit or '?'} requests left in this "
            f"repository's API quota, reset at {seq.client.reset_time()}"
        )
        if reset_in - RESET_MARGIN_SECONDS > left:  # the default budget covers one full window
            raise SequenceError(
                f"API quota too low to dispatch candidate {attempt.number} ({quota}; one "
                f"candidate needs {RESERVE_REQUESTS}), and the reset is beyond what is left of "
                f"admission-timeout-minutes ({seq.inputs.pools.admission_timeout_minutes}); no "
                "child was dispatched. Run fewer coordinators at once (strategy.max-parallel) or "
                "raise admission-timeout-minutes"
            )
        waiting = (
            f"API quota too low to dispatch candidate {attempt.number} ({quota}); waiting "
            f"{seconds(reset_in)} for its reset"
        )
        room = _room_after(seq, attempt, reset_in, waiting)
        spread = min(seq.rng.uniform(0.0, timing.ADMISSION_SPREAD_SECONDS), room)
        wait = reset_in + spread  # the spread may run past the budget: it is at most 5 minutes
        seq.report.warning(
            f"{quota}; candidate {attempt.number} needs {RESERVE_REQUESTS}. No child is "
            f"dispatched before the reset: waiting {seconds(wait)} (the reset plus a random "
            f"spread; {seconds(left)} of admission-timeout-minutes left)",
            title="Waiting for API quota",
        )
        yield AdmissionWaited(wait)
        seq.clock.sleep(wait)


def wait_out_limit(seq: SequenceState, attempt: Attempt, limit: RateLimited) -> Phase[None]:
    """A rate limit refused a request before any child: wait, within the budget, or fail now.

    A spent quota is admission's usual wait (the reply said 0 left). A secondary limit waits what
    GitHub asked (`retry-after`, else a minute) plus a random spread of up to
    `timing.SECONDARY_SPREAD_SECONDS`: coordinators refused in the same minute come back apart.
    """
    if limit.basis == "reset":
        yield from admit(seq, attempt)
        return
    budget = seq.inputs.pools.admission_timeout_minutes * 60
    left = budget - seq.result.admission_waited
    asked = max(limit.retry_after, 0.0)
    refused = f"GitHub's secondary rate limit refused {limit.reply}"
    if asked > left:
        raise SequenceError(
            f"{refused} before candidate {attempt.number} was dispatched, and the wait it asks "
            f"({seconds(asked)}) is beyond what is left of admission-timeout-minutes "
            f"({seq.inputs.pools.admission_timeout_minutes}); no child was dispatched. Start "
            "fewer coordinators in the same minute (strategy.max-parallel) or raise "
            "admission-timeout-minutes"
        ) from limit
    waiting = f"{refused}; waiting {seconds(asked)} before dispatching candidate {attempt.number}"
    room = _room_after(seq, attempt, asked, waiting)
    wait = asked + min(seq.rng.uniform(0.0, timing.SECONDARY_SPREAD_SECONDS), room, left - asked)
    seq.report.warning(
        f"{refused}: requests per minute, shared by every workflow of the repository. No child "
        f"exists, so nothing is left behind: candidate {attempt.number} waits {seconds(wait)} "
        f"(GitHub's wait plus a random spread; {seconds(left)} of admission-timeout-minutes "
        "left), then checks again before its dispatch",
        title="Waiting for GitHub's secondary rate limit",
    )
    yield AdmissionWaited(wait)
    seq.clock.sleep(wait)


def _room_after(seq: SequenceState, attempt: Attempt, wait: float, waiting: str) -> float:
    """What the job leaves the candidate after waiting `wait`; below nothing, fail now.

    `waiting` says what the wait is for, up to "would leave the coordinator job".
    """
    found = job_time.fit(seq, attempt, wait)
    if found is None:
        return math.inf
    if found.room < 0:
        raise job_time.refusal(
            seq,
            attempt,
            found,
            f"{waiting} would leave the coordinator job",
        )
    return found.room


def _remaining(seq: SequenceState) -> int | None:
    """The quota left, from the last reply; `GET /rate_limit` when no reply in this window said."""
    if not seq.client.quota_known():
        try:
            seq.client.get_rate_limit()
        except NotFound:  # GitHub Enterprise Server with rate limiting turned off
            return None
    return seq.client.stats.rate_remaining


def rate_limit_behind(exc: BaseException) -> RateLimited | None:
    """The rate limit that ended a request before any child: `exc`, or what it was raised from.

    A read's retries end in `RateLimited`; a window that closed while one was waited for (the
    parent's grace) chains it, and so does an App token that could not be minted.
    """
    cause: BaseException | None = exc
    for _ in range(4):  # error, window, deadline, rate limit: the longest chain raised here
        if cause is None or isinstance(cause, RateLimited):
            return cause
        cause = cause.cause if isinstance(cause, AppTokenUnavailable) else cause.__cause__
    return None
