"""The organisation's runner groups, runners and self-hosted-runner policy, as GitHub serves them.

github-api.md 13: `GET /orgs/{org}/actions/runner-groups` (paginated, `per_page` <= 100), a
group's `repositories` and `runners`, `GET /orgs/{org}/actions/permissions/self-hosted-runners`
with its `repositories`, and the repository's own `GET /repos/{owner}/{repo}/actions/runners`.
The same settings decide which jobs a group's runners take (`OrgRunners.admits`): a job whose
group does not grant the repository, does not admit its workflow, or is under a policy that
leaves the repository out waits forever, as on GitHub, with nothing said.
`GITHUB_TOKEN` reads none of them (403): only a token in `readers` does; a token in `expired` is
answered 401 everywhere here. Repositories are served whole, in the schema of each endpoint
(`full-repository`, `minimal-repository`, `repository`) and of the API version asked for.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import ConfigDict

if TYPE_CHECKING:
    from collections.abc import Iterable

    from runner_queue_fallback.fake_github.render import Renderer

__all__ = [
    "STAND_IN_TOKEN",
    "FakeRunner",
    "FakeRunnerGroup",
    "GroupSpec",
    "OrgRunners",
    "RunnerGroupsSpec",
]

Visibility = Literal["all", "selected", "private"]
_NEEDS = "Resource not accessible by integration"
#: The runners token a scenario's organisation accepts (`preflight --simulate`): no real token.
STAND_IN_TOKEN = "ghs_standinrunnerstoken0123456789abcdef"  # noqa: S105 (the fake's own, not a secret)
_STRICT: ConfigDict = ConfigDict(extra="forbid")


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
    #: Tokens that see the repository itself (`GET /repos/{owner}/{repo}`); None: every token.
    repository_readers: set[str] | None = None
    #: Tokens with "Actions policies" (read), for the policy's endpoints; None: `readers`.
    policy_readers: set[str] | None = None
    #: False: a server release without the self-hosted-runner policy endpoints (GHES 3.17: 404).
    serves_policy: bool = True

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

    def admits(self, group: str, repository: str, workflow: str, ref: str, sha: str) -> bool:
        """Whether GitHub gives a job of `workflow` at `ref` (`sha`) a runner of `group` at all.

        The organisation's policy enables self-hosted runners for the repository; the group
        (named ignoring case; "" for runners outside any named group) exists, grants the
        repository and, if restricted to workflows, lists this one at this ref: a full ref, a
        short branch or tag name, or the commit, `*` matching anything.
        """
        if self.enabled_repositories == "none" or (
            self.enabled_repositories == "selected"
            and repository.casefold() not in {r.casefold() for r in self.policy_repositories}
        ):
            return False
        if not group:
            return True
        found = next((g for g in self.groups if g.name.casefold() == group.casefold()), None)
        if found is None or not self._grants(found, repository):
            return False
        if not found.restricted_to_workflows:
            return True
        path = f"{repository.casefold()}/.github/workflows/{workflow}"
        refs = {ref, f"refs/heads/{ref}", f"refs/tags/{ref}", sha}
        return any(
            fnmatch.fnmatchcase(f"{path}@{r}", _entry_case(entry))
            for entry in found.selected_workflows
            for r in refs
        )

    def _grants(self, group: FakeRunnerGroup, repository: str) -> bool:
        if not self.private and not group.allows_public_repositories:
            return False
        if group.visibility == "selected":
            return repository.casefold() in {r.casefold() for r in group.selected_repositories}
        return group.visibility == "all" or self.private

    def serve(
        self,
        path: str,
        params: Mapping[str, str],
        token: str,
        render: Renderer,
        version: str,
    ) -> tuple[int, Any, int] | None:
        """(status, body, pages) for one GET, or None when the path is none of these endpoints."""
        route = self._match(path, render.repository)
        if route is None:
            return None
        if token in self.expired:
            return 401, {"message": "Bad credentials", "status": "401"}, 1
        kind, found = route
        repos = _Repositories(render, version, private=self.private, owner_type=self.owner_type)
        if self._hidden(kind, token):
            return 404, {"message": "Not Found", "status": "404"}, 1
        if kind == "repository":
            return 200, repos.full(render.repository), 1
        policy_readers = self.readers if self.policy_readers is None else self.policy_readers
        if token not in (policy_readers if kind.startswith("policy") else self.readers):
            return 403, {"message": _NEEDS, "status": "403"}, 1
        return self._answer(kind, found, params, repos)

    def _hidden(self, kind: str, token: str) -> bool:
        """Whether to answer 404: the repository hidden from the token, or an endpoint absent.

        Absent: the policy's on a server without them; an organisation's for a user's repository.
        """
        if kind == "repository":
            return self.repository_readers is not None and token not in self.repository_readers
        if kind.startswith("policy") and not self.serves_policy:
            return True
        return kind != "repo-runners" and self.owner_type == "User"

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
            ("policy-repos", rf"/orgs/{org}/actions/permissions/self-hosted-runners/repositories"),
        ):
            match = re.fullmatch(pattern, path, flags=re.IGNORECASE)
            if match:
                return kind, match.groupdict()
        return None

    def _answer(
        self,
        kind: str,
        found: Mapping[str, str],
        params: Mapping[str, str],
        repos: _Repositories,
    ) -> tuple[int, Any, int]:
        per_page = min(100, int(params.get("per_page", "30")))
        page = max(1, int(params.get("page", "1")))
        if kind == "policy":
            body: dict[str, str] = {"enabled_repositories": self.enabled_repositories}
            if self.enabled_repositories == "selected":
                url = f"{repos.api_url}/orgs/{self.org}/actions/permissions/self-hosted-runners"
                body["selected_repositories_url"] = f"{url}/repositories"
            return 200, body, 1
        if kind == "policy-repos":
            items: list[Any] = [repos.standard(name) for name in self.policy_repositories]
            key = "repositories"
        elif kind == "groups":
            items = [self._group(g, repos.api_url) for g in self.groups]
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
                items = [repos.minimal(name) for name in group.selected_repositories]
                key = "repositories"
        shown = items[(page - 1) * per_page : page * per_page]
        return 200, {"total_count": len(items), key: shown}, max(1, -(-len(items) // per_page))

    def _group(self, group: FakeRunnerGroup, api_url: str) -> dict[str, Any]:
        url = f"{api_url}/orgs/{self.org}/actions/runner-groups/{group.id}"
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


def _entry_case(entry: str) -> str:
    """A selected-workflows entry with its repository (before `/.github/`) in lower case."""
    repo, sep, rest = entry.strip().partition("/.github/workflows/")
    return f"{repo.casefold()}{sep}{rest}" if sep else entry.strip()


@dataclass(frozen=True)
class _Repositories:
    """Repositories of the organisation, each rendered like the world's own (its URLs moved)."""

    render: Renderer
    version: str
    private: bool
    owner_type: str

    @property
    def api_url(self) -> str:
        return self.render.api_url

    def minimal(self, full_name: str) -> dict[str, Any]:
        """A `minimal-repository`."""
        text = json.dumps(self.render.repo()).replace(self.render.repository, full_name)
        body: dict[str, Any] = json.loads(text)
        body["name"] = full_name.split("/", 1)[1]
        body["owner"] |= {"login": full_name.split("/", 1)[0], "type": self.owner_type}
        body["private"] = self.private if full_name == self.render.repository else True
        return body

    def standard(self, full_name: str) -> dict[str, Any]:
        """A `repository` (`has_downloads` left it in 2026-03-10)."""
        body = self.minimal(full_name)
        web = f"{self.render.server_url}/{full_name}"
        host = web.split("://", 1)[-1].split("/", 1)[0]
        stamp = self.render.time(0)
        body |= {
            "archived": False,
            "clone_url": f"{web}.git",
            "created_at": stamp,
            "default_branch": "main",
            "disabled": False,
            "forks": 0,
            "forks_count": 0,
            "git_url": f"git://{host}/{full_name}.git",
            "has_issues": True,
            "has_pages": False,
            "has_projects": True,
            "has_wiki": True,
            "homepage": None,
            "language": None,
            "license": None,
            "mirror_url": None,
            "open_issues": 0,
            "open_issues_count": 0,
            "pushed_at": stamp,
            "size": 0,
            "ssh_url": f"git@{host}:{full_name}.git",
            "stargazers_count": 0,
            "svn_url": web,
            "updated_at": stamp,
            "watchers": 0,
            "watchers_count": 0,
        }
        if self.version != "2026-03-10":
            body["has_downloads"] = True
        return body

    def full(self, full_name: str) -> dict[str, Any]:
        """A `full-repository`: the repository, its owner's type and its visibility."""
        body = self.standard(full_name)
        body.pop("has_downloads", None)
        body |= {
            "has_discussions": False,
            "network_count": 0,
            "subscribers_count": 0,
            "visibility": "private" if body["private"] else "public",
        }
        return body


