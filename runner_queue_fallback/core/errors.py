"""One exception tree for everything the action reports to its user.

Long (the whole error tree) because each error keeps its fix text, so that every message a user
meets is in one place.

    RQFError
    ├── InputError            an action input is missing or invalid (no API request was made)
    ├── InputErrors           every invalid input of one reading, reported together (exit code 2)
    ├── ProfileError          a shipped profile data file is broken
    ├── GitHubError           talking to the GitHub REST API failed
    │   ├── TransportError        no usable reply: network, timeout, malformed JSON
    │   ├── DeadlineExceeded      the caller's window closed before a usable reply
    │   │   └── QuotaSpent            ... because the API quota is spent until a later reset
    │   ├── DispatchAmbiguous     the dispatch POST may or may not have created a run
    │   ├── AppTokenUnavailable   no installation token could be minted from the App credentials
    │   └── GitHubAPIError        GitHub answered with an error status
    │       ├── NotFound              404
    │       ├── PermissionDenied      403 that is not a rate limit
    │       │   └── Unauthorized          401: the token is invalid or expired
    │       ├── RateLimited           403/429 primary or secondary rate limit
    │       ├── Conflict              409
    │       ├── Unprocessable         422
    │       └── ServerError           408 and 5xx
    ├── SequenceError         the fallback sequence had to stop (race, identity, source moved, ...)
    │   ├── Cancelled             the runner signalled the step, or the parent run stopped
    │   ├── QueuesExhausted       every queue deadline passed, each child cancelled and proven
    │   ├── WorkerFailed          the worker did not succeed
    │   │   └── ExecutionTimeout      ... or outlived execution-timeout-minutes
    │   └── GuardRefused          the child's startup guard blocked the workload
    └── UnexpectedError       any other exception, caught so that cleanup and the report still run

Every message says what happened, why it usually happens and how to fix it. None carries the token.
The fixes a user meets first are module-level constants (`FIX_*`, listed in `TROUBLESHOOTING`), so
the list of messages in docs/troubleshooting.md can be compared with the program's.
"""

from __future__ import annotations

__all__ = [
    "CHILD_FILE_NOT_FOUND",
    "FIX_CHILD_FILE",
    "FIX_CHILD_PERMISSIONS",
    "FIX_COORDINATOR_PERMISSIONS",
    "FIX_CREDENTIALS",
    "FIX_DISPATCH_REFUSED",
    "FIX_NOT_FOUND",
    "FIX_WORKFLOW_REF",
    "TRANSIENT_ERRORS",
    "TROUBLESHOOTING",
    "WORKFLOW_REF_NOT_FOUND",
    "AppTokenUnavailable",
    "CancelRefused",
    "Cancelled",
    "Conflict",
    "DeadlineExceeded",
    "DispatchAmbiguous",
    "ExecutionTimeout",
    "GitHubAPIError",
    "GitHubError",
    "GuardRefused",
    "InputError",
    "InputErrors",
    "Interrupted",
    "NoPool",
    "NotFound",
    "PermissionDenied",
    "ProfileError",
    "QueuesExhausted",
    "QuotaSpent",
    "RQFError",
    "RateLimited",
    "SequenceError",
    "ServerError",
    "TransportError",
    "Unauthorized",
    "UnexpectedError",
    "Unprocessable",
    "WorkerFailed",
]

#: A 401: GitHub does not accept the token at all.
FIX_CREDENTIALS = (
    "Fix: the token is invalid or expired; leave `token` at its default `${{ github.token }}`, "
    "or replace the token you pass with a valid one."
)
#: A 403 (not a rate limit) for a request of the coordinator or its post step.
FIX_COORDINATOR_PERMISSIONS = (
    "Fix: give the coordinator job `permissions: {actions: write, contents: read}` and use the "
    "repository's own GITHUB_TOKEN (it only works for the repository the workflow runs in)."
)
#: A 403 (not a rate limit) for a request of the guard, which runs with the child's token.
FIX_CHILD_PERMISSIONS = (
    "Fix: give the child workflow (the worker job) `permissions: {actions: read, contents: read}`; "
    "the guard reads its own run and its job, its workflow's runs (to refuse copies), the parent "
    "run (with `coordinator-ref`, also a comparison and a tag ref) and the source ref with the "
    "child's token."
)
#: A 404 for the child workflow file at workflow-ref.
FIX_CHILD_FILE = (
    "Fix: commit the child workflow as that file on that branch or tag, or correct the inputs "
    "`workflow` and `workflow-ref`."
)
#: Neither refs/heads/<workflow-ref> nor refs/tags/<workflow-ref> exists.
FIX_WORKFLOW_REF = (
    "Fix: set `workflow-ref` to the branch or tag that holds the child workflow (usually the "
    "default branch, e.g. main)."
)
#: A 404 for anything else (a run, a ref, a workflow).
FIX_NOT_FOUND = (
    "Fix: check the repository, the workflow file name and the ref; a private resource the "
    "token cannot read also answers 404."
)
#: A 422 from the dispatch: GitHub refused the child's inputs or ref.
FIX_DISPATCH_REFUSED = (
    "Fix: the child workflow needs `on: workflow_dispatch` with exactly the seven inputs at "
    "workflow-ref; run `runner-queue-fallback preflight` to see which rule it breaks."
)

