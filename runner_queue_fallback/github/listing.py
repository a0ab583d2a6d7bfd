"""Listing a workflow's dispatched runs: the run-name search, created-time windows, pagination.

Its own module so that pagination has one home: pages of 100 runs are read newest first, the
next page is the `Link: rel="next"` URL followed only while it stays on the API host, the cost
is bounded (at most 10 pages, or by the caller stopping the iteration), and a list page keeps its
`Link` header with its body so that a 304 still says where the next page is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final
from urllib.parse import quote, urlsplit

from runner_queue_fallback.core.errors import TransportError
from runner_queue_fallback.github.calls import Calls
from runner_queue_fallback.github.models import WorkflowRun, WorkflowRunList

__all__ = ["LISTING_CAP", "Listing", "WindowListing"]

#: A run-name search reads at most this many pages of 100 runs (GitHub lists at most 1,000 runs
#: for a filtered query).
_MAX_SEARCH_PAGES: Final = 10
#: Runs per list page (GitHub's maximum).
_PAGE_SIZE: Final = 100
#: Results GitHub lists for one filtered query (github-api.md 12); its `total_count` counts all.
LISTING_CAP: Final = 1000


@dataclass(frozen=True)
class WindowListing:
    """The runs of a `created` window (each once), and whether that is every one of them."""

    runs: list[WorkflowRun]
    complete: bool
    #: list requests sent
    requests: int
    #: runs created in the whole window, as GitHub counted them at its first page
    counted: int
    #: when not complete: why not
    why: str = ""


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
        max_requests: int,
        deadline: float | None = None,
    ) -> WindowListing:
        """Every `workflow_dispatch` run of `workflow` created from `start` to `end`, both included.

        For the guard, which must see every run bearing its request id before its own, not only
        the first page holding one. The range is sent as `created=<start>..<end>` (whole seconds,
        `end` rounded up); pages of 100 are read newest first, following `Link` on the API host.
        A window whose `total_count` passes the 1,000 runs GitHub lists per query is halved until
        each part fits (as `stats` does). At most `max_requests` list requests are sent: as soon
        as the runs left to read cannot fit in what is left of them, the listing stops, not
        complete, and says why (the runs counted and the requests sent). Not complete either: a
        window of one second holding more than 1,000 runs, or fewer runs read than counted.
        """
        if start.tzinfo is None or end.tzinfo is None:
            raise ValueError("start and end must be timezone-aware")
        path = self._calls.path("actions", "workflows", workflow, "runs")
        reading = _WindowReading(
            lambda url: self._get_page(url, path, deadline),
            lambda link: self._next_on_api_host(link, path),
            lambda params: self._calls.transport.url(path, params),
            max_requests,
        )
        low = math.floor(start.timestamp())
        return reading.read(low, max(low, math.ceil(end.timestamp())))

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


class _WindowReading:
    """One listing of a `created` window: the windows left, the runs read, the requests sent."""

    def __init__(
        self,
        get_page: Callable[[str], tuple[WorkflowRunList, str]],
        next_url: Callable[[str], str | None],
        url: Callable[[dict[str, str]], str],
        max_requests: int,
    ) -> None:
        """Read pages with `get_page(url)`, follow `next_url(link)`, build a URL with `url`."""
        self._get_page, self._next_url, self._url = get_page, next_url, url
        self._max = max_requests
        self.runs: dict[int, WorkflowRun] = {}
        self.requests = 0
        self.counted = 0
        self._span = ""

    def read(self, start: int, end: int) -> WindowListing:
        """List `start..end` (epoch seconds, both in), halving every part past 1,000 runs."""
        self._span = f"{_iso(start)}..{_iso(end)}"
        left = [(start, end)]
        while left:
            low, high = left.pop()
            if (why := self._over_budget(windows=len(left) + 1)) is not None:
                return self._stop(why)
            page, link = self._page(self._first_url(low, high))
            if self.requests == 1:
                self.counted = page.total_count
            if page.total_count > LISTING_CAP:
                if low == high:
                    return self._stop(
                        f"{page.total_count} runs were created in the one second {_iso(low)}: "
                        f"GitHub lists {LISTING_CAP} of them"
                    )
                middle = (low + high) // 2
                left += [(low, middle), (middle + 1, high)]
                continue
            if (why := self._rest_of_window(page, link, windows=len(left))) is not None:
                return self._stop(why)
        return WindowListing(
            list(self.runs.values()), complete=True, requests=self.requests, counted=self.counted
        )

    def _rest_of_window(self, page: WorkflowRunList, link: str, *, windows: int) -> str | None:
        """Read the pages after `page` of one window (at most 1,000 runs); why it fell short."""
        seen = self._take(page)
        total = page.total_count
        while (url := self._next_url(link)) is not None:
            if (why := self._over_budget(windows=windows + 1)) is not None:
                return why
            page, link = self._page(url)
            seen |= self._take(page)
            total = page.total_count
        if len(seen) < total:
            return (
                f"{len(seen)} of the {total} runs counted in a part of the window were listed "
                "(the listing changed while it was read)"
            )
        return None

    def _over_budget(self, *, windows: int) -> str | None:
        """Why the next request is not sent: the runs left cannot fit in the requests left."""
        left = max(0, self.counted - len(self.runs))
        needed = max(windows, math.ceil(left / _PAGE_SIZE))
        if self.requests + needed <= self._max:
            return None
        return (
            f"{self.counted} runs were created in the window {self._span}: reading every one "
            f"needs at least {self.requests + needed} list requests, more than the {self._max} "
            f"allowed ({self.requests} sent)"
        )

    def _page(self, url: str) -> tuple[WorkflowRunList, str]:
        self.requests += 1
        return self._get_page(url)

    def _first_url(self, low: int, high: int) -> str:
        params = {
            "event": "workflow_dispatch",
            "created": f"{_iso(low)}..{_iso(high)}",
            "per_page": str(_PAGE_SIZE),
        }
        return self._url(params)

    def _take(self, page: WorkflowRunList) -> set[int]:
        """Keep the page's runs (each once); their ids."""
        for run in page.workflow_runs:
            self.runs.setdefault(run.id, run)
        return {run.id for run in page.workflow_runs}

    def _stop(self, why: str) -> WindowListing:
        runs = list(self.runs.values())
        return WindowListing(
            runs, complete=False, requests=self.requests, counted=self.counted, why=why
        )


def _iso(epoch: int) -> str:
    """Epoch seconds as GitHub's `created` search syntax takes them."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
