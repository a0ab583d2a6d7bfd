"""Retry-After aware retry policy for GitHub reads and cancellation, on tenacity and the Clock.

The specification's rules ("Behavior and limits"):

- reads and cancellation get at most two retries (`timing.MAX_RETRIES`);
- network errors, timeouts, malformed JSON, HTTP 408 and 5xx wait 5 s, then 10 s;
- rate limits wait as GitHub documents: `retry-after`; else, when `x-ratelimit-remaining` is 0,
  until `x-ratelimit-reset` (+1 s); else at least 60 s, then exponentially longer. A reset
  further away than an hour and a minute (or beyond any date) is absent (`believable_reset`). Under
  `Patience.SPEC` (no child exists) a wait longer than 60 s is never shortened: the error is
  raised at once. Under `Patience.CHILD_EXISTS` (a departure from the spec, listed in the README)
  such a wait is taken, up to `timing.PATIENT_RATE_LIMIT_WAITS` of them a call, and rate-limit
  waits do not use up the two retries: giving up would leave the child behind;
- 401/403 (not a rate limit), 404, 409, 422 and other 4xx are never retried;
- every attempt and every wait shares the caller's deadline: a wait that would end past it is
  not taken, and `DeadlineExceeded` carries the last error instead (`QuotaSpent` when the wait
  was for a spent primary quota's reset: a waiting phase of the sequence then pauses for it).

Dispatch POSTs never come here: they are sent exactly once.
"""

from __future__ import annotations

import email.utils
import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import NoReturn

from tenacity import RetryCallState, Retrying, retry_if_exception
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import Clock
from runner_queue_fallback.core.errors import (
    DeadlineExceeded,
    GitHubAPIError,
    QuotaSpent,
    RateLimited,
    ServerError,
    TransportError,
)

__all__ = [
    "DEADLINE_WINDOW",
    "DeadlineStop",
    "Patience",
    "RateLimit",
    "RateLimitKind",
    "RetryBudget",
    "SpecWait",
    "believable_reset",
    "classify_rate_limit",
    "describe_failure",
    "is_retryable",
    "rate_limit_wait",
    "reset_seconds",
    "retry_after_seconds",
    "spec_retrying",
]

#: How `DeadlineExceeded` names the window; the caller knows which window it was.
DEADLINE_WINDOW = "caller's deadline window"

#: Added to `x-ratelimit-reset`: the reset is whole seconds and GitHub's clock is not ours
#: (PyGithub adds the same second).
RESET_MARGIN_SECONDS = 1.0


class Patience(enum.Enum):
    """How long a call may wait out a rate limit; the sequence sets it on the client."""

    #: No child exists: the spec's rule, at most two retries of at most one minute each.
    SPEC = "spec"
    #: A child exists: wait out a spent quota or a long `retry-after` rather than abandon it.
    CHILD_EXISTS = "child-exists"


class RateLimitKind(enum.Enum):
    """GitHub's two kinds of rate limit."""

    PRIMARY = "primary"
    SECONDARY = "secondary"


@dataclass(frozen=True, slots=True)
class RateLimit:
    """A reply classified as a rate limit, with the wait before the next try."""

    kind: RateLimitKind
    wait: float
    #: what the wait is based on: "retry-after", "reset" or "backoff"
    basis: str


