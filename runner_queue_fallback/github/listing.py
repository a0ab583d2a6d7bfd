"""Listing a workflow's dispatched runs: the run-name search, created-time windows, pagination.

Its own module so that pagination has one home: pages of 100 runs are read newest first, the
next page is the `Link: rel="next"` URL followed only while it stays on the API host, the cost
is bounded (at most 10 pages, or by the caller stopping the iteration), and a list page keeps its
`Link` header with its body so that a 304 still says where the next page is.
"""

from __future__ import annotations

from collections.abc import Generator
from datetime import UTC, datetime, timedelta
from typing import Final
from urllib.parse import quote, urlsplit

from runner_queue_fallback.core.errors import TransportError
from runner_queue_fallback.github.calls import Calls
from runner_queue_fallback.github.models import WorkflowRun, WorkflowRunList

__all__ = ["Listing"]

#: A run-name search reads at most this many pages of 100 runs (GitHub lists at most 1,000 runs
#: for a filtered query).
_MAX_SEARCH_PAGES: Final = 10


class Listing:
    """The `workflow_dispatch` runs of one repository's workflows, page by page."""

    def __init__(self, calls: Calls) -> None:
        """Read the pages through `calls` (conditional GETs with retries)."""
        self._calls = calls

    def find_runs_by_name(
        self,
        workflow: str,
        run_name: str,
        *,
        created_after: datetime,
        deadline: float | None = None,
    ) -> list[WorkflowRun]:
        """Find `workflow_dispatch` runs of `workflow` whose run-name is exactly `run_name`.

        Used to find a run whose dispatch reply carried no run id (the older contract) or was
        lost. `created_after` must be timezone-aware; it is sent to second precision as
        `created=>=...`. Every page of 100 runs is read, newest first, following `Link` on the
        API host (`iter_workflow_runs`), at most 10: a match on the first page may be a copy,
        and the run dispatched first is listed last. Pass the same `created_after` on every
        search of one run: the same URLs then answer 304 when nothing changed, which does not
        count against the rate limit.
        """
        found: list[WorkflowRun] = []
        pages = self.iter_workflow_runs(workflow, created_after=created_after, deadline=deadline)
        for number, page in enumerate(pages, start=1):
            found += [run for run in page.workflow_runs if run.display_title == run_name]
            if number >= _MAX_SEARCH_PAGES:
                break
        return found

    def iter_workflow_runs(
        self,
        workflow: str,
        *,
        created_after: datetime,
        per_page: int = 100,
        deadline: float | None = None,
    ) -> Generator[WorkflowRunList]:
        """Pages of `workflow_dispatch` runs of `workflow` created at or after `created_after`.

        Newest first, as GitHub lists them. The next page is the `Link: rel="next"` URL, followed
        only while it stays on the API host (same scheme, host and port, under the API path);
        a link anywhere else raises TransportError without being requested. The caller bounds
        the cost by stopping the iteration. Pages are conditional requests like every GET.
        Raises NotFound when the workflow file does not exist.
        """
        if created_after.tzinfo is None:
            raise ValueError("created_after must be timezone-aware")
        since = created_after.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        path = self._calls.path("actions", "workflows", workflow, "runs")
        params = {
            "event": "workflow_dispatch",
            "created": f">={since}",
            "per_page": str(max(1, min(100, per_page))),
        }
        url: str | None = self._calls.transport.url(path, params)
        while url is not None:
            page, link = self._get_page(url, path, deadline)
            yield page
            url = self._next_on_api_host(link, path)

    def list_runs_created_between(
        self,
        workflow: str | int,
        start: datetime,
        end: datetime,
        *,
        deadline: float | None = None,
    ) -> tuple[list[WorkflowRun], bool]:
        """Every `workflow_dispatch` run of `workflow` created from `start` to `end`, both included.

        For the guard, which must see every run bearing its request id before its own, not only
        the first page holding one. The range is sent as `created=<start>..<end>` (whole seconds,
        `end` rounded up); pages of 100 are read newest first, following `Link` on the API host,
        at most 10 of them. Returns the runs (each once) and whether the listing is complete:
        False when a page remains after the 10th or `total_count` says more runs than were seen
        (GitHub lists at most 1,000 runs per query).
        """
        if start.tzinfo is None or end.tzinfo is None:
            raise ValueError("start and end must be timezone-aware")
        since = start.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        whole_end = end.astimezone(UTC)
        if whole_end.microsecond:
            whole_end += timedelta(seconds=1)
        until = whole_end.strftime("%Y-%m-%dT%H:%M:%SZ")
        path = self._calls.path("actions", "workflows", workflow, "runs")
        params = {"event": "workflow_dispatch", "created": f"{since}..{until}", "per_page": "100"}
        url: str | None = self._calls.transport.url(path, params)
        runs: dict[int, WorkflowRun] = {}
        total = 0
        for _ in range(_MAX_SEARCH_PAGES):
            if url is None:
                return list(runs.values()), len(runs) >= total
            page, link = self._get_page(url, path, deadline)
            runs.update((run.id, run) for run in page.workflow_runs if run.id not in runs)
            total = page.total_count
            url = self._next_on_api_host(link, path)
        return list(runs.values()), url is None and len(runs) >= total

    def iter_runs_created_in(
        self, workflow: str, start: datetime, end: datetime, *, per_page: int = 100
    ) -> Generator[WorkflowRunList]:
        """Pages of `workflow_dispatch` runs created from `start` to `end` (whole seconds, both in).

        For `stats`, which splits a window whose `total_count` passes GitHub's 1,000 results per
        query into smaller ones. Newest first; `Link` followed on the API host only; the caller
        stops the iteration to bound the cost.
        """
        if start.tzinfo is None or end.tzinfo is None:
            raise ValueError("start and end must be timezone-aware")
        span = f"{_whole_second(start)}..{_whole_second(end)}"
        path = self._calls.path("actions", "workflows", workflow, "runs")
        params = {"event": "workflow_dispatch", "created": span, "per_page": str(per_page)}
        url: str | None = self._calls.transport.url(path, params)
        while url is not None:
            page, link = self._get_page(url, path)
            yield page
            url = self._next_on_api_host(link, path)

    def _get_page(
        self, url: str, path: str, deadline: float | None = None
    ) -> tuple[WorkflowRunList, str]:
        """GET one list page by its full URL; the page and its `Link` header (kept for 304s)."""
        calls = self._calls

        def attempt(number: int) -> tuple[WorkflowRunList, str]:
            response, kept = calls.read(path, url, number, deadline)
            if kept is None:
                body, link = response.content, response.headers.get("Link", "")
            else:
                body, link = kept.body, kept.link
            parsed = calls.transport.parse("GET", path, body, WorkflowRunList, number)
            calls.transport.keep(url, response, body, link)
            return parsed, link

        return calls.retrying("GET", path, deadline, attempt)

    def _next_on_api_host(self, link: str, path: str) -> str | None:
        """The `rel="next"` URL of a Link header, refused unless it is under the API URL."""
        target = _next_link(link)
        if target is None:
            return None
        api, found = urlsplit(self._calls.transport.api_url), urlsplit(target)
        same_origin = (found.scheme, found.netloc) == (api.scheme, api.netloc)
        if not same_origin or not found.path.startswith(api.path.rstrip("/") + "/"):
            shown = quote(f"{found.scheme}://{found.netloc}", safe=":/")[:100]
            raise TransportError(
                "GET", path, f"pagination link to {shown} is not on the API host; not followed"
            )
        return target


def _next_link(header: str) -> str | None:
    """The URL marked `rel="next"` in a Link header (RFC 8288), or None."""
    for part in header.split(","):
        target, _, params = part.partition(";")
        rels = {p.strip().removeprefix("rel=").strip('"') for p in params.split(";")}
        if "next" in rels and target.strip().startswith("<") and target.strip().endswith(">"):
            return target.strip()[1:-1]
    return None


def _whole_second(at: datetime) -> str:
    """`at` in UTC to the second, as GitHub's `created` search syntax takes it."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
