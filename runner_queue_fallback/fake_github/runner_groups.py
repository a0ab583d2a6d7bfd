"""The organisation's runner groups, runners and self-hosted-runner policy, as GitHub serves them.

github-api.md 13: `GET /orgs/{org}/actions/runner-groups` (paginated, `per_page` <= 100), a
group's `repositories` and `runners`, `GET /orgs/{org}/actions/permissions/self-hosted-runners`
and the repository's own `GET /repos/{owner}/{repo}/actions/runners`. `GITHUB_TOKEN` reads none of
them (403): only a token in `readers` does; a token in `expired` is answered 401 everywhere here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["FakeRunner", "FakeRunnerGroup", "OrgRunners"]

Visibility = Literal["all", "selected", "private"]
_NEEDS = "Resource not accessible by integration"


@dataclass
class FakeRunnerGroup:
    """One runner group of the organisation (the `runner-groups-org` schema's fields)."""

    id: int
    name: str
    visibility: Visibility = "all"
    selected_repositories: tuple[str, ...] = ()
    allows_public_repositories: bool = False
    restricted_to_workflows: bool = False
    selected_workflows: tuple[str, ...] = ()


@dataclass
class FakeRunner:
    """One self-hosted runner: in a group of the organisation, or the repository's own (group 0)."""

    id: int
    name: str
    labels: tuple[str, ...]
    group_id: int = 0
    status: Literal["online", "offline"] = "online"
    busy: bool = False


@dataclass
class OrgRunners:
    """The owner's runner groups and runners; `owner_type` "User": a user's repository, no org."""

    org: str
    owner_type: Literal["Organization", "User"] = "Organization"
    private: bool = True
    groups: list[FakeRunnerGroup] = field(default_factory=list)
    runners: list[FakeRunner] = field(default_factory=list)
    enabled_repositories: Literal["all", "selected", "none"] = "all"
    policy_repositories: tuple[str, ...] = ()
    readers: set[str] = field(default_factory=set)
    expired: set[str] = field(default_factory=set)

    def add_group(self, name: str, **settings: Any) -> FakeRunnerGroup:  # the group's fields
        """Add a group (ids from 2; the Default group is 1 when added by name `Default`)."""
        group = FakeRunnerGroup(len(self.groups) + 2, name, **settings)
        self.groups.append(group)
        return group

    def add_runner(self, group: str | None, labels: tuple[str, ...], **settings: Any) -> None:
        """Add a runner to the group named `group` (None: the repository's own runner)."""
        group_id = 0 if group is None else next(g.id for g in self.groups if g.name == group)
        number = len(self.runners) + 1
        self.runners.append(
            FakeRunner(number, f"runner-{number:03d}", labels, group_id, **settings)
        )

    def serve(
        self, path: str, params: Mapping[str, str], token: str, repository: str
    ) -> tuple[int, Any, int] | None:
        """(status, body, pages) for one GET, or None when the path is none of these endpoints."""
        route = self._match(path, repository)
        if route is None:
            return None
        if token in self.expired:
            return 401, {"message": "Bad credentials", "status": "401"}, 1
        kind, found = route
        if kind == "repository":
            return 200, self._repository(repository), 1
        if kind != "repo-runners" and self.owner_type == "User":
            return 404, {"message": "Not Found", "status": "404"}, 1
        if token not in self.readers:
            return 403, {"message": _NEEDS, "status": "403"}, 1
        return self._answer(kind, found, params, repository)

    def _match(self, path: str, repository: str) -> tuple[str, dict[str, str]] | None:
        if path.lower() == f"/repos/{repository}".lower():
            return "repository", {}
        if path.lower() == f"/repos/{repository}/actions/runners".lower():
            return "repo-runners", {}
        org = re.escape(self.org)
        for kind, pattern in (
            ("groups", rf"/orgs/{org}/actions/runner-groups"),
            ("group-repos", rf"/orgs/{org}/actions/runner-groups/(?P<id>\d+)/repositories"),
            ("group-runners", rf"/orgs/{org}/actions/runner-groups/(?P<id>\d+)/runners"),
            ("policy", rf"/orgs/{org}/actions/permissions/self-hosted-runners"),
        ):
            match = re.fullmatch(pattern, path, flags=re.IGNORECASE)
            if match:
                return kind, match.groupdict()
        return None

    def _repository(self, repository: str) -> dict[str, Any]:
        owner = repository.split("/", maxsplit=1)[0]
        return {
            "id": 1296269,
            "name": repository.split("/")[1],
            "full_name": repository,
            "private": self.private,
            "visibility": "private" if self.private else "public",
            "owner": {"login": owner, "id": 1, "type": self.owner_type},
        }

    def _answer(
        self, kind: str, found: Mapping[str, str], params: Mapping[str, str], repository: str
    ) -> tuple[int, Any, int]:
        per_page = min(100, int(params.get("per_page", "30")))
        page = max(1, int(params.get("page", "1")))
        if kind == "policy":
            return 200, {"enabled_repositories": self.enabled_repositories}, 1
        if kind == "groups":
            items: list[Any] = [self._group(g) for g in self.groups]
            key = "runner_groups"
        elif kind == "repo-runners":
            items = [self._runner(r) for r in self.runners if r.group_id == 0]
            key = "runners"
        else:
            group = next((g for g in self.groups if g.id == int(found["id"])), None)
            if group is None:
                return 404, {"message": "Not Found", "status": "404"}, 1
            if kind == "group-runners":
                items = [self._runner(r) for r in self.runners if r.group_id == group.id]
                key = "runners"
            else:
                items = [{"full_name": name} for name in group.selected_repositories]
                key = "repositories"
        del repository
        shown = items[(page - 1) * per_page : page * per_page]
        return 200, {"total_count": len(items), key: shown}, max(1, -(-len(items) // per_page))

    def _group(self, group: FakeRunnerGroup) -> dict[str, Any]:
        url = f"/orgs/{self.org}/actions/runner-groups/{group.id}"
        return {
            "id": group.id,
            "name": group.name,
            "visibility": group.visibility,
            "default": group.name == "Default",
            "runners_url": f"{url}/runners",
            "selected_repositories_url": f"{url}/repositories",
            "inherited": False,
            "allows_public_repositories": group.allows_public_repositories,
            "restricted_to_workflows": group.restricted_to_workflows,
            "selected_workflows": list(group.selected_workflows),
            "workflow_restrictions_read_only": False,
        }

    @staticmethod
    def _runner(runner: FakeRunner) -> dict[str, Any]:
        return {
            "id": runner.id,
            "name": runner.name,
            "os": "linux",
            "status": runner.status,
            "busy": runner.busy,
            "ephemeral": False,
            "labels": [
                {"id": i + 1, "name": name, "type": "custom"}
                for i, name in enumerate(runner.labels)
            ],
        }
