"""Why a job would wait and never start: each candidate's runner group, read with `runners-token`.

Long (every runner-group check) because each check, and the "not checked" naming each permission it
needs, is kept in one place that `preflight` and the coordinator's `pool_access` both read.

github-api.md 13. For each self-hosted candidate: the group exists (the organisation's whole
listing holds its name, letter case ignored; never judged on a 404 alone), it grants this
repository, its workflow restriction admits the child at `workflow-ref`, the organisation's policy
enables self-hosted runners for the repository, and how many of the group's runners carry the
candidate's labels. A candidate without a group is checked against the groups the repository may
use. Each check passes, FAILs with the fix, is not checked (why, naming the permission it needs)
or not proven. `preflight` prints them; `pool_access` asks the same checks (not the runner
counts) before a dispatch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar

from runner_queue_fallback.action.workflow_restriction import restriction_admits
from runner_queue_fallback.core.errors import NotFound, PermissionDenied, RQFError, Unauthorized
from runner_queue_fallback.core.labels import label_set
from runner_queue_fallback.core.profiles import Candidate
from runner_queue_fallback.github.runner_groups import Runner, RunnerGroup, RunnerReads

__all__ = [
    "GROUP_NOT_FOUND",
    "NEEDS_GROUPS",
    "NEEDS_POLICY",
    "NEEDS_REPOSITORY_RUNNERS",
    "NOT_ADMITTED",
    "NOT_GRANTED",
    "POLICY_OFF",
    "GroupCheck",
    "GroupReads",
    "Target",
    "admits_check",
    "check_groups",
    "grants_check",
    "group_missing",
    "policy_check",
    "why_not",
]

_TOKEN = "a read-only fine-grained or App runners-token"  # noqa: S105 (a description, no secret)
#: What each read needs of `runners-token`, named in every "not checked".
NEEDS_GROUPS = f'organisation "Self-hosted runners" (read) on {_TOKEN}'
NEEDS_POLICY = f'organisation "Actions policies" (read) on {_TOKEN}'
NEEDS_REPOSITORY_RUNNERS = f'repository "Administration" (read) on {_TOKEN}'
POLICY = "self-hosted runner policy"
#: Why a FAIL proves a candidate's pool unable to serve this workflow (`GroupCheck.reason`).
GROUP_NOT_FOUND: Final = "group-not-found"
NOT_GRANTED: Final = "repository-not-granted"
NOT_ADMITTED: Final = "workflow-not-admitted"
POLICY_OFF: Final = "policy-off"
_T = TypeVar("_T")


@dataclass(frozen=True)
class GroupCheck:
    """One check: `verdict` pass, FAIL, not checked or not proven; `detail` what or why.

    A FAIL names its `reason` (a skip reason of `pool_access`) and its `fix`, also in `detail`.
    """

    name: str
    verdict: str
    detail: str
    reason: str = ""
    fix: str = ""


def why_not(exc: RQFError, needs: str) -> str:
    """Why a read failed, in words, with the permission it `needs` of `runners-token`."""
    if isinstance(exc, Unauthorized):
        return f"GitHub refused runners-token as expired or invalid (401); needs {needs}"
    if isinstance(exc, PermissionDenied):
        return f"runners-token may not read it (403); needs {needs}"
    if isinstance(exc, NotFound):
        return f"this server does not serve the read (404); needs {needs}"
    return f"the read failed: {exc}; needs {needs}"


def _counts(runners: Sequence[Runner], labels: frozenset[str]) -> str:
    fit = [r for r in runners if labels <= label_set(r.label_names)]
    idle = sum(1 for r in fit if r.status == "online" and not r.busy)
    busy = sum(1 for r in fit if r.status == "online" and r.busy)
    offline = len(fit) - idle - busy
    zero = " (0 online is normal for a group that scales from zero)" if idle + busy == 0 else ""
    return f"{idle} online idle, {busy} online busy, {offline} offline{zero}"


@dataclass(frozen=True)
class Target:
    """What the coordinator dispatches: the child `workflow` at `workflow_ref` (its `commit`)."""

    repository: str
    workflow: str
    path: str
    workflow_ref: str
    commit: str | None


@dataclass
class GroupReads:
    """The reads of `org`, each made once (candidates share groups), a failure kept too."""

    reads: RunnerReads
    org: str
    _done: dict[tuple[str, int], object] = field(default_factory=dict)

    def _once(self, key: tuple[str, int], read: Callable[[], _T]) -> _T:
        if key not in self._done:
            try:
                self._done[key] = read()
            except RQFError as exc:
                self._done[key] = exc
        found = self._done[key]
        if isinstance(found, RQFError):
            raise found
        return found  # type: ignore[return-value]  # stored by the same key's read

    def groups(self) -> list[RunnerGroup]:
        """The organisation's whole group listing."""
        return self._once(("groups", 0), lambda: self.reads.groups(self.org))

    def runners(self, group: RunnerGroup) -> list[Runner]:
        """Every runner of `group`."""
        return self._once(
            ("runners", group.id), lambda: self.reads.group_runners(self.org, group.id)
        )

    def repositories(self, group: RunnerGroup) -> list[str]:
        """The repositories `group` grants (`visibility: selected`)."""
        return self._once(
            ("repositories", group.id), lambda: self.reads.group_repositories(self.org, group.id)
        )


