"""The verdict before a dispatch: a pool proven unable to serve this workflow is skipped.

Every skip reason, every kind of non-proof, and the cost: each read at most once per sequence,
only with the runners token, only GETs (action/pool_access.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner_queue_fallback.action.attempts import Attempt, Result
from runner_queue_fallback.action.pool_access import (
    NOTHING_READ,
    SKIP_REASONS,
    NotProven,
    PoolAccess,
    Skip,
    Usable,
    Verdict,
    no_pool_error,
    skipped_entry,
)
from runner_queue_fallback.action.summary import attempts_json
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.errors import NoPool
from runner_queue_fallback.core.outcome import NO_POOL, OUTCOMES, title
from runner_queue_fallback.core.profiles import Candidate
from runner_queue_fallback.fake_github.faults import Fault, FaultPlan
from runner_queue_fallback.fake_github.runner_groups import OrgRunners
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.github.client import GitHubClient

REPO = "octo-org/octo-repo"
CHILD = f"{REPO}/.github/workflows/runner-worker.yml@refs/heads/main"
OTHER = f"{REPO}/.github/workflows/nightly.yml@refs/heads/main"
MAIN_TOKEN = "ghs_maintoken0123456789abcdef0123456789"
RUNNERS_TOKEN = "ghs_runnersreadonly0123456789abcdef"
EXPIRED = "ghs_expired0123456789abcdef"
COMMIT = "a" * 40


def pool(group: str = "nv-cpu-general", labels: str = "linux-amd64-cpu16") -> Candidate:
    return Candidate(group, labels, 10)


class Org:
    """A repository in an organisation whose runners token reads its groups and policy."""

    def __init__(self, *, faults: tuple[Fault, ...] = (), **org: Any) -> None:
        self.clock = FakeClock()
        self.github = FakeGitHub(self.clock, faults=FaultPlan(list(faults)))
        self.org = OrgRunners("octo-org", readers={RUNNERS_TOKEN}, expired={EXPIRED}, **org)
        self.github.org_runners = self.org
        self.main = self.client(MAIN_TOKEN)
        self.main.get_commit_sha("refs/heads/main")  # the coordinator's own read, before

    def client(self, token: str) -> GitHubClient:
        return GitHubClient(self.github.session(), self.github.api_url, REPO, token, self.clock)

    def access(self, token: str | None = RUNNERS_TOKEN, commit: str | None = COMMIT) -> PoolAccess:
        reads = None if token is None else self.client(token).runner_reads
        return PoolAccess(
            reads,
            repository=REPO,
            workflow="runner-worker.yml",
            workflow_ref="main",
            commit=commit,
        )

    def requests(self, token: str) -> list[str]:
        """The paths sent with `token`, in order."""
        number = self.github.client_number(token)
        return [e.path for e in self.github.ledger if number is not None and e.client == number]

    def main_unused(self) -> None:
        """The coordinator's token sent its one read and nothing for the verdicts."""
        assert self.requests(MAIN_TOKEN) == [f"/repos/{REPO}/git/ref/heads/main"]
        assert self.main.stats.sent == 1


def _skip(verdict: Verdict, reason: str) -> Skip:
    assert isinstance(verdict, Skip), verdict
    assert verdict.reason == reason
    assert verdict.fix
    assert verdict.fix in verdict.detail
    return verdict


# -- Usable: every access check passes ------------------------------------------------------


def test_a_group_that_admits_the_child_is_usable_after_three_reads_by_the_runners_token():
    """The repository, the group listing, the policy: three GETs with the runners token."""
    world = Org()
    world.org.add_group("nv-cpu-general", restricted_to_workflows=True, selected_workflows=(CHILD,))
    verdict = world.access().verdict(pool())
    assert isinstance(verdict, Usable), verdict
    assert world.requests(RUNNERS_TOKEN) == [
        f"/repos/{REPO}",
        "/orgs/octo-org/actions/runner-groups",
        "/orgs/octo-org/actions/permissions/self-hosted-runners",
    ]
    assert {e.method for e in world.github.ledger} == {"GET"}
    world.main_unused()


def test_the_runner_counts_are_never_read():
    """A group with no runner at all (it scales from zero) is usable: no runner is read."""
    world = Org()
    world.org.add_group("nv-cpu-general")
    assert isinstance(world.access().verdict(pool()), Usable)
    assert not [p for p in world.requests(RUNNERS_TOKEN) if p.endswith("/runners")]


