"""The runner groups, their runners and the organisation's self-hosted-runner policy (reads only).

github-api.md 13. These endpoints need a token `GITHUB_TOKEN` is not: organisation "Self-hosted
runners" (read) and "Actions policies" (read) for a fine-grained or App token, and repository
"Administration" (read) for the repository's own runners. Every list is read whole, page by page
(`per_page=100`), so a group is never judged missing from one page.
"""

from __future__ import annotations

from typing import Final, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from runner_queue_fallback.github.calls import Calls
from runner_queue_fallback.github.transport import api_path

__all__ = ["OrgPolicy", "Owner", "RepositoryInfo", "Runner", "RunnerGroup", "RunnerReads"]

_PER_PAGE: Final = 100
_MAX_PAGES: Final = 50  # 5,000 groups or runners: far past any organisation's


class _Reply(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class Owner(_Reply):
    """A repository's owner: `Organization` or `User`."""

    login: str
    type: str


class RepositoryInfo(_Reply):
    """`GET /repos/{owner}/{repo}`: its owner and whether it is private."""

    full_name: str
    private: bool
    owner: Owner


class RunnerGroup(_Reply):
    """One of the organisation's runner groups (`runner-groups-org`)."""

    id: int
    name: str
    visibility: str
    allows_public_repositories: bool = False
    restricted_to_workflows: bool = False
    selected_workflows: list[str] = Field(default_factory=list)


class _Label(_Reply):
    name: str


class Runner(_Reply):
    """One self-hosted runner: its status, whether busy, its labels."""

    id: int
    name: str
    status: str
    busy: bool
    labels: list[_Label]

    @property
    def label_names(self) -> tuple[str, ...]:
        """The runner's label names."""
        return tuple(label.name for label in self.labels)


class OrgPolicy(_Reply):
    """Which repositories may use self-hosted runners: `all`, `selected` or `none`."""

    enabled_repositories: str


class _Repo(_Reply):
    full_name: str


class _GroupPage(_Reply):
    total_count: int | None = None  # a page without it ends the listing when it is short
    runner_groups: list[RunnerGroup]


class _RunnerPage(_Reply):
    total_count: int | None = None
    runners: list[Runner]


class _RepoPage(_Reply):
    total_count: int | None = None  # the policy's listing does not promise it
    repositories: list[_Repo]


Page = _GroupPage | _RunnerPage | _RepoPage
_PageT = TypeVar("_PageT", _GroupPage, _RunnerPage, _RepoPage)


class RunnerReads:
    """The reads of runner groups and runners, through `calls` (one token's client)."""

    def __init__(self, calls: Calls, repository: str) -> None:
        """Read through `calls`; `repository` is `owner/name`."""
        self._calls, self._repository = calls, repository

    def repository(self) -> RepositoryInfo:
        """The repository: its owner's type and whether it is private."""
        owner, _, name = self._repository.partition("/")
        return self._calls.get(api_path("repos", owner, name), {}, RepositoryInfo, None)

    def groups(self, org: str) -> list[RunnerGroup]:
        """Every runner group of `org`, all pages."""
        path = api_path("orgs", org, "actions", "runner-groups")
        return [g for page in self._pages(path, _GroupPage) for g in page.runner_groups]

    def group_runners(self, org: str, group_id: int) -> list[Runner]:
        """Every runner in the group, all pages."""
        path = api_path("orgs", org, "actions", "runner-groups", group_id, "runners")
        return [r for page in self._pages(path, _RunnerPage) for r in page.runners]

    def group_repositories(self, org: str, group_id: int) -> list[str]:
        """The repositories a `selected` group grants, all pages."""
        path = api_path("orgs", org, "actions", "runner-groups", group_id, "repositories")
        return [r.full_name for page in self._pages(path, _RepoPage) for r in page.repositories]

    def policy(self, org: str) -> OrgPolicy:
        """The organisation's self-hosted-runner policy."""
        path = api_path("orgs", org, "actions", "permissions", "self-hosted-runners")
        return self._calls.get(path, {}, OrgPolicy, None)

    def policy_repositories(self, org: str) -> list[str]:
        """The repositories a `selected` self-hosted-runner policy enables, all pages."""
        path = api_path(
            "orgs", org, "actions", "permissions", "self-hosted-runners", "repositories"
        )
        return [r.full_name for page in self._pages(path, _RepoPage) for r in page.repositories]

    def repository_runners(self) -> list[Runner]:
        """The repository's own runners, all pages."""
        path = self._calls.path("actions", "runners")
        return [r for page in self._pages(path, _RunnerPage) for r in page.runners]

    def _pages(self, path: str, model: type[_PageT]) -> list[_PageT]:
        pages: list[_PageT] = []
        seen = 0
        for number in range(1, _MAX_PAGES + 1):
            params = {"per_page": str(_PER_PAGE), "page": str(number)}
            page = self._calls.get(path, params, model, None)
            pages.append(page)
            count = len(_items(page))
            seen += count
            if count < _PER_PAGE or (page.total_count is not None and seen >= page.total_count):
                break
        return pages


def _items(page: Page) -> list[object]:
    if isinstance(page, _GroupPage):
        return list(page.runner_groups)
    if isinstance(page, _RunnerPage):
        return list(page.runners)
    return list(page.repositories)
