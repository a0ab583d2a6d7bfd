"""One exception tree for everything the action reports to its user.

    RQFError
    ├── InputError            an action input is missing or invalid (no API request was made)
    ├── InputErrors           every invalid input of one reading, reported together (exit code 2)
    ├── ProfileError          a shipped profile data file is broken
    ├── GitHubError           talking to the GitHub REST API failed
    │   ├── TransportError        no usable reply: network, timeout, malformed JSON
    │   ├── DeadlineExceeded      the caller's window closed before a usable reply
    │   ├── DispatchAmbiguous     the dispatch POST may or may not have created a run
    │   └── GitHubAPIError        GitHub answered with an error status
    │       ├── NotFound              404
    │       ├── PermissionDenied      401, or 403 that is not a rate limit
    │       ├── RateLimited           403/429 primary or secondary rate limit
    │       ├── Conflict              409
    │       ├── Unprocessable         422
    │       └── ServerError           408 and 5xx
    └── SequenceError         the fallback sequence had to stop (race, identity, source moved, ...)
        └── GuardRefused          the child's startup guard blocked the workload

Every message says what happened, why it usually happens and how to fix it. None carries the token.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "TRANSIENT_ERRORS",
    "Conflict",
    "DeadlineExceeded",
    "DispatchAmbiguous",
    "GitHubAPIError",
    "GitHubError",
    "GuardRefused",
    "InputError",
    "InputErrors",
    "Interrupted",
    "NotFound",
    "PermissionDenied",
    "ProfileError",
    "RQFError",
    "RateLimited",
    "SequenceError",
    "ServerError",
    "TransportError",
    "Unprocessable",
]


class RQFError(Exception):
    """Base of every error the action turns into an `::error::` annotation and exit code 1."""

    #: Short title for the annotation.
    title = "runner-queue-fallback"


class InputError(RQFError):
    """An action input is missing or invalid.

    The message names the input as spelled in action.yml, what was given and what is allowed.
    """

    title = "Invalid input"

    def __init__(
        self, name: str, problem: str, *, given: str | None = None, allowed: str = ""
    ) -> None:
        """Describe the bad input `name`."""
        self.name = name
        self.given = given
        self.allowed = allowed
        parts = [f"input '{name}' {problem}"]
        if given is not None:
            parts.append(f"got {_quote(given)}")
        if allowed:
            parts.append(f"allowed: {allowed}")
        super().__init__("; ".join(parts))


class InputErrors(RQFError):
    """One or more inputs are invalid; each is reported, and no API request was made."""

    title = "Invalid input"

    def __init__(self, errors: list[InputError]) -> None:
        """Collect the individual errors."""
        self.errors = errors
        super().__init__("; ".join(str(error) for error in errors))


class ProfileError(RQFError):
    """A profile data file under profiles/ does not describe a valid runner type."""

    title = "Broken profile"


class GitHubError(RQFError):
    """A GitHub REST API request could not be completed."""

    title = "GitHub API error"


class TransportError(GitHubError):
    """No usable reply: connection error, timeout, or a body that is not the JSON expected."""

    def __init__(self, method: str, path: str, detail: str, *, attempts: int = 1) -> None:
        """Describe the failed request without its headers (which hold the token)."""
        self.method = method
        self.path = path
        self.detail = detail
        self.attempts = attempts
        super().__init__(
            f"{method} {path} failed after {attempts} attempt(s): {detail}. "
            "GitHub may be unreachable or overloaded; check https://www.githubstatus.com "
            "and GITHUB_API_URL."
        )


class DeadlineExceeded(GitHubError):
    """The caller's window closed before a usable reply arrived; the reply cannot authorise anything."""

    def __init__(self, method: str, path: str, window: str, last_error: str = "") -> None:
        """Name the request and the window that closed."""
        self.method = method
        self.path = path
        self.window = window
        self.last_error = last_error
        tail = f"; last error: {last_error}" if last_error else ""
        super().__init__(f"{method} {path}: the {window} closed before a usable reply{tail}")


class DispatchAmbiguous(GitHubError):
    """The dispatch POST got no clear answer: a run may exist. It is never retried."""

    def __init__(self, path: str, detail: str) -> None:
        """Describe the unclear outcome."""
        self.path = path
        self.detail = detail
        super().__init__(
            f"POST {path} got no clear answer ({detail}); a child run may or may not have been "
            "created. Dispatch is never retried: the run is looked up by its run-name instead."
        )