CHILD_FILE_NOT_FOUND = (
    "the child workflow file {path} was not found at workflow-ref {ref!r} (input `workflow` is "
    "{workflow!r}, input `workflow-ref` is {ref!r}; GitHub said: {detail}). " + FIX_CHILD_FILE
)
WORKFLOW_REF_NOT_FOUND = (
    "input `workflow-ref` is {ref!r}, which is neither a branch nor a tag of {repository}: "
    "looked for refs/heads/{ref} and refs/tags/{ref}, and GitHub answered 404 for both. "
    + FIX_WORKFLOW_REF
)

#: The fixes a user meets first, by the situation that produces them (docs/troubleshooting.md).
TROUBLESHOOTING = {
    "401 Bad credentials": FIX_CREDENTIALS,
    "403 for the coordinator": FIX_COORDINATOR_PERMISSIONS,
    "403 for the guard": FIX_CHILD_PERMISSIONS,
    "child workflow file not found": FIX_CHILD_FILE,
    "workflow-ref neither branch nor tag": FIX_WORKFLOW_REF,
    "other 404": FIX_NOT_FOUND,
    "dispatch refused (422)": FIX_DISPATCH_REFUSED,
}


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
        self,
        name: str,
        problem: str,
        *,
        given: str | None = None,
        allowed: str = "",
        suggestion: str | None = None,
    ) -> None:
        """Describe the bad input `name`; `suggestion`: the allowed value closest to a typo."""
        self.name = name
        self.given = given
        self.allowed = allowed
        parts = [f"input '{name}' {problem}"]
        if given is not None:
            guess = f" (did you mean {suggestion}?)" if suggestion else ""
            parts.append(f"got {_quote(given)}{guess}")
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


class QuotaSpent(DeadlineExceeded):
    """The primary API quota is spent until a reset past the caller's window; nothing more was sent.

    A waiting phase of the sequence pauses on it: it waits for the reset and reads again. The
    cancellation proof, the post step and the signal path do not: for them the window closed.
    """


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


class AppTokenUnavailable(GitHubError):
    """No installation token could be minted from the App credentials.

    The request that needed one was not sent: a dispatch that needed it created nothing.
    """

    def __init__(
        self, app_id: str, repository: str, installation_id: int | None, cause: GitHubError
    ) -> None:
        """Say why minting failed (`cause`, from the App's own requests) and the fix."""
        self.cause = cause
        reply = getattr(cause, "reply", str(cause))
        status = getattr(cause, "status", None)
        if status == 401:
            fix = (
                "Fix: GitHub refused the App's JWT: `app-private-key` must be a private key of "
                "the App that `app-id` names (generate one on the App's settings page), and the "
                "runner's clock must be right within a minute."
            )
        elif status == 404 and installation_id is None:
            fix = (
                f"Fix: install the App on {repository} (or on all of its owner's repositories), "
                "or set `app-installation-id`."
            )
        elif status == 404:
            fix = (
                f"Fix: `app-installation-id` {installation_id} is not an installation of App "
                f"{app_id}; correct it, or leave it empty to find the installation on {repository}."
            )
        elif status in {403, 422}:
            fix = (
                "Fix: the installation must reach this repository and grant the App Actions "
                "(read and write) and Contents (read); change the App's permissions or "
                "installation, then approve the change on the installation."
            )
        else:
            fix = "Fix: GitHub could not mint the token now; see https://www.githubstatus.com."
        super().__init__(
            f"no installation token of GitHub App {app_id} could be minted for {repository}: "
            f"{reply}. {fix}"
        )


class GitHubAPIError(GitHubError):
    """GitHub answered with an error status."""

    hint = "Fix: GitHub's message says what it refused; correct that input or resource and rerun."

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
        #: what GitHub answered, without the hint: for a caller that knows a better fix
        self.reply = text
        if self.hint:
            text += f". {self.hint}"
        super().__init__(text)


