"""The endpoints of one workflow run: dispatch it, read it and its jobs, cancel it.

Its own module so that each endpoint's contract sits beside its request: the dispatch POST is
sent once (its doubtful outcomes are `DispatchAmbiguous`), and once more only after a 401 to a
token that renews (GitHub refused the credential, so no run exists; docs/departures.md); reads
and cancellation go through `github.calls` with the specification's retries, and a 409 to a cancel is "already
completed" only when a fresh read shows the run completed. Listing runs is `github.listing`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import ValidationError

from runner_queue_fallback.core.api_versions import NEWER, OLDER
from runner_queue_fallback.core.errors import (
    CancelRefused,
    DispatchAmbiguous,
    GitHubAPIError,
    GitHubError,
    TransportError,
)
from runner_queue_fallback.github.calls import Calls
from runner_queue_fallback.github.models import (
    CancelOutcome,
    DispatchResult,
    Job,
    JobList,
    WorkflowRun,
    WorkflowRunList,
)
from runner_queue_fallback.github.transport import request_id_note
from runner_queue_fallback.github.versions import VersionNegotiation

if TYPE_CHECKING:
    import requests

__all__ = ["Runs"]


class Runs:
    """Dispatch, read and cancel workflow runs of one repository."""

    def __init__(self, calls: Calls, versions: VersionNegotiation) -> None:
        """Send through `calls`; let `versions` settle the contract of a dispatch."""
        self._calls = calls
        self._versions = versions

    def dispatch_workflow(
        self, workflow: str, ref: str, inputs: Mapping[str, str]
    ) -> DispatchResult | None:
        """Dispatch `workflow` at `ref` once; retried only after a 401 with a token that renews.

        Returns the run details, or None on the older contract (2022-11-28): `204 No Content`
        means "accepted, run unknown", and the run is found by its run-name (`find_runs_by_name`).
        With `auto`, the version is settled by a read first if no reply has settled it yet: the
        POST itself is never the probe, since it cannot be sent twice.

        Raises:
            DispatchAmbiguous: transport error, timeout, 408/5xx, or a 2xx without the expected
                JSON: a run may exist; recover it by run-name (`find_runs_by_name`).
            GitHubAPIError: any other status (a subclass for 401/403, 404, 409, 422, rate
                limits): definite, no run was created. A 401 to a token that renews (an App's
                installation token) was followed by one more POST with a fresh token: this is
                that one's status, or the first 401 when no fresh token could be had.
            AppTokenUnavailable: no token could be minted for the first POST; nothing was sent.

        """
        versions = self._versions
        if versions.detecting:
            self._probe_version(workflow)
        path = self._calls.path("actions", "workflows", workflow, "dispatches")
        body = {"ref": ref, "inputs": dict(inputs)}
        response = self._send_dispatch(path, body, 1)
        if response.status_code == 401 and self._calls.transport.renews:
            response = self._again_with_fresh_token(path, body, response)
        status = response.status_code
        request_id = request_id_note(response)
        if status == 200:
            try:
                return DispatchResult.model_validate_json(response.content)
            except ValidationError:
                raise DispatchAmbiguous(
                    path, f"200 reply without the expected run details{request_id}"
                ) from None
        if status == 204 and versions.version == OLDER:
            return None
        if status == 204 and versions.may_move:
            versions.use_older(
                f"the server answered a dispatch with 204 No Content{request_id}: it ignores "
                f"API version {NEWER}"
            )
            return None
        if 200 <= status < 300:
            raise DispatchAmbiguous(
                path,
                f"HTTP {status} without run details{request_id}; the server does not keep API "
                f"version {versions.version}'s dispatch contract: set the input 'api-version' to "
                f"auto (the default) or {OLDER}",
            )
        if status == 408 or status >= 500:
            raise DispatchAmbiguous(path, f"HTTP {status}{request_id}")
        raise self._calls.api_error("POST", path, response, attempts=1)

    def _send_dispatch(
        self, path: str, body: Mapping[str, object], attempt: int
    ) -> requests.Response:
        """Send the dispatch POST; a failure in transit is ambiguous (a run may exist)."""
        try:
            return self._calls.send(
                "POST", path, json=body, allow_redirects=False, attempts=attempt
            )
        except TransportError as exc:
            raise DispatchAmbiguous(path, exc.detail) from None

    def _again_with_fresh_token(
        self, path: str, body: Mapping[str, object], response: requests.Response
    ) -> requests.Response:
        """A dispatch GitHub answered 401 created nothing: send it once more with a fresh token.

        The token source was told of the 401 (an installation token that expired or was
        revoked) and mints anew; when it cannot, the first 401 stands (nothing more was sent).
        """
        refused = self._calls.api_error("POST", path, response, attempts=1)
        self._calls.log(
            f"POST {path} -> 401 {refused.reply}: GitHub refused the token, so no run was "
            "created; the dispatch is sent once more with a fresh token"
        )
        try:
            return self._send_dispatch(path, body, 2)
        except DispatchAmbiguous:
            raise
        except GitHubError as exc:  # no fresh token could be minted
            raise refused from exc

    def _probe_version(self, workflow: str) -> None:
        """Settle the version with a read (one cheap list page) before the first dispatch."""
        path = self._calls.path("actions", "workflows", workflow, "runs")
        self._calls.get(path, {"per_page": "1"}, WorkflowRunList, None, cacheable=False)

    def get_run(
        self, run_id: int, *, deadline: float | None = None, accept_late: bool = False
    ) -> WorkflowRun:
        """Read a workflow run (its latest attempt).

        `accept_late`: a reply to a request sent before the deadline counts even if it arrives
        after it (the startup window: "in-flight requests can extend the observation window").
        """
        path = self._calls.path("actions", "runs", run_id)
        return self._calls.get(path, {}, WorkflowRun, deadline, accept_late=accept_late)

    def get_run_attempt(
        self, run_id: int, attempt: int, *, deadline: float | None = None
    ) -> WorkflowRun:
        """Read one attempt of a workflow run."""
        path = self._calls.path("actions", "runs", run_id, "attempts", attempt)
        return self._calls.get(path, {}, WorkflowRun, deadline)

    def list_attempt_jobs(
        self,
        run_id: int,
        attempt: int,
        *,
        deadline: float | None = None,
        accept_late: bool = False,
    ) -> list[Job]:
        """List the jobs of one run attempt (first page of 100: a child has one job)."""
        path = self._calls.path("actions", "runs", run_id, "attempts", attempt, "jobs")
        params = {"per_page": "100"}
        return self._calls.get(path, params, JobList, deadline, accept_late=accept_late).jobs

    def cancel(self, run_id: int, how: str, deadline: float | None) -> CancelOutcome:
        """POST a cancel (`how`: `cancel` or `force-cancel`) with retries.

        A 409 is "already completed" only if a fresh read says so. GitHub also answers 409 for a
        run stuck queued with no job; then, or when the fresh read fails, CancelRefused is raised
        (the cleanup sends the cancel again, then force-cancels). `force-cancel` bypasses
        `always()` conditions, for a run that ignores `/cancel`.
        """
        calls = self._calls
        path = calls.path("actions", "runs", run_id, how)
        conflicts: list[GitHubAPIError] = []

        def attempt(number: int) -> CancelOutcome:
            url = calls.transport.url(path, {})
            response = calls.checked_send("POST", path, url, number, deadline)
            if response.status_code == 202:
                return CancelOutcome.ACCEPTED
            if response.status_code == 409:
                conflicts.append(calls.api_error("POST", path, response, attempts=number))
                return CancelOutcome.ALREADY_COMPLETED
            raise calls.api_error("POST", path, response, attempts=number)

        outcome = calls.retrying("POST", path, deadline, attempt)
        if conflicts:
            self._confirm_completed(run_id, conflicts[-1], deadline)
        return outcome

    def _confirm_completed(
        self, run_id: int, conflict: GitHubAPIError, deadline: float | None
    ) -> None:
        """A 409 means "already completed" only when a fresh read shows the run completed.

        GitHub answers 409 to a run that never got a job too ("Cannot cancel a workflow run
        that has not been queued yet."): reading GitHub's message would be guessing.
        """
        try:
            run = self.get_run(run_id, deadline=deadline)
        except GitHubError as exc:
            raise CancelRefused(conflict, f"the fresh read of run {run_id} failed: {exc}") from exc
        if run.status != "completed":
            seen = f"a fresh read shows run {run_id} {run.status}, not completed"
            raise CancelRefused(conflict, seen)
