"""The API quota as the client learns it from replies, and the waits for its reset.

Its own module so that "how much quota is left, and may we wait for it?" has one answer: every
reply's `x-ratelimit-*` headers update `RequestStats`; while a child exists (`Patience.
CHILD_EXISTS`) nothing is sent that a spent quota can only refuse, and the sequence is told
(`on_wait`) before such a wait is taken. The retry policy itself is `github.retry`. Every
reply's `Date` is kept too: GitHub's own clock, which a request id states (`core.request_id`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Final

from runner_queue_fallback.core.clock import Clock
from runner_queue_fallback.core.errors import QuotaSpent
from runner_queue_fallback.github.models import RateLimitOverview
from runner_queue_fallback.github.retry import (
    DEADLINE_WINDOW,
    RESET_MARGIN_SECONDS,
    Patience,
    believable_reset,
)

__all__ = ["Quota", "RequestStats"]

_MAX_DIGITS: Final = 18
#: An HTTP date is 29 characters; a longer `Date` is not one.
_MAX_DATE_CHARS: Final = 64


@dataclass(slots=True)
class RequestStats:
    """Counters of what the client sent, for logs and the rate-limit budget."""

    #: Every HTTP request handed to the session (including ones that then failed).
    sent: int = 0
    #: 304 Not Modified replies: they do not count against the primary rate limit.
    not_modified: int = 0
    #: The last `x-ratelimit-remaining` GitHub reported.
    rate_remaining: int | None = None
    #: The last `x-ratelimit-limit` GitHub reported (never assumed: Enterprise Cloud differs).
    rate_limit: int | None = None
    #: The last `x-ratelimit-reset` GitHub reported, in UTC epoch seconds.
    rate_reset: float | None = None
    #: Retry waits taken.
    retries: int = 0
    #: Seconds spent waiting for a spent quota to reset (only while a child exists).
    quota_waited: float = 0.0
    #: The `Date` of the last reply that carried a readable one: GitHub's clock (whole seconds,
    #: UTC), never the runner's.
    server_date: datetime | None = None

    @property
    def counted(self) -> int:
        """Requests that count against the primary rate limit: sent minus 304s."""
        return self.sent - self.not_modified


class Quota:
    """What the replies said of the quota, and the waits for its reset while a child exists."""

    def __init__(
        self, stats: RequestStats, clock: Clock, log: Callable[[str], None] | None
    ) -> None:
        """Keep the quota in `stats` (shared with the sending side), on `clock`."""
        self.stats = stats
        self._clock = clock
        self._log = log
        #: How long calls may wait out a rate limit (the client's `patience`): the sequence sets
        #: CHILD_EXISTS while it has a child to watch or clean up, and SPEC again once none is left.
        self.patience = Patience.SPEC
        #: Called with the seconds of a wait for the reset before it is taken (the client's
        #: `on_quota_wait`): the sequence warns when it would outlast its job (None: nobody is told).
        self.on_wait: Callable[[float], None] | None = None

    def note(self, headers: Mapping[str, str]) -> None:
        """Keep the quota every reply reports: remaining, limit and reset (ASCII digits only)."""
        remaining = _whole(headers.get("x-ratelimit-remaining"))
        if remaining is not None:
            self.stats.rate_remaining = remaining
        limit = _whole(headers.get("x-ratelimit-limit"))
        if limit is not None:
            self.stats.rate_limit = limit
        reset = _whole(headers.get("x-ratelimit-reset"))
        believed = believable_reset(float(reset), self._clock.now()) if reset is not None else None
        if believed is not None:  # a reset beyond the hour's window is absent, like a bad one
            self.stats.rate_reset = believed
        date = _http_date(headers.get("date"))
        if date is not None:
            self.stats.server_date = date

    def note_overview(self, overview: RateLimitOverview) -> None:
        """Keep the core quota a `GET /rate_limit` reported."""
        core = overview.resources.core
        self.stats.rate_remaining, self.stats.rate_limit = core.remaining, core.limit
        self.stats.rate_reset = believable_reset(float(core.reset), self._clock.now())

    def known(self) -> bool:
        """Whether a reply said how much quota is left in the current window."""
        reset = self.stats.rate_reset
        return (
            self.stats.rate_remaining is not None
            and reset is not None
            and reset > self._clock.now().timestamp()
        )

    def seconds_to_reset(self) -> float:
        """Seconds until the known quota window resets (+1 s margin); 0 when none is known."""
        reset = self.stats.rate_reset
        if reset is None:
            return 0.0
        return max(0.0, reset - self._clock.now().timestamp() + RESET_MARGIN_SECONDS)

    def reset_in(self) -> float | None:
        """Seconds until the quota resets when the last reply said it is spent; else None."""
        if self.stats.rate_remaining != 0:
            return None
        return self.seconds_to_reset() or None

    def reset_time(self) -> str:
        """The known reset as a UTC time for log lines (`?` when none is known or believable).

        Log lines on the way to a cancel call it: it never raises, whatever the reset holds.
        """
        reset = believable_reset(self.stats.rate_reset, self._clock.now())
        if reset is None:
            return "?"
        try:
            return datetime.fromtimestamp(reset, UTC).strftime("%H:%M:%SZ")
        except (OverflowError, OSError, ValueError):  # a clock beyond any date
            return "?"

    def wait_for_reset(self, method: str, path: str, deadline: float | None) -> None:
        """While a child exists, send nothing the spent quota can only refuse: wait for the reset.

        A reset past the caller's deadline cannot be waited for inside the call: it ends with
        QuotaSpent (a DeadlineExceeded), and nothing is sent; the caller decides whether to pause.
        """
        wait = self.reset_in()
        if wait is None or self.patience is not Patience.CHILD_EXISTS:
            return
        if deadline is not None and self._clock.monotonic() + wait > deadline:
            raise QuotaSpent(
                method,
                path,
                DEADLINE_WINDOW,
                f"the API quota is spent until its reset at {self.reset_time()}, after the window "
                "closes; nothing was sent",
            )
        if self._log is not None:
            self._log(
                f"API quota spent (0 of {self.stats.rate_limit or '?'} left): waiting for its reset "
                f"at {self.reset_time()} ({wait:.0f}s) before {method} {path}"
            )
        self.wait(wait)

    def wait(self, wait: float) -> None:
        """Every wait for the quota's reset: `on_wait` is told first, then it is counted and taken.

        The client's own (above) and the sequence's pauses (`action/sequence/quota_pause.py`).
        """
        self.before_wait(wait)
        self.stats.quota_waited += wait
        self._clock.sleep(wait)

    def before_wait(self, wait: float) -> None:
        """Tell `on_wait` (the sequence) of a wait for the quota's reset before it is taken."""
        if self.on_wait is not None:
            self.on_wait(wait)


def _http_date(value: str | None) -> datetime | None:
    """An HTTP `Date` (RFC 9110: `Sun, 06 Nov 1994 08:49:37 GMT`) in UTC; else None (absent).

    A date without a zone (`-0000`, or none at all) says nothing of GitHub's clock: absent too.
    """
    if value is None or not value.isascii() or len(value) > _MAX_DATE_CHARS:
        return None
    try:
        date = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):  # not a date at all
        return None
    if date.tzinfo is None:
        return None
    return date.astimezone(UTC)


def _whole(value: str | None) -> int | None:
    """A header that must be a whole number: ASCII digits, not too many; else None (absent)."""
    if value is None or not (value.isascii() and value.isdigit()) or len(value) > _MAX_DIGITS:
        return None
    return int(value)