def classify_rate_limit(
    status: int, headers: Mapping[str, str], message: str, now: datetime
) -> RateLimit | None:
    """Tell whether a reply is a rate limit, and which kind, the way githubkit does.

    Only 403 and 429 are inspected. A readable `retry-after` header means secondary;
    `x-ratelimit-remaining: 0` means primary unless the message says "secondary rate". Beyond
    githubkit: GitHub's primary message ("API rate limit exceeded") is primary even when the
    headers cannot be read; a 403/429 whose message says "secondary rate", a bare 429 and an
    unreadable `retry-after` (read as absent: the wait falls back to the reset or a back-off)
    are secondary.

    Ref: https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit
    """
    if status not in (403, 429):
        return None
    says_secondary = "secondary rate" in message.lower()
    says_primary = "api rate limit exceeded" in message.lower()
    if retry_after_seconds(headers.get("retry-after"), now) is not None:
        kind = RateLimitKind.SECONDARY
    elif headers.get("x-ratelimit-remaining") == "0" or (says_primary and not says_secondary):
        kind = RateLimitKind.SECONDARY if says_secondary else RateLimitKind.PRIMARY
    elif says_secondary or status == 429 or "retry-after" in headers:
        kind = RateLimitKind.SECONDARY
    else:
        return None
    return RateLimit(kind, rate_limit_wait(headers, now), _basis(headers, now))


def rate_limit_wait(headers: Mapping[str, str], now: datetime) -> float:
    """Seconds to wait, as GitHub documents; not capped (the retry policy decides).

    `retry-after` when present; else, when `x-ratelimit-remaining` is 0, until
    `x-ratelimit-reset` + 1 s; else 60 s (the first step of a back-off). `now` is the Clock's
    wall time (`clock.now()`), never the machine's.

    Ref: https://docs.github.com/rest/using-the-rest-api/best-practices-for-using-the-rest-api#handle-rate-limit-errors-appropriately
    """
    basis = _basis(headers, now)
    wait: float | None
    if basis == "retry-after":
        wait = retry_after_seconds(headers.get("retry-after"), now)
    elif basis == "reset":
        wait = reset_seconds(headers.get("x-ratelimit-reset"), now)
    else:
        wait = timing.SECONDARY_BACKOFF_FIRST_SECONDS
    return wait if wait is not None and wait > 0 else 0.0  # a past time is no wait


def _basis(headers: Mapping[str, str], now: datetime) -> str:
    """What a rate-limit wait rests on: "retry-after", "reset" (a spent quota) or "backoff".

    An odd `retry-after` or reset (NaN, infinite, negative, a date without a zone, a reset more
    than an hour away) is absent.
    """
    if retry_after_seconds(headers.get("retry-after"), now) is not None:
        return "retry-after"
    if (
        headers.get("x-ratelimit-remaining") == "0"
        and reset_seconds(headers.get("x-ratelimit-reset"), now) is not None
    ):
        return "reset"
    return "backoff"


def retry_after_seconds(value: str | None, now: datetime) -> float | None:
    """`retry-after` as seconds from `now`: a number (what GitHub sends) or an HTTP date.

    None (absent) for anything odd: no value, NaN, infinite or negative numbers, a date without
    a usable time zone (`-0000` means "unknown" in RFC 5322) or one that cannot be read.
    """
    if value is None:
        return None
    seconds = _finite_seconds(value)
    if seconds is not None or _looks_numeric(value):
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None or when.utcoffset() is None:
        return None
    seconds = (when - now).total_seconds()
    return seconds if math.isfinite(seconds) else None


def reset_seconds(value: str | None, now: datetime) -> float | None:
    """Seconds from `now` until `x-ratelimit-reset` (epoch seconds) + 1 s; None if odd."""
    epoch = believable_reset(_finite_seconds(value) if value is not None else None, now)
    if epoch is None:
        return None
    return epoch - now.timestamp() + RESET_MARGIN_SECONDS


def believable_reset(epoch: float | None, now: datetime) -> float | None:
    """A quota reset (UTC epoch seconds) the program can believe, else None (absent).

    GitHub's quota window is an hour: a reset whose wait (with its 1 s margin) would be longer
    than `timing.RESET_WAIT_MAX_SECONDS` is an odd header, as is a negative or endless number
    or one beyond any date (a 17-digit reset made `reset_time()` raise before a cancel). Every
    reset the client reads (each reply's header, `GET /rate_limit`) goes through here, so
    `reset_time()` only ever formats a time an hour or so from `now`. A past reset is kept: it
    asks for no wait.
    """
    if epoch is None or not math.isfinite(epoch) or epoch < 0:
        return None
    if epoch - now.timestamp() + RESET_MARGIN_SECONDS > timing.RESET_WAIT_MAX_SECONDS:
        return None
    return epoch