def _group_name(candidate: Candidate) -> str:
    if candidate.group:
        return f"runner group {candidate.group}"
    return f"runners with {candidate.label_text} (no group)"


def _all_not_checked(pools: Sequence[Candidate], why: Callable[[str], str]) -> list[GroupCheck]:
    """One "not checked" per check that could not be made, each naming what it needs."""
    checks = [GroupCheck(POLICY, "not checked", why(NEEDS_POLICY))]
    return checks + [GroupCheck(_group_name(c), "not checked", why(NEEDS_GROUPS)) for c in pools]


def check_groups(
    reads: RunnerReads | None,
    candidates: Sequence[Candidate],
    *,
    repository: str,
    workflow: str,
    workflow_ref: str,
    commit: str | None,
) -> list[GroupCheck]:
    """Every runner-group check of the self-hosted candidates, in order (none for hosted ones)."""
    pools = [c for c in candidates if not c.hosted]
    if not pools:
        return []
    if reads is None:
        return _all_not_checked(pools, lambda needs: f"no runners-token; needs {needs}")
    target = Target(repository, workflow, f".github/workflows/{workflow}", workflow_ref, commit)
    try:
        info = reads.repository()
    except NotFound:  # a token may read the organisation's groups and not see the repository
        info = None
    except RQFError as exc:
        refused = exc
        return _all_not_checked(pools, lambda needs: why_not(refused, needs))
    if info is not None and info.owner.type != "Organization":
        return _user_repository(reads, pools)
    org = repository.split("/", 1)[0] if info is None else info.owner.login
    private = None if info is None else info.private
    checks = [policy_check(reads, org, repository)]
    try:
        groups = reads.groups(org)
    except RQFError as exc:
        why = why_not(exc, NEEDS_GROUPS)
        return checks + [GroupCheck(_group_name(c), "not checked", why) for c in pools]
    memo = GroupReads(reads, org)
    for candidate in pools:
        if candidate.group:
            checks += _candidate(memo, groups, candidate, target, private=private)
        else:
            checks.append(_no_group(memo, groups, candidate, target, private=private))
    return checks


def _user_repository(reads: RunnerReads, pools: Sequence[Candidate]) -> list[GroupCheck]:
    """A user's repository has no organisation, so no runner group: only its own runners."""
    try:
        runners = reads.repository_runners()
    except RQFError as exc:
        why = why_not(exc, NEEDS_REPOSITORY_RUNNERS)
        return [GroupCheck(f"runners of {c.label_text}", "not checked", why) for c in pools]
    checks = []
    for candidate in pools:
        counts = _counts(runners, label_set(candidate.labels))
        if candidate.group:
            checks.append(
                GroupCheck(
                    f"runner group {candidate.group}",
                    "not proven",
                    "a repository owned by a user has no organisation runner groups, so no read "
                    f"shows this group; its own runners with {candidate.label_text}: {counts}",
                )
            )
        else:
            checks.append(
                GroupCheck(
                    f"runners of {candidate.label_text}",
                    "pass",
                    f"a user's repository has no runner groups; its own runners: {counts}",
                )
            )
    return checks


