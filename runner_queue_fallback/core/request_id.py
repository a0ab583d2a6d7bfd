"""The request id: the child's unique run-name, and the only link from a child back to its parent.

Format (stable: the guard, the post step and `stats` parse it)::

    rqf-<parent run id>-<parent run attempt>-<candidate number>-<token>-<stated time>

with decimal numbers without leading zeros, a token of 8 lowercase hex digits and a stated time
in ISO 8601's basic form, UTC, to the second (`20261102T090000Z`). The stated time is a time of
GitHub's clock no later than the child's creation: the `Date` of GitHub's last reply before the
dispatch less `STATED_TIME_MARGIN`, and never before the parent attempt started (`stated_time`).
The guard lists the runs created from it, not from the parent attempt's start. The older form,
without the stated time, is still read everywhere (`not_before` is then None). The coordinator
formats it; everyone else parses it with `parse` and refuses what does not match exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

__all__ = ["PATTERN", "STATED_TIME_MARGIN", "RequestId", "created_since", "parse", "stated_time"]

#: The whole grammar, anchored: nothing before, nothing after, no other characters.
PATTERN = re.compile(
    r"rqf-([1-9][0-9]{0,19})-([1-9][0-9]{0,4})-([1-9][0-9]?)-([0-9a-f]{8})"
    r"(?:-([0-9]{8}T[0-9]{6}Z))?"
)
#: Subtracted from GitHub's `Date` before the dispatch: GitHub's servers may disagree a little on
#: the time (the reply's `Date` and the run's `created_at` come from different services), and
#: both are cut to the second. A minute is far more than that, and keeps the guard's window small.
STATED_TIME_MARGIN: Final = timedelta(seconds=60)
_TIME_FORMAT: Final = "%Y%m%dT%H%M%SZ"


@dataclass(frozen=True)
class RequestId:
    """One parsed request id."""

    run_id: int
    run_attempt: int
    candidate: int
    token: str
    #: the stated time (UTC, whole seconds): the child was created at or after it; None in an
    #: id of the older form
    not_before: datetime | None = None

    def __str__(self) -> str:
        """The run-name the child shows."""
        text = f"rqf-{self.run_id}-{self.run_attempt}-{self.candidate}-{self.token}"
        if self.not_before is None:
            return text
        return f"{text}-{self.not_before.astimezone(UTC).strftime(_TIME_FORMAT)}"


def parse(text: str) -> RequestId | None:
    """The request id in `text`, or None when `text` is not exactly one (of either form)."""
    match = PATTERN.fullmatch(text)
    if match is None:
        return None
    run_id, attempt, candidate, token, stated = match.groups()
    not_before = None
    if stated is not None:
        try:
            not_before = datetime.strptime(stated, _TIME_FORMAT).replace(tzinfo=UTC)
        except ValueError:  # digits in the right places, but no time: month 13, second 61
            return None
    return RequestId(int(run_id), int(attempt), int(candidate), token, not_before)


def stated_time(github_now: datetime | None, attempt_started: datetime | None) -> datetime | None:
    """The time a new request id states: GitHub's clock less the margin, from the attempt's start.

    `github_now`: the `Date` of GitHub's last reply before the dispatch (never the runner's own
    clock: one running ahead of GitHub's would state a time after the child's creation).
    `attempt_started`: the parent attempt's `run_started_at`, also GitHub's; the guard refuses a
    stated time before it. Whole seconds, rounded down; None when neither is known (the id then
    has the older form).
    """
    known = [] if attempt_started is None else [attempt_started]
    if github_now is not None:
        known.append(github_now - STATED_TIME_MARGIN)
    if not known:
        return None
    return max(known).astimezone(UTC).replace(microsecond=0)


def created_since(run_name: str, fallback: datetime) -> datetime:
    """Where a search for the runs bearing `run_name` starts: `fallback`, or its stated time.

    The stated time when it is the earlier (a search's `fallback` comes from the runner's clock,
    which may be ahead of GitHub's by more than the search's margin).
    """
    request = parse(run_name)
    if request is None or request.not_before is None:
        return fallback
    return min(fallback, request.not_before)