def test_the_group_name_is_compared_ignoring_case():
    world = Org()
    world.org.add_group("NV-CPU-General")
    assert isinstance(world.access().verdict(pool("nv-cpu-general")), Usable)


def test_a_group_on_the_listings_second_page_is_found():
    """The listing is read whole (100 a page): a group past the first page is no skip."""
    world = Org()
    for n in range(100):
        world.org.add_group(f"other-{n:03d}")
    world.org.add_group("nv-cpu-general")
    assert isinstance(world.access().verdict(pool()), Usable)
    pages = [p for p in world.requests(RUNNERS_TOKEN) if p.endswith("/runner-groups")]
    assert len(pages) == 2


def test_a_hosted_candidate_is_usable_without_a_read():
    world = Org(enabled_repositories="none")
    hosted = Candidate("", "ubuntu-24.04", 10, hosted=True)
    assert isinstance(world.access().verdict(hosted), Usable)
    assert world.github.client_number(RUNNERS_TOKEN) is None


# -- Skip: each reason, with its fix ---------------------------------------------------------


def test_a_group_absent_from_the_whole_listing_is_skipped_group_not_found():
    """Judged on the listing (never a 404 alone); the policy is not read once it is proven."""
    world = Org()
    world.org.add_group("nv-cpu-other")
    skip = _skip(world.access().verdict(pool()), "group-not-found")
    assert "nv-cpu-other" in skip.detail
    assert "`group`" in skip.fix
    assert world.requests(RUNNERS_TOKEN) == [
        f"/repos/{REPO}",
        "/orgs/octo-org/actions/runner-groups",
    ]


@pytest.mark.parametrize(
    ("org", "group"),
    [
        pytest.param({}, {"visibility": "selected"}, id="selected-without-it"),
        pytest.param({"private": False}, {}, id="public-not-allowed"),
        pytest.param(
            {"private": False},
            {"visibility": "private", "allows_public_repositories": True},
            id="private-only",
        ),
    ],
)
def test_a_group_that_does_not_grant_the_repository_is_skipped(
    org: dict[str, Any], group: dict[str, Any]
):
    world = Org(**org)
    world.org.add_group("nv-cpu-general", selected_repositories=("octo-org/other",), **group)
    skip = _skip(world.access().verdict(pool()), "repository-not-granted")
    assert skip.fix.startswith(("add octo-org/octo-repo", "allow public repositories"))


def test_a_selected_group_listing_the_repository_grants_it():
    world = Org()
    world.org.add_group("nv-cpu-general", visibility="selected", selected_repositories=(REPO,))
    assert isinstance(world.access().verdict(pool()), Usable)


def test_a_restriction_without_the_child_is_skipped_with_the_entry_it_needs():
    world = Org()
    world.org.add_group("nv-cpu-general", restricted_to_workflows=True, selected_workflows=(OTHER,))
    skip = _skip(world.access().verdict(pool()), "workflow-not-admitted")
    assert f"{REPO}/.github/workflows/runner-worker.yml@main" in skip.fix


def test_a_restriction_naming_the_childs_commit_admits_it():
    world = Org()
    entry = f"{REPO}/.github/workflows/runner-worker.yml@{COMMIT}"
    world.org.add_group("nv-cpu-general", restricted_to_workflows=True, selected_workflows=(entry,))
    assert isinstance(world.access().verdict(pool()), Usable)


@pytest.mark.parametrize(
    "policy",
    [
        pytest.param({"enabled_repositories": "none"}, id="none"),
        pytest.param(
            {"enabled_repositories": "selected", "policy_repositories": ("octo-org/other",)},
            id="selected-without-it",
        ),
    ],
)
def test_a_policy_that_does_not_enable_the_repository_is_skipped_policy_off(
    policy: dict[str, Any],
):
    """Every self-hosted candidate, with a group or without."""
    world = Org(**policy)
    world.org.add_group("nv-cpu-general")
    access = world.access()
    skip = _skip(access.verdict(pool()), "policy-off")
    assert "Actions policies" in skip.fix
    _skip(access.verdict(Candidate("", "linux-amd64-cpu8", 10)), "policy-off")


def test_the_first_proven_reason_in_the_listed_order_is_given():
    """A group that neither grants nor admits, under a policy that is off: not granted."""
    world = Org(enabled_repositories="none")
    world.org.add_group(
        "nv-cpu-general",
        visibility="selected",
        restricted_to_workflows=True,
        selected_workflows=(OTHER,),
    )
    _skip(world.access().verdict(pool()), "repository-not-granted")
    assert SKIP_REASONS == (
        "group-not-found",
        "repository-not-granted",
        "workflow-not-admitted",
        "policy-off",
    )


