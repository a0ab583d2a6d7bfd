"""Before a dispatch: whether a candidate's pool is proven unable to serve this workflow.

With `runners-token`, the coordinator asks `PoolAccess.verdict` before each dispatch. Only the
access checks of `runner_groups` are made, never the runner counts (a group that scales from zero
has no runner until a job waits): the group is in the organisation's whole listing, it grants the
repository, its workflow restriction admits the child at `workflow-ref`, the organisation's
self-hosted-runner policy enables the repository. A `Skip` needs proof that one of them fails;
anything short of it (no token, a read refused, failed or expired, a 404, a restriction of a form
not compared exactly, a user's repository) is `NotProven`, and the candidate is dispatched as
before. One `PoolAccess` is made per sequence: each read is made at most once in it, with the
runners token's own client, never the coordinator's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from runner_queue_fallback.action.runner_groups import (
    GROUP_NOT_FOUND,
    NEEDS_GROUPS,
    NOT_ADMITTED,
    NOT_GRANTED,
    POLICY_OFF,
    GroupCheck,
    GroupReads,
    Target,
    admits_check,
    grants_check,
    group_missing,
    policy_check,
    why_not,
)
from runner_queue_fallback.core.errors import NoPool, NotFound, RQFError
from runner_queue_fallback.core.profiles import Candidate
from runner_queue_fallback.github.runner_groups import RunnerReads

__all__ = [
    "NOTHING_READ",
    "SKIPPED",
    "SKIP_REASONS",
    "NotProven",
    "PoolAccess",
    "Skip",
    "SkipReason",
    "Usable",
    "Verdict",
    "no_pool_error",
    "skipped_entry",
]

SkipReason = Literal[
    "group-not-found", "repository-not-granted", "workflow-not-admitted", "policy-off"
]
#: Every skip reason, in the order the checks are made (the first proven one is given).
SKIP_REASONS: Final[tuple[SkipReason, ...]] = (
    GROUP_NOT_FOUND,
    NOT_GRANTED,
    NOT_ADMITTED,
    POLICY_OFF,
)
#: A skipped candidate's `outcome` in `attempts-json`.
SKIPPED: Final = "skipped"
#: Why nothing is proven without `runners-token` (nothing is read, nothing is said).
NOTHING_READ: Final = "no runners-token"


@dataclass(frozen=True)
class Usable:
    """Every access check passed: the pool may serve this workflow (its runners are not counted)."""

    detail: str


@dataclass(frozen=True)
class Skip:
    """Proof that the pool cannot serve this workflow: a job sent there would wait forever."""

    reason: SkipReason
    #: what to change, for the log, the summary and the error when every candidate is skipped
    fix: str
    #: what the reads showed (from the organisation's settings: outside text, to be escaped)
    detail: str

    @property
    def line(self) -> str:
        """One line for the log: `skipped (reason): detail`; the detail already names the fix."""
        return f"skipped ({self.reason}): {self.detail}"


@dataclass(frozen=True)
class NotProven:
    """Nothing proven either way: the candidate is dispatched as without `runners-token`."""

    why: str


Verdict = Usable | Skip | NotProven


def _skip(check: GroupCheck) -> Skip:
    """The Skip a FAIL of `runner_groups` proves (each FAIL names its reason and fix)."""
    reason = next((r for r in SKIP_REASONS if r == check.reason), None)
    if reason is None:
        raise ValueError(f"a failed check without a skip reason: {check}")
    return Skip(reason, check.fix, f"{check.name}: {check.detail}")


@dataclass(frozen=True)
class _Org:
    """The repository's organisation as the runners token sees it (`private` None: unknown)."""

    memo: GroupReads
    private: bool | None


