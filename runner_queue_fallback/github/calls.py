"""A call: the attempts of one read or cancel under the retry rules, the deadline and the quota.

Its own module so that the orchestration of a call is in one place between the wire
(`github.transport`) and the endpoints: each attempt refuses to start past the caller's deadline
and to use a late reply, waits go through `github.retry.spec_retrying` on the injected Clock, a
spent quota is waited for first while a child exists (`github.quota`), and GETs are conditional
(a 304 returns the kept body and does not count against the primary rate limit). Every request
goes out through the client's `send`, so the client stays the one door of each request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol, TypeVar

from pydantic import BaseModel

from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import Clock, elapsed
from runner_queue_fallback.core.errors import (
    DeadlineExceeded,
    GitHubAPIError,
    RateLimited,
    TransportError,
)
from runner_queue_fallback.github.quota import Quota
from runner_queue_fallback.github.retry import (
    DEADLINE_WINDOW,
    Patience,
    RateLimitKind,
    describe_failure,
    spec_retrying,
)
from runner_queue_fallback.github.transport import Cached, Transport, api_path

if TYPE_CHECKING:
    import requests
    from tenacity import RetryCallState

__all__ = ["Calls", "Send"]

_ModelT = TypeVar("_ModelT", bound=BaseModel)
_T = TypeVar("_T")


class Send(Protocol):
    """The client's one door for a request (`GitHubClient._send`)."""

    def __call__(  # noqa: D102  # the protocol of `Transport.send`, documented there
        self,
        method: str,
        path: str,
        *,
        url: str | None = None,
        json: object = None,
        allow_redirects: bool = True,
        attempts: int = 1,
    ) -> requests.Response: ...


class Calls:
    """Reads and cancellations of one repository, with the specification's retries."""

    def __init__(
        self,
        transport: Transport,
        quota: Quota,
        clock: Clock,
        *,
        send: Send,
        log: Callable[[str], None] | None,
        repo_path: str,
    ) -> None:
        """Send through `send`; wait on `clock`; build paths under `repo_path`."""
        self.transport = transport
        self.quota = quota
        self._clock = clock
        self.send = send
        self._log = log
        self._repo_path = repo_path

    def log(self, line: str) -> None:
        """One line in the step's log (when the client was given one)."""
        if self._log is not None:
            self._log(line)

    def path(self, *segments: str | int) -> str:
        """An API path under this repository, from its segments (see `api_path`)."""
        return self._repo_path + api_path(*segments)

    def api_error(
        self, method: str, path: str, response: requests.Response, *, attempts: int
    ) -> GitHubAPIError:
        """The GitHubAPIError subclass of an error reply (`Transport.api_error`).

        A primary rate limit means the quota is spent, even when the headers cannot say so.
        """
        error = self.transport.api_error(method, path, response, attempts=attempts)
        if isinstance(error, RateLimited) and error.kind == RateLimitKind.PRIMARY.value:
            self.quota.stats.rate_remaining = 0
        return error

    def get(
        self,
        path: str,
        params: Mapping[str, str],
        model: type[_ModelT],
        deadline: float | None,
        *,
        cacheable: bool = True,
        accept_late: bool = False,
    ) -> _ModelT:
        """GET `path` with retries and parse the reply into `model`.

        `cacheable=False` for URLs that never repeat (a search with a time in its query): keeping
        their bodies for conditional requests would only grow the cache.
        """

        def attempt(number: int) -> _ModelT:
            url = self.transport.url(path, params)
            response, kept = self.read(path, url, number, deadline, accept_late=accept_late)
            body = response.content if kept is None else kept.body
            parsed = self.transport.parse("GET", path, body, model, number)
            if cacheable:
                self.transport.keep(url, response, body)
            return parsed

        return self.retrying("GET", path, deadline, attempt)

    def read(
        self,
        path: str,
        url: str,
        number: int,
        deadline: float | None,
        *,
        accept_late: bool = False,
    ) -> tuple[requests.Response, Cached | None]:
        """One GET attempt: a 200 reply, or a 304 with the body kept for `url`; else it raises."""
        response = self.checked_send("GET", path, url, number, deadline, accept_late=accept_late)
        cached = self.transport.cached(url)
        if response.status_code == 304 and cached is not None:
            self.quota.stats.not_modified += 1
            return response, cached
        if response.status_code == 200:
            return response, None
        raise self.api_error("GET", path, response, attempts=number)

    def retrying(
        self, method: str, path: str, deadline: float | None, attempt: Callable[[int], _T]
    ) -> _T:
        """Run `attempt(number)` under the specification's retry rules."""
        patience = self.quota.patience

        def before_sleep(state: RetryCallState) -> None:
            self.quota.stats.retries += 1
            failure = state.outcome.exception() if state.outcome is not None else None
            patient = isinstance(failure, RateLimited) and patience is Patience.CHILD_EXISTS
            if patient and isinstance(failure, RateLimited) and failure.basis == "reset":
                self.quota.before_wait(state.upcoming_sleep)
                self.quota.stats.quota_waited += state.upcoming_sleep
            if self._log is None:
                return
            what = describe_failure(failure) if failure is not None else "?"
            if patient:
                until = self._clock.now() + timedelta(seconds=state.upcoming_sleep)
                self._log(
                    f"{method} {path} -> {what}; a child exists, so the wait is taken in full: "
                    f"nothing is sent until {until:%H:%M:%SZ} ({state.upcoming_sleep:.0f}s)"
                )
                return
            self._log(
                f"{method} {path} -> {what}; retry {state.attempt_number} of "
                f"{timing.MAX_RETRIES} in {state.upcoming_sleep:g}s"
            )

        self.quota.wait_for_reset(method, path, deadline)
        retrying = spec_retrying(
            self._clock,
            deadline,
            method=method,
            path=path,
            before_sleep=before_sleep,
            patience=patience,
        )
        for try_ in retrying:
            with try_:
                result = attempt(try_.retry_state.attempt_number)
        return result

    def checked_send(
        self,
        method: str,
        path: str,
        url: str,
        number: int,
        deadline: float | None,
        *,
        accept_late: bool = False,
    ) -> requests.Response:
        """Send one attempt, refusing to start past the deadline or to use a late reply.

        A 401 to a token that renews (an App's installation token) sends it once more with a
        fresh token: reads and cancels are safe to repeat, and the first created nothing.

        `accept_late`: a reply arriving after the deadline is used all the same.
        """
        if deadline is not None and self._clock.monotonic() > deadline:
            raise DeadlineExceeded(method, path, DEADLINE_WINDOW, "no attempt left before it")
        late_ok = None if accept_late else deadline
        try:
            response = self.send(method, path, url=url, attempts=number)
            if response.status_code == 401 and self.transport.renews:
                # The token expired or was revoked before the source renewed it: the source was
                # told, and this read or cancel (safe to repeat) goes once more with a fresh one.
                self.log(f"{method} {path} -> 401: sent once more with a fresh token")
                response = self.send(method, path, url=url, attempts=number)
        except TransportError as exc:
            self._refuse_late(method, path, late_ok, str(exc))
            raise
        self._refuse_late(method, path, late_ok, f"HTTP {response.status_code}")
        return response

    def _refuse_late(self, method: str, path: str, deadline: float | None, what: str) -> None:
        """Raise DeadlineExceeded if the reply (or failure) came in after the deadline."""
        if deadline is None:
            return
        late = self._clock.monotonic() - deadline
        if late > 0:
            raise DeadlineExceeded(
                method, path, DEADLINE_WINDOW, f"{what} arrived {elapsed(late)} after the deadline"
            )