def policy_check(reads: RunnerReads, org: str, repository: str) -> GroupCheck:
    """Whether the organisation's self-hosted-runner policy enables them for `repository`."""
    try:
        enabled = reads.policy(org).enabled_repositories
    except RQFError as exc:
        return GroupCheck(POLICY, "not checked", why_not(exc, NEEDS_POLICY))
    if enabled == "all":
        return GroupCheck(POLICY, "pass", f"organisation {org} enables self-hosted runners for all")
    if enabled == "none":
        return GroupCheck(
            POLICY,
            "FAIL",
            f"organisation {org} enables self-hosted runners for no repository; every job "
            f"waits. Fix: {_policy_fix(repository)}",
            POLICY_OFF,
            _policy_fix(repository),
        )
    if enabled != "selected":
        return GroupCheck(POLICY, "not proven", f"an unknown setting {enabled!r}")
    return _policy_selected(reads, org, repository)


def _policy_fix(repository: str) -> str:
    return f"in the organisation's Actions policies, allow self-hosted runners for {repository}"


def _policy_selected(reads: RunnerReads, org: str, repository: str) -> GroupCheck:
    """`enabled_repositories: selected`: whether the whole list of repositories holds this one."""
    try:
        enabled_for = reads.policy_repositories(org)
    except RQFError as exc:
        return GroupCheck(POLICY, "not checked", why_not(exc, NEEDS_POLICY))
    if any(name.casefold() == repository.casefold() for name in enabled_for):
        return GroupCheck(
            POLICY, "pass", f"organisation {org} enables self-hosted runners for {repository}"
        )
    return GroupCheck(
        POLICY,
        "FAIL",
        f"organisation {org} enables self-hosted runners for {len(enabled_for)} selected "
        f"repositories, not this one; every job waits. Fix: {_policy_fix(repository)}",
        POLICY_OFF,
        _policy_fix(repository),
    )


def _candidate(
    memo: GroupReads,
    groups: Sequence[RunnerGroup],
    candidate: Candidate,
    target: Target,
    *,
    private: bool | None,
) -> list[GroupCheck]:
    name = _group_name(candidate)
    group = next((g for g in groups if g.name.casefold() == candidate.group.casefold()), None)
    if group is None:
        return [group_missing(name, memo.org, groups)]
    checks = [GroupCheck(name, "pass", f"exists in {memo.org} (id {group.id})")]
    checks.append(grants_check(memo, group, target.repository, private=private))
    checks.append(admits_check(group, target))
    try:
        runners = memo.runners(group)
    except RQFError as exc:
        checks.append(GroupCheck(f"runners of {name}", "not checked", why_not(exc, NEEDS_GROUPS)))
    else:
        text = candidate.label_text or "any labels"
        labels = label_set(candidate.labels)
        checks.append(GroupCheck(f"runners of {name} ({text})", "pass", _counts(runners, labels)))
    return checks


def group_missing(name: str, org: str, groups: Sequence[RunnerGroup]) -> GroupCheck:
    """FAIL: the organisation's whole listing has no group of the candidate's name."""
    known = ", ".join(g.name for g in groups) or "none"
    fix = "create it, or correct the candidate's `group`"
    return GroupCheck(
        name,
        "FAIL",
        f"organisation {org} has no group of that name (its {len(groups)} groups: {known}). "
        f"Fix: {fix}",
        GROUP_NOT_FOUND,
        fix,
    )


_UNKNOWN_PRIVACY = "runners-token could not read whether the repository is private (404)"


def grants_check(
    memo: GroupReads, group: RunnerGroup, repository: str, *, private: bool | None
) -> GroupCheck:
    """Whether `group` grants `repository`.

    `private` None: runners-token could not read the repository (404), so not its privacy.
    """
    name = f"runner group {group.name} grants {repository}"
    if not group.allows_public_repositories and private is not True:
        if private is None:
            detail = f"the group does not allow public repositories; {_UNKNOWN_PRIVACY}"
            return GroupCheck(name, "not proven", detail)
        fix = "allow public repositories in the group's settings, or use another group"
        return GroupCheck(
            name,
            "FAIL",
            f"the repository is public and the group does not allow public repositories. Fix: {fix}",
            NOT_GRANTED,
            fix,
        )
    verdict, detail = _visibility(memo, group, repository, private=private)
    if verdict == "FAIL":
        return GroupCheck(name, verdict, detail, NOT_GRANTED, _grant_fix(repository))
    return GroupCheck(name, verdict, detail)