class PoolAccess:
    """The access checks of one sequence: make it once, ask `verdict` before each dispatch.

    `reads` is the runners token's (`GitHubClient.runner_reads` of the client built from
    `runners-token`), None without one. `commit` is the commit `workflow-ref` resolves to (a
    restriction entry naming a SHA is compared with it; None leaves such an entry not proven).
    """

    def __init__(
        self,
        reads: RunnerReads | None,
        *,
        repository: str,
        workflow: str,
        workflow_ref: str,
        commit: str | None,
    ) -> None:
        """Nothing is read until the first `verdict` asks."""
        self._reads = reads
        self._target = Target(
            repository, workflow, f".github/workflows/{workflow}", workflow_ref, commit
        )
        self._org: _Org | NotProven | None = None
        self._policy: GroupCheck | None = None

    @property
    def enabled(self) -> bool:
        """Whether a runners token was given: without one no verdict is worth a log line."""
        return self._reads is not None

    def verdict(self, candidate: Candidate) -> Verdict:
        """Usable, Skip (the first proven reason, in `SKIP_REASONS` order) or NotProven.

        A hosted candidate is Usable without a read (no runner group, no self-hosted policy).
        """
        if candidate.hosted:
            return Usable("a GitHub-hosted runner: no runner group, no self-hosted-runner policy")
        if self._reads is None:
            return NotProven(NOTHING_READ)
        org = self._organisation(self._reads)
        if isinstance(org, NotProven):
            return org
        return self._checked(self._reads, org, candidate)

    def _checked(self, reads: RunnerReads, org: _Org, candidate: Candidate) -> Verdict:
        """The group's checks, then the organisation's policy: the first proven FAIL skips."""
        found = self._group_checks(org, candidate)
        if isinstance(found, Skip):
            return found
        policy = self._policy_check(reads, org)
        if policy.verdict == "FAIL":
            return _skip(policy)
        unsure = found + ([policy] if policy.verdict != "pass" else [])
        if unsure:
            return NotProven("; ".join(f"{c.name}: {c.verdict} ({c.detail})" for c in unsure))
        return Usable(
            f"runner group {candidate.group} exists, grants {self._target.repository} and "
            "admits the child workflow; the organisation's policy enables self-hosted runners"
        )

    def _organisation(self, reads: RunnerReads) -> _Org | NotProven:
        """The repository read once: its organisation and privacy, or why nothing is proven."""
        if self._org is None:
            self._org = self._read_organisation(reads)
        return self._org

    def _read_organisation(self, reads: RunnerReads) -> _Org | NotProven:
        repository = self._target.repository
        try:
            info = reads.repository()
        except NotFound:  # the token may read the organisation's groups and not see us
            return _Org(GroupReads(reads, repository.split("/", 1)[0]), None)
        except RQFError as exc:
            return NotProven(why_not(exc, NEEDS_GROUPS))
        if info.owner.type != "Organization":
            return NotProven("a repository owned by a user has no organisation runner groups")
        return _Org(GroupReads(reads, info.owner.login), info.private)

    def _group_checks(self, org: _Org, candidate: Candidate) -> Skip | list[GroupCheck]:
        """The group's checks that did not pass, or the Skip one of them proves."""
        name = candidate.group
        if not name:
            why = (
                "without a group, any runner with its labels that the repository may use could "
                "take the job; only the organisation's policy is checked"
            )
            return [
                GroupCheck(f"runners with {candidate.label_text} (no group)", "not proven", why)
            ]
        try:
            groups = org.memo.groups()
        except RQFError as exc:
            why = why_not(exc, NEEDS_GROUPS)
            return [GroupCheck(f"runner group {name}", "not checked", why)]
        group = next((g for g in groups if g.name.casefold() == name.casefold()), None)
        if group is None:
            return _skip(group_missing(f"runner group {name}", org.memo.org, groups))
        checks = [
            grants_check(org.memo, group, self._target.repository, private=org.private),
            admits_check(group, self._target),
        ]
        failed = next((c for c in checks if c.verdict == "FAIL"), None)
        if failed is not None:
            return _skip(failed)
        return [c for c in checks if c.verdict != "pass"]

    def _policy_check(self, reads: RunnerReads, org: _Org) -> GroupCheck:
        if self._policy is None:
            self._policy = policy_check(reads, org.memo.org, self._target.repository)
        return self._policy


def skipped_entry(candidate: Candidate, skip: Skip) -> dict[str, object]:
    """A skipped candidate's `attempts-json` entry: a dispatch entry's keys, nothing dispatched.

    `"outcome": "skipped"`, `"skip-reason"` and `"fix"`; `"attempt"`, `"run-id"`, `"run-url"` and
    `"queued-seconds"` are null (the `attempts` output counts dispatches only).
    """
    runner = candidate.runner()
    return {
        "attempt": None,
        "group": runner.get("group"),
        "labels": runner.get("labels"),
        "hosted": candidate.hosted,
        "queue-timeout-minutes": candidate.queue_minutes,
        "run-id": None,
        "run-url": None,
        "queued-seconds": None,
        "outcome": SKIPPED,
        "skip-reason": skip.reason,
        "fix": skip.fix,
    }


def no_pool_error(skipped: Sequence[tuple[Candidate, Skip]]) -> NoPool:
    """The error that ends a sequence whose every candidate was skipped: each reason and fix."""
    parts = [
        f"candidate {number} ({candidate.pool_text}): {skip.reason}; fix: {skip.fix}"
        for number, (candidate, skip) in enumerate(skipped, start=1)
    ]
    return NoPool(
        f"no candidate pool can serve this workflow, so none was dispatched: {'; '.join(parts)}"
    )
