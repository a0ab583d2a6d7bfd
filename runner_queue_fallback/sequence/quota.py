"""Admission before every dispatch: the shared API quota must cover one whole candidate.

Every coordinator in a repository spends one `GITHUB_TOKEN` quota (`x-ratelimit-limit`: 1,000
requests an hour on github.com, more on Enterprise Cloud; read, never assumed). Before each
dispatch the quota left is taken from the replies already received (`GET /rate_limit`, which
counts against no primary quota, only when none says it). Below `RESERVE_REQUESTS` no child is
dispatched: the sequence waits until the reset plus a random spread (so coordinators that waited
together do not all wake together), within `admission-timeout-minutes` for the whole sequence,
and past it fails with no child. No child exists during this wait, so it is always safe.

Admission only lowers the odds of exhausting the quota (many coordinators read the same
`remaining`); once a child exists, the client waits out a spent quota instead (`Patience`).
"""

from __future__ import annotations

from runner_queue_fallback import timing
from runner_queue_fallback.attempts import Attempt
from runner_queue_fallback.errors import NotFound, SequenceError
from runner_queue_fallback.sequence.context import Sequence, seconds

__all__ = ["CANDIDATE_COST_REQUESTS", "RESERVE_REQUESTS", "admit"]

#: Requests one candidate sends from its preflight to the proof that its child was cancelled
#: (preflight 3, dispatch 1, startup 2, ten-minute queue 14 plus 4 checks, fresh read 2, cancel 1,
#: proof 4), measured on the fake GitHub by `tests/test_quota.py`, which fails if it grows.
#: Sent, not counted: 304s are free only while ETags hold, so the reserve does not rely on them.
CANDIDATE_COST_REQUESTS = 31
#: The quota below which no child is dispatched: one candidate twice over, for the replies other
#: coordinators spend between our read of `remaining` and our last request.
RESERVE_REQUESTS = 2 * CANDIDATE_COST_REQUESTS


def admit(seq: Sequence, attempt: Attempt) -> None:
    """Return when the quota covers one candidate; else wait for the reset, or fail with no child."""
    budget = seq.inputs.pools.admission_timeout_minutes * 60
    while True:
        remaining = _remaining(seq)
        if remaining is None or remaining >= RESERVE_REQUESTS:
            return
        wait = seq.client.seconds_to_reset() + seq.rng.uniform(0.0, timing.ADMISSION_SPREAD_SECONDS)
        left = budget - seq.result.admission_waited
        quota = (
            f"{remaining} of {seq.client.stats.rate_limit or '?'} requests left in this "
            f"repository's API quota, reset at {seq.client.reset_time()}"
        )
        if seq.client.seconds_to_reset() > left:
            raise SequenceError(
                f"API quota too low to dispatch candidate {attempt.number} ({quota}; one "
                f"candidate needs {RESERVE_REQUESTS}), and the reset is beyond what is left of "
                f"admission-timeout-minutes ({seq.inputs.pools.admission_timeout_minutes}); no "
                "child was dispatched. Run fewer coordinators at once (strategy.max-parallel) or "
                "raise admission-timeout-minutes"
            )
        wait = min(wait, left)
        seq.report.warning(
            f"{quota}; candidate {attempt.number} needs {RESERVE_REQUESTS}. No child is "
            f"dispatched before the reset: waiting {seconds(wait)} (the reset plus a random "
            f"spread; {seconds(left)} of admission-timeout-minutes left)",
            title="Waiting for API quota",
        )
        seq.result.admission_waits += 1
        seq.result.admission_waited += wait
        seq.clock.sleep(wait)


def _remaining(seq: Sequence) -> int | None:
    """The quota left, from the last reply; `GET /rate_limit` when no reply in this window said."""
    if not seq.client.quota_known():
        try:
            seq.client.get_rate_limit()
        except NotFound:  # GitHub Enterprise Server with rate limiting turned off
            return None
    return seq.client.stats.rate_remaining