def _finite_seconds(value: str) -> float | None:
    """A plain finite, non-negative number, else None."""
    try:
        number = float(value.strip())
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _looks_numeric(value: str) -> bool:
    """Whether `value` was meant as a number (so an odd one is not read as a date)."""
    text = value.strip().lower().lstrip("+-")
    return bool(text) and (text[0].isdigit() or text[0] == "." or text in {"nan", "inf"})


def is_retryable(exc: BaseException) -> bool:
    """Network errors, timeouts, malformed replies, 408, 5xx and rate limits are retried."""
    return isinstance(exc, TransportError | ServerError | RateLimited)


def describe_failure(exc: BaseException) -> str:
    """A short form of a failed attempt for retry log lines: the status or transport error."""
    if isinstance(exc, GitHubAPIError):
        kind = f" ({exc.kind} rate limit)" if isinstance(exc, RateLimited) else ""
        request_id = f", request id {exc.request_id}" if exc.request_id else ""
        return f"{exc.status}{kind}{request_id}"
    if isinstance(exc, TransportError):
        return exc.detail
    return str(exc)


class SpecWait(wait_base):
    """The wait before a retry: the rate-limit wait, or 5 s then 10 s for transient errors.

    A secondary limit without `retry-after` (basis "backoff") waits 60 s, then twice as long at
    each further one in the same call.
    """

    def __init__(self) -> None:
        """Start a call with no back-off step taken."""
        self.backoffs = 0

    def __call__(self, retry_state: RetryCallState) -> float:
        """Pick the wait for the attempt that just failed."""
        exc = _last_exception(retry_state)
        if isinstance(exc, RateLimited):
            wait = exc.retry_after if math.isfinite(exc.retry_after) else 0.0
            if exc.basis == "backoff":
                self.backoffs += 1
                return float(min(wait * 2 ** (self.backoffs - 1), timing.RESET_WAIT_MAX_SECONDS))
            return max(wait, 0.0)
        backoff = timing.TRANSIENT_BACKOFF_SECONDS
        return backoff[min(retry_state.attempt_number, len(backoff)) - 1]


class RetryBudget(stop_base):
    """Stop when the call's retries are used up; rate-limit waits follow `patience`.

    Under `Patience.SPEC` every failure uses one of the two retries, and a rate-limit wait over
    60 s stops at once (never retried early). Under `Patience.CHILD_EXISTS` a rate-limit wait
    uses none of them; up to `timing.PATIENT_RATE_LIMIT_WAITS` such waits of at most an hour each
    are taken, each counted separately.
    """

    def __init__(self, patience: Patience) -> None:
        """Start a call with no retry used."""
        self.patience = patience
        self.spec_failures = 0
        self.rate_limit_waits = 0
        #: seconds backed off for a primary limit whose reset could not be read
        self.unknown_reset_waited = 0.0

    def __call__(self, retry_state: RetryCallState) -> bool:
        """Whether the retrying stops after the attempt that just failed."""
        exc = _last_exception(retry_state)
        wait = retry_state.upcoming_sleep
        if isinstance(exc, RateLimited) and self.patience is Patience.CHILD_EXISTS:
            if (
                _primary_without_reset(exc)
                and self.unknown_reset_waited < timing.RESET_WAIT_MAX_SECONDS
            ):
                # A primary quota resets within its hour: back off until one has surely passed
                # before counting a wait, so a child is never given up for an unreadable reset.
                self.unknown_reset_waited += wait
                return False
            self.rate_limit_waits += 1
            return (
                self.rate_limit_waits > timing.PATIENT_RATE_LIMIT_WAITS
                or wait > timing.RESET_WAIT_MAX_SECONDS
            )
        self.spec_failures += 1
        if isinstance(exc, RateLimited) and wait > timing.RATE_LIMIT_WAIT_CAP_SECONDS:
            return True  # the spec caps a wait at a minute: a request sooner can only be refused
        return self.spec_failures > timing.MAX_RETRIES