@dataclass(frozen=True)
class GroupSpec:
    """A scenario's runner group: its name and the settings `runner-groups-org` shows."""

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    name: str
    visibility: Visibility = "all"
    selected_repositories: tuple[str, ...] = ()
    allows_public_repositories: bool = False
    restricted_to_workflows: bool = False
    selected_workflows: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunnerGroupsSpec:
    """A scenario's organisation: its groups and self-hosted-runner policy.

    A pool's group not named in `groups` has the defaults; `STAND_IN_TOKEN` reads them all.
    """

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    groups: tuple[GroupSpec, ...] = ()
    private: bool = True
    enabled_repositories: Literal["all", "selected", "none"] = "all"
    policy_repositories: tuple[str, ...] = ()

    def build(
        self, repository: str, pools: Iterable[tuple[str, tuple[str, ...], int]]
    ) -> OrgRunners:
        """The organisation of `repository`: these groups, then each pool's runners.

        `pools` are (group, labels, count); their runners are online and idle.
        """
        org = OrgRunners(
            repository.split("/", 1)[0],
            private=self.private,
            enabled_repositories=self.enabled_repositories,
            policy_repositories=self.policy_repositories,
            readers={STAND_IN_TOKEN},
        )
        for group in self.groups:
            settings = {k: v for k, v in vars(group).items() if k != "name"}
            org.add_group(group.name, **settings)
        for group_name, labels, count in pools:
            if all(g.name != group_name for g in org.groups):
                org.add_group(group_name)
            for _ in range(count):
                org.add_runner(group_name, labels)
        return org