class NotFound(GitHubAPIError):
    """404: the run, ref, file or workflow does not exist, or the token cannot see it."""

    hint = FIX_NOT_FOUND


class PermissionDenied(GitHubAPIError):
    """A 403 that is not a rate limit (and, as its subclass, 401): never retried."""

    hint = FIX_COORDINATOR_PERMISSIONS


class Unauthorized(PermissionDenied):
    """401: the token itself is not accepted (invalid, expired or revoked)."""

    hint = FIX_CREDENTIALS


class RateLimited(GitHubAPIError):
    """403/429 because of GitHub's primary or secondary rate limit."""

    hint = (
        "Fix: the repository's API quota is shared by every workflow using its GITHUB_TOKEN; run "
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
        basis: str = "backoff",
    ) -> None:
        """Record the kind of limit, how long to wait and what the wait is based on.

        `basis` is "retry-after" (GitHub said how long), "reset" (the quota is spent until
        `x-ratelimit-reset`) or "backoff" (neither: wait at least a minute, then longer).
        """
        self.kind = kind
        self.retry_after = retry_after
        self.basis = basis
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

    hint = "Fix: the repository may be empty or the run already completed; check it on GitHub."


class CancelRefused(Conflict):
    """409 to a cancel or force-cancel, yet a fresh read does not show the run completed.

    GitHub's second meaning of 409: a run stuck `queued` with no job answers "Cannot cancel a
    workflow run that has not been queued yet." to both (actions/runner#3872).
    """

    hint = (
        "Fix: GitHub refuses to cancel a run that is not completed; the cleanup sends the cancel "
        "again, then a force-cancel. A run that never got a job stays queued until GitHub clears "
        "it: check it on GitHub"
    )

    def __init__(self, conflict: GitHubAPIError, seen: str) -> None:
        """GitHub's 409 (`conflict`) and what the fresh read showed (`seen`)."""
        self.seen = seen
        super().__init__(
            conflict.method,
            conflict.path,
            conflict.status,
            f"{conflict.message or 'no message'} ({seen})",
            request_id=conflict.request_id,
            attempts=conflict.attempts,
        )


class Unprocessable(GitHubAPIError):
    """422: GitHub refused the request as invalid."""

    hint = FIX_DISPATCH_REFUSED


class ServerError(GitHubAPIError):
    """408 or 5xx: GitHub had a problem; retried a bounded number of times."""

    hint = "Fix: GitHub had a temporary problem; see https://www.githubstatus.com and rerun."


class SequenceError(RQFError):
    """The fallback sequence stopped for a reason the spec names (race, identity, source, ...)."""

    title = "Fallback stopped"


class Cancelled(SequenceError):
    """The workflow run is being cancelled: the runner signalled the step, or the parent stopped."""

    title = "Cancelled"


class QueuesExhausted(SequenceError):
    """No candidate got a runner: each queue deadline passed, each child cancelled and proven."""

    title = "No runner"


class NoPool(SequenceError):
    """Every candidate is proven unable to serve this workflow (`runners-token`): none dispatched."""

    title = "No pool"


class WorkerFailed(SequenceError):
    """The child concluded without success; whether the worker ran is for the ledger to say."""

    title = "Worker did not succeed"


class ExecutionTimeout(WorkerFailed):
    """The child outlived execution-timeout-minutes from its first allocation seen."""

    title = "Execution timeout"


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


class UnexpectedError(RQFError):
    """An exception that is not one of ours: a bug, or a reply nobody foresaw.

    It is recorded like any error (cleanup, outputs, summary, one annotation) instead of ending
    the step with a bare traceback and a child left behind (DESIGN.md invariant 10).
    """

    title = "Unexpected error"

    def __init__(self, where: str, error: Exception) -> None:
        """Name where it happened and what it was."""
        self.where = where
        self.error = error
        detail = str(error)[:_UNEXPECTED_DETAIL_LIMIT]
        super().__init__(
            f"unexpected {type(error).__name__} in {where}: {detail or 'no detail'}. This is a "
            "bug in runner-queue-fallback: please report it with this log"
        )


_UNEXPECTED_DETAIL_LIMIT = 300


def _quote(value: str, limit: int = 120) -> str:
    """Quote a user value for an error message, shortened so a huge JSON does not flood the log."""
    shown = value if len(value) <= limit else value[: limit - 3] + "..."
    return repr(shown)


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