def _grant_fix(repository: str) -> str:
    return f"add {repository} to the group's repository access"


def _visibility(
    memo: GroupReads, group: RunnerGroup, repository: str, *, private: bool | None
) -> tuple[str, str]:
    """Whether the group's visibility (all, private, selected) grants the repository."""
    if group.visibility == "all":
        return "pass", "visibility all"
    if group.visibility == "private" and private is None:
        return "not proven", f"visibility private; {_UNKNOWN_PRIVACY}"
    if group.visibility == "private" and private:
        return "pass", "visibility private, and the repository is private"
    if group.visibility == "selected":
        try:
            selected = memo.repositories(group)
        except RQFError as exc:
            return "not checked", why_not(exc, NEEDS_GROUPS)
        if any(r.casefold() == repository.casefold() for r in selected):
            return "pass", "among its selected repositories"
    fix = _grant_fix(repository)
    return (
        "FAIL",
        f"visibility {group.visibility} does not grant it; a job waits forever. Fix: {fix}",
    )


def admits_check(group: RunnerGroup, target: Target) -> GroupCheck:
    """Whether `group`'s workflow restriction admits the child: exact, or not proven."""
    name = f"runner group {group.name} admits the child workflow"
    if not group.restricted_to_workflows:
        return GroupCheck(name, "pass", "not restricted to workflows")
    entry = f"{target.repository}/{target.path}@{target.workflow_ref}"
    admitted = restriction_admits(
        group.selected_workflows,
        target.repository,
        target.workflow,
        target.workflow_ref,
        target.commit,
    )
    if admitted:
        return GroupCheck(name, "pass", "its selected workflows list the child at workflow-ref")
    if admitted is None:
        return GroupCheck(
            name, "not proven", f"an entry of a form not compared exactly; it needs {entry}"
        )
    fix = f"add the entry {entry} to the group's selected workflows"
    return GroupCheck(
        name,
        "FAIL",
        f"its selected workflows do not list the child at workflow-ref; a job waits forever. "
        f"Fix: {fix}",
        NOT_ADMITTED,
        fix,
    )


def _no_group(
    memo: GroupReads,
    groups: Sequence[RunnerGroup],
    candidate: Candidate,
    target: Target,
    *,
    private: bool | None,
) -> GroupCheck:
    """A candidate without a group: the groups that grant the repository and admit the child."""
    name = _group_name(candidate)
    usable: list[RunnerGroup] = []
    unsure: list[GroupCheck] = []
    for group in groups:
        found = (
            grants_check(memo, group, target.repository, private=private),
            admits_check(group, target),
        )
        verdicts = {check.verdict for check in found}
        if verdicts == {"pass"}:
            usable.append(group)
        elif "FAIL" not in verdicts:
            unsure += [check for check in found if check.verdict != "pass"]
    if not usable:
        not_checked = [c for c in unsure if c.verdict == "not checked"]
        if not_checked:
            return GroupCheck(name, "not checked", not_checked[0].detail)
        unsure_text = f", {len(unsure)} not proven" if unsure else ""
        return GroupCheck(
            name,
            "not proven",
            f"none of the {len(groups)} runner groups of {memo.org} is proven to grant "
            f"{target.repository} and admit the child{unsure_text}; only the repository's own "
            "or the enterprise's runners could take the job",
        )
    runners: list[Runner] = []
    try:
        for group in usable:
            runners += memo.runners(group)
    except RQFError as exc:
        return GroupCheck(name, "not checked", why_not(exc, NEEDS_GROUPS))
    names = ", ".join(g.name for g in usable)
    return GroupCheck(
        name,
        "pass",
        f"in the groups {target.repository} may use ({names}): "
        f"{_counts(runners, label_set(candidate.labels))}",
    )
