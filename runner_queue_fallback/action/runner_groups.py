"""Why a job would wait and never start: each candidate's runner group, read with `runners-token`.

github-api.md 13. For each self-hosted candidate: the group exists (the organisation's whole
listing holds its name, letter case ignored; never judged on a 404 alone), it grants this
repository, its workflow restriction admits the child at `workflow-ref`, the organisation's policy
enables self-hosted runners for the repository, and how many of the group's runners carry the
candidate's labels. Each check passes, FAILs with the fix, or is not checked / not proven (why).
`preflight` prints them; the coordinator will call them too (issue 49, part 2).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from runner_queue_fallback.core.errors import NotFound, PermissionDenied, RQFError, Unauthorized
from runner_queue_fallback.core.labels import label_set
from runner_queue_fallback.core.profiles import Candidate
from runner_queue_fallback.github.runner_groups import Runner, RunnerGroup, RunnerReads

__all__ = ["NEEDS", "GroupCheck", "check_groups", "restriction_admits"]

#: What the runners token needs, named in every "not checked".
NEEDS = (
    "runners-token with organisation Self-hosted runners (read) and Actions policies (read), "
    "a read-only fine-grained or App token"
)
_SHA = re.compile(r"[0-9a-f]{40}")
_ENTRY = re.compile(
    r"(?P<repo>[^/@*]+/[^/@*]+)/\.github/workflows/(?P<file>[^/@*]+)@(?P<ref>[^@*]+)"
)


@dataclass(frozen=True)
class GroupCheck:
    """One check: `verdict` pass, FAIL, not checked or not proven; `detail` what or why."""

    name: str
    verdict: str
    detail: str


def _short(ref: str) -> str:
    for prefix in ("refs/heads/", "refs/tags/", "heads/", "tags/"):
        if ref.startswith(prefix):
            return ref.removeprefix(prefix)
    return ref


def restriction_admits(
    entries: Sequence[str], repository: str, workflow: str, workflow_ref: str, commit: str | None
) -> bool | None:
    """Whether a selected-workflows list admits the child: True, False, or None (not proven).

    An entry `owner/repo/.github/workflows/<file>@<ref>` matches when the repository (case
    ignored), the file and the ref (full or short) agree; a 40-hex SHA entry when it is the commit
    `workflow-ref` resolves to. Any other form (a wildcard, unknown) leaves it not proven.
    """
    unknown = False
    for entry in entries:
        match = _ENTRY.fullmatch(entry.strip())
        if match is None:
            unknown = True
            continue
        if match["repo"].casefold() != repository.casefold() or match["file"] != workflow:
            continue
        ref = match["ref"]
        if _SHA.fullmatch(ref):
            if commit is None:
                unknown = True
            elif ref == commit:
                return True
            continue
        full_given = workflow_ref.startswith("refs/") and ref.startswith("refs/")
        if (ref == workflow_ref) if full_given else (_short(ref) == _short(workflow_ref)):
            return True
    return None if unknown else False


def _why_not(exc: RQFError) -> str:
    if isinstance(exc, Unauthorized):
        return f"GitHub refused runners-token as expired or invalid (401); needs {NEEDS}"
    if isinstance(exc, PermissionDenied):
        return f"runners-token may not read it (403); needs {NEEDS}"
    if isinstance(exc, NotFound):
        return "this server has no runner-group endpoints (404)"
    return f"the read failed: {exc}"


def _counts(runners: Sequence[Runner], labels: frozenset[str]) -> str:
    fit = [r for r in runners if labels <= label_set(r.label_names)]
    idle = sum(1 for r in fit if r.status == "online" and not r.busy)
    busy = sum(1 for r in fit if r.status == "online" and r.busy)
    offline = len(fit) - idle - busy
    zero = " (0 online is normal for a group that scales from zero)" if idle + busy == 0 else ""
    return f"{idle} online idle, {busy} online busy, {offline} offline{zero}"


@dataclass(frozen=True)
class _Target:
    repository: str
    workflow: str
    path: str
    workflow_ref: str
    commit: str | None


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
        return [GroupCheck("runner groups", "not checked", f"no runners-token; needs {NEEDS}")]
    target = _Target(repository, workflow, f".github/workflows/{workflow}", workflow_ref, commit)
    try:
        info = reads.repository()
        if info.owner.type != "Organization":
            runners = reads.repository_runners()
            return [
                GroupCheck(
                    f"runners of {c.label_text}",
                    "pass",
                    f"a user's repository has no runner groups; its own runners: "
                    f"{_counts(runners, label_set(c.labels))}",
                )
                for c in pools
            ]
        org = info.owner.login
        groups = reads.groups(org)
    except RQFError as exc:
        return [GroupCheck("runner groups", "not checked", _why_not(exc))]
    checks = [_policy(reads, org, repository)]
    for candidate in pools:
        checks += _candidate(reads, org, groups, candidate, target, private=info.private)
    return checks


def _policy(reads: RunnerReads, org: str, repository: str) -> GroupCheck:
    name = "self-hosted runner policy"
    try:
        enabled = reads.policy(org).enabled_repositories
    except RQFError as exc:
        return GroupCheck(name, "not checked", _why_not(exc))
    if enabled == "all":
        return GroupCheck(name, "pass", f"organisation {org} enables self-hosted runners for all")
    if enabled == "none":
        return GroupCheck(
            name,
            "FAIL",
            f"organisation {org} enables self-hosted runners for no repository; every job waits. "
            f"Fix: in the organisation's Actions policies, allow self-hosted runners for {repository}",
        )
    return GroupCheck(
        name, "not proven", f"organisation {org} enables them for selected repositories only"
    )


def _candidate(
    reads: RunnerReads,
    org: str,
    groups: Sequence[RunnerGroup],
    candidate: Candidate,
    target: _Target,
    *,
    private: bool,
) -> list[GroupCheck]:
    labels = label_set(candidate.labels)
    if not candidate.group:
        return [_labels_anywhere(reads, org, groups, candidate, target.repository)]
    name = f"runner group {candidate.group}"
    group = next((g for g in groups if g.name.casefold() == candidate.group.casefold()), None)
    if group is None:
        known = ", ".join(g.name for g in groups) or "none"
        return [
            GroupCheck(
                name,
                "FAIL",
                f"organisation {org} has no group of that name (its {len(groups)} groups: "
                f"{known}). Fix: create it, or correct the candidate's `group`",
            )
        ]
    checks = [GroupCheck(name, "pass", f"exists in {org} (id {group.id})")]
    checks.append(_grants(reads, org, group, target.repository, private=private))
    checks.append(_admits(group, target))
    try:
        runners = reads.group_runners(org, group.id)
    except RQFError as exc:
        checks.append(GroupCheck(f"runners of {name}", "not checked", _why_not(exc)))
    else:
        text = candidate.label_text or "any labels"
        checks.append(GroupCheck(f"runners of {name} ({text})", "pass", _counts(runners, labels)))
    return checks


def _grants(
    reads: RunnerReads, org: str, group: RunnerGroup, repository: str, *, private: bool
) -> GroupCheck:
    name = f"runner group {group.name} grants {repository}"
    if not private and not group.allows_public_repositories:
        return GroupCheck(
            name,
            "FAIL",
            "the repository is public and the group does not allow public repositories. Fix: "
            "allow public repositories in the group's settings, or use another group",
        )
    if group.visibility == "all":
        return GroupCheck(name, "pass", "visibility all")
    if group.visibility == "private" and private:
        return GroupCheck(name, "pass", "visibility private, and the repository is private")
    if group.visibility == "selected":
        try:
            selected = reads.group_repositories(org, group.id)
        except RQFError as exc:
            return GroupCheck(name, "not checked", _why_not(exc))
        if any(r.casefold() == repository.casefold() for r in selected):
            return GroupCheck(name, "pass", "among its selected repositories")
    return GroupCheck(
        name,
        "FAIL",
        f"visibility {group.visibility} does not grant it; a job waits in the queue forever. "
        f"Fix: add {repository} to the group's repository access",
    )


def _admits(group: RunnerGroup, target: _Target) -> GroupCheck:
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
    return GroupCheck(
        name,
        "FAIL",
        f"its selected workflows do not list the child at workflow-ref; a job waits forever. "
        f"Fix: add the entry {entry}",
    )


def _labels_anywhere(
    reads: RunnerReads, org: str, groups: Sequence[RunnerGroup], candidate: Candidate, repo: str
) -> GroupCheck:
    """A candidate without a group: the runners of every group that grants `all` repositories."""
    name = f"runners with {candidate.label_text} (no group)"
    runners: list[Runner] = []
    try:
        for group in groups:
            if group.visibility == "all":
                runners += reads.group_runners(org, group.id)
    except RQFError as exc:
        return GroupCheck(name, "not checked", _why_not(exc))
    return GroupCheck(
        name,
        "pass",
        f"in the groups every repository of {org} may use (for {repo}): "
        f"{_counts(runners, label_set(candidate.labels))}",
    )
