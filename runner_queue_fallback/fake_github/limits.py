"""GitHub's rate limits as the fake GitHub applies them: primary quota buckets, secondary limits.

The primary quota ("Rate limits for the REST API", github-api.md 6 and 14) belongs to a quota
owner, each with its own hourly limit (`x-ratelimit-limit`) and window: the repository (every
job's `GITHUB_TOKEN`: 1,000 an hour, 15,000 on Enterprise Cloud), each GitHub App installation
(every token minted from it shares it: at least 5,000), the App itself (its JWT), and each user
(a personal token: 5,000). A request charges its credential's owner (`QuotaBucket`); separate
owners never touch each other's bucket.

What GitHub documents ("Rate limits for the REST API", secondary limits): at most 100 concurrent
requests (REST and GraphQL together); at most 900 points per minute for REST endpoints; most
`GET`, `HEAD` and `OPTIONS` requests cost 1 point, most `POST`, `PATCH`, `PUT` and `DELETE`
requests 5; past a limit the reply is a 403 or a 429 whose message names the secondary limit, with
`retry-after` when GitHub says how long to wait. It does not document how the limits are keyed,
how the minute is measured, or what a 304 costs.

The assumptions made here, each a setting or stated in a docstring below:

- **One secondary bucket per repository.** Every token used in the repository (each job's `GITHUB_TOKEN`
  belongs to the same GitHub Actions installation) shares one points budget and one concurrency
  count, across all endpoints; so do an App's installation tokens and personal tokens used on it,
  although their primary quotas are their own. If GitHub keys the points per endpoint, per token
  or per quota owner, the real limit is looser than this one: a fleet that stays under it here
  stays under it there.
- **A sliding minute.** The points of the requests served in the last `window_seconds`.
- **What costs points.** Every request GitHub answers: a `304 Not Modified`, an error and a
  refusal by the *primary* limit included (a conditional request is free against the primary
  limit only). A request refused by a secondary limit costs nothing.
- **In flight.** A request counts as concurrent from its arrival until its reply, which takes the
  world's `latency`.
- **Retry-After.** Sent with every secondary refusal (`retry_after` seconds), or never
  (`retry_after=None`), to exercise a client's own back-off.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["QUOTA_WINDOW", "QuotaBucket", "SecondaryLimits", "SecondaryMeter"]

#: The primary quota's window: an hour from the first request counted in it.
QUOTA_WINDOW = 3600.0

#: Why a request was refused by a secondary limit.
SecondaryReason = Literal["concurrent", "points"]


@dataclass
class QuotaBucket:
    """One quota owner's primary quota: `limit` requests in an hour-long window.

    The window opens at the first request counted after the previous one closed (GitHub's
    `x-ratelimit-reset` is that opening plus an hour). `owner` names it in the ledger:
    `repository`, `installation:<id>`, `app:<id>` or `user:<login>`; `message` is what a
    request refused by this bucket is told.
    """

    owner: str
    limit: int
    message: str
    _window: tuple[float, int] | None = None  # (window start, counted requests)

    def used(self, now: float) -> int:
        """Requests counted in the window open at `now` (0 when none is)."""
        if self._window is None or now >= self._window[0] + QUOTA_WINDOW:
            return 0
        return self._window[1]

    def count(self, now: float) -> None:
        """Count one request at `now`, opening a new window when none is open."""
        if self._window is None or now >= self._window[0] + QUOTA_WINDOW:
            self._window = (now, 0)
        self._window = (self._window[0], self._window[1] + 1)

    def reset(self, now: float) -> float:
        """When the open window closes (an hour from `now` when none is open)."""
        start = self._window[0] if self._window and self.used(now) else now
        return start + QUOTA_WINDOW

    def spent(self, now: float) -> bool:
        """Whether the window open at `now` has no request left."""
        return self.used(now) >= self.limit


@dataclass(frozen=True)
class SecondaryLimits:
    """The documented secondary limits (defaults) for one repository; see the module docstring."""

    points_per_minute: int = 900
    concurrent: int = 100
    read_points: int = 1  # GET, HEAD, OPTIONS
    write_points: int = 5  # POST, PATCH, PUT, DELETE
    window_seconds: float = 60.0
    retry_after: int | None = 60  # seconds in `retry-after`; None: the header is left out

    def points(self, method: str) -> int:
        """What one request of `method` costs."""
        return (
            self.read_points if method.upper() in {"GET", "HEAD", "OPTIONS"} else self.write_points
        )


@dataclass
class SecondaryMeter:
    """The repository's running totals against `limits`: points in the window, requests in flight."""

    limits: SecondaryLimits
    _spent: deque[tuple[float, int]] = field(default_factory=deque)  # (served at, points)
    _window_points: int = 0
    _replies_due: list[float] = field(default_factory=list)  # sorted reply times of requests

    def refuse(self, now: float, method: str) -> SecondaryReason | None:
        """Why a request of `method` arriving at `now` is over a limit, or None."""
        if self.in_flight(now) >= self.limits.concurrent:
            return "concurrent"
        if self.points_in_window(now) + self.limits.points(method) > self.limits.points_per_minute:
            return "points"
        return None

    def charge(self, now: float, method: str, reply_at: float) -> int:
        """Book an answered request (its points, and in flight until `reply_at`); its points."""
        points = self.limits.points(method)
        self._expire(now)
        self._spent.append((now, points))
        self._window_points += points
        bisect.insort(self._replies_due, reply_at)
        return points

    def points_in_window(self, now: float) -> int:
        """Points of the requests served in the last `window_seconds` up to `now`."""
        self._expire(now)
        return self._window_points

    def in_flight(self, now: float) -> int:
        """Requests that arrived and are not answered yet at `now`."""
        del self._replies_due[: bisect.bisect_right(self._replies_due, now)]
        return len(self._replies_due)

    def _expire(self, now: float) -> None:
        while self._spent and self._spent[0][0] <= now - self.limits.window_seconds:
            self._window_points -= self._spent.popleft()[1]