class GitHubAPIError(GitHubError):
    """GitHub answered with an error status."""

    hint = ""

    def __init__(
        self,
        method: str,
        path: str,
        status: int,
        message: str,
        *,
        request_id: str | None = None,
        attempts: int = 1,
    ) -> None:
        """Describe the reply: method, API path, status, GitHub's message and request id."""
        self.method = method
        self.path = path
        self.status = status
        self.message = message
        self.request_id = request_id
        self.attempts = attempts
        text = f"{method} {path} -> {status}: {message or 'no message'} (attempts: {attempts}"
        text += f", request id {request_id})" if request_id else ")"
        if self.hint:
            text += f". {self.hint}"
        super().__init__(text)


class NotFound(GitHubAPIError):
    """404: the run, ref, file or workflow does not exist, or the token cannot see it."""

    hint = (
        "Check the repository, the workflow file name and the ref; a private resource the token "
        "cannot read also answers 404."
    )


class PermissionDenied(GitHubAPIError):
    """401, or a 403 that is not a rate limit: never retried."""

    hint = (
        "The token was refused. Give the coordinator job `permissions: {actions: write, "
        "contents: read}` (the child needs `actions: read`), and use the repository's own "
        "GITHUB_TOKEN: it only works for the repository the workflow runs in."
    )


class RateLimited(GitHubAPIError):
    """403/429 because of GitHub's primary or secondary rate limit."""

    hint = (
        "The repository's API quota is shared by every workflow using its GITHUB_TOKEN; run "
        "fewer coordinators at once (strategy.max-parallel) or try again after the reset."
    )

    def __init__(
        self,
        method: str,
        path: str,
        status: int,
        message: str,
        *,
        kind: str,
        retry_after: float,
        request_id: str | None = None,
        attempts: int = 1,
    ) -> None:
        """Record whether it is the primary or secondary limit and how long to wait."""
        self.kind = kind
        self.retry_after = retry_after
        super().__init__(
            method,
            path,
            status,
            f"{message} ({kind} rate limit, retry after {retry_after:.0f}s)",
            request_id=request_id,
            attempts=attempts,
        )


class Conflict(GitHubAPIError):
    """409: for cancel, the run is already completed."""


class Unprocessable(GitHubAPIError):
    """422: GitHub refused the request as invalid."""

    hint = (
        "For a dispatch: the child workflow needs `on: workflow_dispatch` with the seven inputs, "
        "must exist at workflow-ref, and workflow-ref must be a branch or tag."
    )


class ServerError(GitHubAPIError):
    """408 or 5xx: GitHub had a problem; retried a bounded number of times."""

    hint = "GitHub had a temporary problem; see https://www.githubstatus.com."


class SequenceError(RQFError):
    """The fallback sequence stopped for a reason the spec names (race, identity, source, ...)."""

    title = "Fallback stopped"


class GuardRefused(SequenceError):
    """The child's startup guard found a check that does not hold."""

    title = "Guard refused the workload"

    def __init__(self, check: str, expected: str, observed: str, advice: str = "") -> None:
        """Say which check failed and what was expected and observed."""
        self.check = check
        self.expected = expected
        self.observed = observed
        tail = f" {advice}" if advice else ""
        super().__init__(f"{check}: expected {expected}, observed {observed}.{tail}")


def _quote(value: str, limit: int = 120) -> str:
    """Quote a user value for an error message, shortened so a huge JSON does not flood the log."""
    shown = value if len(value) <= limit else value[: limit - 3] + "..."
    return repr(shown)


def join_errors(messages: Sequence[str]) -> str:
    """Join several messages into one line for an annotation."""
    return "; ".join(messages)


class Interrupted(BaseException):
    """The runner asked the step to stop (SIGINT or SIGTERM): clean up within its grace, then exit.

    A BaseException, so no `except Exception` on the way swallows it.
    """

    def __init__(self, signal_name: str) -> None:
        """Remember which signal arrived."""
        self.signal_name = signal_name
        super().__init__(f"received {signal_name}: the workflow run is being cancelled")


#: Failures that may pass: a later poll inside the same window can still succeed. Anything else
#: (a refused permission, a contract error) stops the sequence at once.
TRANSIENT_ERRORS = (TransportError, ServerError, RateLimited, DeadlineExceeded)