def test_a_proven_failure_skips_even_when_another_check_is_not_proven():
    """The policy unreadable (403) does not hide a restriction proven not to admit the child."""
    world = Org(policy_readers=set())
    world.org.add_group("nv-cpu-general", restricted_to_workflows=True, selected_workflows=(OTHER,))
    _skip(world.access().verdict(pool()), "workflow-not-admitted")


# -- NotProven: anything short of proof dispatches as before ----------------------------------


def _not_proven(verdict: Verdict, *words: str) -> None:
    assert isinstance(verdict, NotProven), verdict
    for word in words:
        assert word in verdict.why, verdict.why


def test_without_a_runners_token_nothing_is_read_and_nothing_proven():
    world = Org(enabled_repositories="none")
    access = world.access(token=None)
    assert not access.enabled
    _not_proven(access.verdict(pool()), NOTHING_READ)
    assert [e.client for e in world.github.ledger] == [world.github.client_number(MAIN_TOKEN)]


def test_a_token_without_the_permission_403_is_not_proven_and_names_it():
    world = Org()
    world.org.readers.clear()
    world.org.add_group("nv-cpu-other")  # a group-not-found the token cannot see
    _not_proven(world.access().verdict(pool()), "403", "Self-hosted runners")


def test_an_expired_token_401_is_not_proven_and_reads_nothing_more():
    """The first read is refused; no later candidate sends another."""
    world = Org(enabled_repositories="none")
    access = world.access(token=EXPIRED)
    _not_proven(access.verdict(pool()), "401")
    _not_proven(access.verdict(pool("nv-gpu")), "401")
    assert world.requests(EXPIRED) == [f"/repos/{REPO}"]


def test_a_failed_read_is_not_proven_and_not_repeated_for_the_next_candidate():
    """The group listing answers 502 every time: not proven; its retries, then no more."""
    fault = Fault(kind="status", status=502, path=r"/runner-groups$")
    world = Org(faults=(fault,))
    world.org.add_group("nv-cpu-other")
    access = world.access()
    _not_proven(access.verdict(pool()), "not checked", "502")
    listing = len([p for p in world.requests(RUNNERS_TOKEN) if p.endswith("/runner-groups")])
    _not_proven(access.verdict(pool("nv-gpu")))
    again = len([p for p in world.requests(RUNNERS_TOKEN) if p.endswith("/runner-groups")])
    assert again == listing >= 1


def test_a_server_without_the_policy_endpoints_404_is_not_proven():
    world = Org(serves_policy=False)
    world.org.add_group("nv-cpu-general")
    _not_proven(world.access().verdict(pool()), "self-hosted runner policy", "404")


def test_a_restriction_of_a_form_not_compared_exactly_is_not_proven():
    world = Org()
    wildcard = f"{REPO}/.github/workflows/*@*"
    world.org.add_group(
        "nv-cpu-general", restricted_to_workflows=True, selected_workflows=(wildcard,)
    )
    _not_proven(world.access().verdict(pool()), "admits the child workflow")


def test_a_sha_entry_without_the_childs_commit_known_is_not_proven():
    world = Org()
    entry = f"{REPO}/.github/workflows/runner-worker.yml@{'b' * 40}"
    world.org.add_group("nv-cpu-general", restricted_to_workflows=True, selected_workflows=(entry,))
    _not_proven(world.access(commit=None).verdict(pool()))


def test_a_repository_hidden_from_the_token_leaves_its_privacy_not_proven():
    """404 on the repository: the groups are still read; `private` visibility is not proven."""
    world = Org(repository_readers=set())
    world.org.add_group("nv-cpu-general", visibility="private")
    _not_proven(world.access().verdict(pool()), "could not read whether the repository")


def test_a_users_repository_is_not_proven_and_reads_no_organisation():
    world = Org(owner_type="User")
    _not_proven(world.access().verdict(pool()), "owned by a user")
    assert not [p for p in world.requests(RUNNERS_TOKEN) if p.startswith("/orgs/")]


def test_a_candidate_without_a_group_is_not_proven_unless_the_policy_is_off():
    world = Org()
    _not_proven(world.access().verdict(Candidate("", "linux-amd64-cpu8", 10)), "no group")


# -- cost: once per sequence, the runners token only -------------------------------------------