def _primary_without_reset(exc: RateLimited) -> bool:
    """A primary limit whose reset header could not be read: its wait is a back-off."""
    return exc.kind == RateLimitKind.PRIMARY.value and exc.basis == "backoff"


class DeadlineStop(stop_base):
    """Stop when the next wait would end past the deadline, read on the project Clock.

    tenacity's `stop_after_delay` reads the real monotonic clock itself, ignoring a FakeClock;
    this stop reads `clock.monotonic()` and tenacity's `upcoming_sleep` (computed before stop).
    """

    __slots__ = ("clock", "deadline")

    def __init__(self, clock: Clock, deadline: float | None) -> None:
        """Stop against `deadline`, an absolute `clock.monotonic()` value (None: no deadline)."""
        self.clock = clock
        self.deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        """Whether the upcoming wait would end past the deadline."""
        if self.deadline is None:
            return False
        return self.clock.monotonic() + retry_state.upcoming_sleep > self.deadline


def spec_retrying(  # the call's whole policy, named
    clock: Clock,
    deadline: float | None,
    *,
    method: str,
    path: str,
    before_sleep: Callable[[RetryCallState], None] | None = None,
    patience: Patience = Patience.SPEC,
) -> Retrying:
    """A tenacity `Retrying` that applies the specification's rules on `clock`.

    When attempts run out, the last error is raised as is (it carries the attempt count). When
    the deadline stops the retries early, `DeadlineExceeded` is raised carrying the last error.
    """
    budget = RetryBudget(patience)
    deadline_stop = DeadlineStop(clock, deadline)

    def give_up(retry_state: RetryCallState) -> NoReturn:
        exc = _last_exception(retry_state)
        if deadline_stop(retry_state) and not _budget_spent(budget, exc, retry_state):
            wait = retry_state.upcoming_sleep
            error = QuotaSpent if _primary_reset(exc) else DeadlineExceeded
            raise error(
                method,
                path,
                DEADLINE_WINDOW,
                f"{exc} (the next retry, in {wait:g}s, would end past the deadline)",
            ) from exc
        raise exc

    return Retrying(
        sleep=clock.sleep,
        stop=budget | deadline_stop,
        wait=SpecWait(),
        retry=retry_if_exception(is_retryable),
        reraise=True,
        before_sleep=before_sleep,
        retry_error_callback=give_up,
    )


def _primary_reset(exc: BaseException) -> bool:
    """A refusal by the spent primary quota, with its reset ahead: the caller may pause for it."""
    return isinstance(exc, RateLimited) and exc.kind == "primary" and exc.basis == "reset"


def _budget_spent(budget: RetryBudget, exc: BaseException, retry_state: RetryCallState) -> bool:
    """Whether the budget (not only the deadline) ended the call: then the error is raised as is."""
    wait = retry_state.upcoming_sleep
    if isinstance(exc, RateLimited) and budget.patience is Patience.CHILD_EXISTS:
        return (
            budget.rate_limit_waits > timing.PATIENT_RATE_LIMIT_WAITS
            or wait > timing.RESET_WAIT_MAX_SECONDS
        )
    if isinstance(exc, RateLimited) and wait > timing.RATE_LIMIT_WAIT_CAP_SECONDS:
        return True
    return budget.spec_failures > timing.MAX_RETRIES


def _last_exception(retry_state: RetryCallState) -> BaseException:
    """The exception of the attempt that just failed."""
    outcome = retry_state.outcome
    exc = outcome.exception() if outcome is not None else None
    if exc is None:
        raise RuntimeError("retry policy consulted without a failed attempt")
    return exc