def test_each_read_is_made_once_per_sequence_however_often_candidates_ask():
    """Two groups (one `selected`), three candidates, each asked twice: every read once."""
    world = Org(enabled_repositories="selected", policy_repositories=(REPO,))
    world.org.add_group("nv-cpu-general", visibility="selected", selected_repositories=(REPO,))
    world.org.add_group("nv-gpu", visibility="selected", selected_repositories=(REPO,))
    access = world.access()
    candidates = [pool(), pool(labels="linux-amd64-cpu8"), pool("nv-gpu", "linux-amd64-gpu")]
    verdicts = [access.verdict(c) for c in candidates + candidates]
    assert all(isinstance(v, Usable) for v in verdicts), verdicts
    paths = world.requests(RUNNERS_TOKEN)
    assert sorted(paths) == sorted(
        [
            f"/repos/{REPO}",
            "/orgs/octo-org/actions/runner-groups",
            "/orgs/octo-org/actions/runner-groups/2/repositories",
            "/orgs/octo-org/actions/runner-groups/3/repositories",
            "/orgs/octo-org/actions/permissions/self-hosted-runners",
            "/orgs/octo-org/actions/permissions/self-hosted-runners/repositories",
        ]
    )
    world.main_unused()


def test_the_reads_spend_the_runners_tokens_quota_not_the_repositorys():
    """A user's token (its own bucket): the repository's bucket counts the coordinator's one read."""
    world = Org(enabled_repositories="selected", policy_repositories=(REPO,))
    world.github.add_user_token(RUNNERS_TOKEN, "runners-reader")
    world.org.add_group("nv-cpu-general", visibility="selected", selected_repositories=(REPO,))
    assert isinstance(world.access().verdict(pool()), Usable)
    assert world.github.quota_used() == 1
    assert world.github.quota_used("user:runners-reader") == len(world.requests(RUNNERS_TOKEN)) == 5


def test_a_new_sequence_reads_again():
    """The reads belong to one sequence: a group fixed since is seen by the next one."""
    world = Org()
    group = world.org.add_group(
        "nv-cpu-general", restricted_to_workflows=True, selected_workflows=(OTHER,)
    )
    _skip(world.access().verdict(pool()), "workflow-not-admitted")
    group.selected_workflows = (CHILD,)
    assert isinstance(world.access().verdict(pool()), Usable)


def test_the_runners_token_is_only_ever_sent_with_gets():
    world = Org(enabled_repositories="selected", policy_repositories=(REPO,))
    world.org.add_group("nv-cpu-general", visibility="selected", restricted_to_workflows=True)
    access = world.access()
    access.verdict(pool())
    access.verdict(Candidate("", "x", 10))
    number = world.github.client_number(RUNNERS_TOKEN)
    assert {e.method for e in world.github.ledger if e.client == number} == {"GET"}


# -- what the lead plugs into the sequence: the entry, the error, the word ------------------------


def test_a_skipped_entry_has_a_dispatch_entrys_keys_nothing_dispatched():
    candidate = pool()
    skip = Skip("workflow-not-admitted", "add the entry X", "runner group nv-cpu-general: ...")
    entry = skipped_entry(candidate, skip)
    assert entry == {
        "attempt": None,
        "group": "nv-cpu-general",
        "labels": "linux-amd64-cpu16",
        "hosted": False,
        "queue-timeout-minutes": 10,
        "run-id": None,
        "run-url": None,
        "queued-seconds": None,
        "outcome": "skipped",
        "skip-reason": "workflow-not-admitted",
        "fix": "add the entry X",
    }
    sent = Attempt(1, candidate, run_id=7, dispatched_at=0.0, outcome="run success")
    [dispatched] = json.loads(attempts_json(Result(attempts=[sent])))
    assert set(dispatched) <= set(entry)
    assert json.loads(json.dumps(entry)) == entry


def test_every_candidate_skipped_is_one_no_pool_error_naming_each_reason_and_fix():
    skipped = [
        (pool(), Skip("group-not-found", "create it", "d1")),
        (pool("nv-gpu", "gpu"), Skip("policy-off", "allow it", "d2")),
    ]
    error = no_pool_error(skipped)
    assert isinstance(error, NoPool)
    text = str(error)
    assert (
        "candidate 1 (nv-cpu-general / linux-amd64-cpu16): group-not-found; fix: create it" in text
    )
    assert "candidate 2 (nv-gpu / gpu): policy-off; fix: allow it" in text
    assert NO_POOL in OUTCOMES
    assert title(NO_POOL, error) == "no-pool: no pool can serve this workflow"
