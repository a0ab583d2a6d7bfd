"""The coordinator and its post step on a GitHub App's credentials, run through `cli.main`.

With `app-id` and `app-private-key` every request of the main step goes out with the App's
installation token, minted for this repository and renewed before it expires, so a sequence of
hours dispatches and cancels long after the first token lapsed; a dispatch GitHub answered 401
goes once more with a fresh token and makes one child; the post step mints its own; the child's
guard keeps the child's GITHUB_TOKEN and passes for a run whose actor is the App's bot; and
neither the key nor a token is ever printed, output or saved.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner_queue_fallback.cli import main
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.errors import AppTokenUnavailable, NotFound
from runner_queue_fallback.fake_github.apps import AppKeys, FakeInstallation, generate_app_keys
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import WORKER_TOKEN, Timings, Workload
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.github.app_token import AppCredentials, AppTokenSource
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.github.runs import Runs
from runner_queue_fallback.tools.simulate.steps import SimulationRun, guard_hook
from tests.invariants import children
from tests.scenario import CPU8, CPU16, FOREVER, minute_queues
from tests.test_post_step import busy_world, post_step
from tests.test_sim_support import child_inputs

if TYPE_CHECKING:
    import pytest

APP_ID = 31337
BOT = "rqf-coordinator[bot]"
DISPATCHES = "/dispatches"


@cache
def keys() -> AppKeys:
    return generate_app_keys()


def with_app(world: FakeGitHub, **install: object) -> FakeInstallation:
    app = world.add_app(APP_ID, keys().public_pem)
    return world.install_app(app, **install)  # type: ignore[arg-type]  # the test's own options


def app_inputs(installation: str = "") -> dict[str, str]:
    inputs = {"app-id": str(APP_ID), "app-private-key": keys().private_pem}
    return inputs | ({"app-installation-id": installation} if installation else {})


def minted(world: FakeGitHub) -> list[str]:
    assert world.apps is not None
    return list(world.apps.tokens)


def mint_times(world: FakeGitHub) -> list[float]:
    return [e.time for e in world.ledger if e.path.endswith("/access_tokens") and e.status == 201]


def secrets_of(world: FakeGitHub) -> list[str]:
    """The key as given, each line of its body, and every token the fake minted."""
    lines = [line for line in keys().private_pem.splitlines() if "PRIVATE KEY" not in line]
    return [keys().private_pem.strip(), *lines, *minted(world)]


def assert_never_shown(world: FakeGitHub, result: SimulationRun) -> None:
    """Neither the key nor a token in the log (but its mask), summary, outputs or state."""
    logs = "\n".join(
        line
        for line in (result.log + result.post_log).splitlines()
        if not line.startswith("::add-mask::")
    )
    shown = [logs, result.summary, *result.outputs.values(), *result.state.keys()]
    shown += result.state.values()
    for secret in secrets_of(world):
        assert all(secret not in text for text in shown)
    # Each token was masked before any line could show it.
    masks = {line.removeprefix("::add-mask::") for line in result.log.splitlines()}
    assert {token for token in minted(world) if world.client_number(token) is not None} <= (
        masks | {line.removeprefix("::add-mask::") for line in result.post_log.splitlines()}
    )


def test_a_four_hour_sequence_dispatches_and_cancels_long_after_the_first_token_expired():
    # Candidate 1 never gets a runner in its 60 minutes; candidate 2 is dispatched after that
    # and its worker outlives its 170-minute execution timeout: cancelled near the 4th hour.
    s = minute_queues(
        CPU16,
        CPU8,
        execution="170",
        timings=Timings(timeout_minutes=300.0),
        workload=Workload(duration=200 * 60.0),
    )
    s.inputs["queue-timeout-minutes"] = "60"
    s.inputs["runners"] = s.inputs["runners"].replace(
        '"labels"', '"queue-timeout-minutes": 60, "labels"'
    )
    s.pools(FOREVER, [], labels=[CPU16, CPU8])
    installation = with_app(s.world)
    guards: list[str] = []
    s.world.on_worker_start = guard_hook(s.world, s.clock, guards, main=main)
    result = s.run(app_inputs())
    kids = children(s.world)
    assert len(kids) == 2
    first_token_expired = 3600.0
    second = kids[1]
    assert second.dispatched_at > first_token_expired
    cancels = [e for e in s.world.ledger if e.method == "POST" and e.path.endswith("/cancel")]
    assert cancels
    assert cancels[-1].time > 3 * 3600.0
    assert all(kid.conclusion == "cancelled" for kid in kids)
    assert result.outputs["outcome"] == "failure"  # the worker outlived its execution timeout
    # Every request of the coordinator went out on the installation's quota, none refused.
    ours = [e for e in s.world.ledger if e.bucket == installation.owner]
    dispatches = [e for e in ours if e.path.endswith(DISPATCHES)]
    assert [e.status for e in dispatches] == [200, 200]
    assert cancels[-1].bucket == installation.owner
    assert not [e for e in s.world.ledger if e.status == 401]
    assert len(mint_times(s.world)) >= 4  # one every 55 minutes
    # The guard kept the child's GITHUB_TOKEN (the repository's quota) and passed for a run
    # whose actor is the App's bot.
    guard = {e.client for e in s.world.ledger if e.bucket == "repository"}
    assert guard == {s.world.client_number(WORKER_TOKEN)}
    assert second.guard_passed is True
    run = s.world.render.run(s.world.runs[second.run_id])
    assert run["actor"]["login"] == run["triggering_actor"]["login"] == BOT
    assert run["actor"]["type"] == "Bot"
    assert "every request of the coordinator goes out with the App's installation token" in (
        result.log
    )
    assert_never_shown(s.world, result)


def test_a_dispatch_answered_401_is_sent_once_more_with_a_fresh_token_and_makes_one_child():
    s = minute_queues(CPU16).pools([], labels=[CPU16])
    installation = with_app(s.world)
    s.world.inject(Fault(kind="unauthorized", method="POST", path=r"/dispatches$", count=1))
    result = s.run(app_inputs(str(installation.id)))  # the invariants count the 401 apart
    assert result.exit_code == 0
    dispatches = [e for e in s.world.ledger if e.path.endswith(DISPATCHES)]
    assert [e.status for e in dispatches] == [401, 200]
    assert dispatches[0].client != dispatches[1].client  # a token minted anew
    assert len(children(s.world)) == 1
    assert result.outputs["attempts"] == "1"
    assert json.loads(result.outputs["attempts-json"])[0]["outcome"] != "refused"
    assert "the dispatch is sent once more with a fresh token" in result.log
    assert_never_shown(s.world, result)


def test_a_second_401_to_the_dispatch_is_final_and_nothing_is_left():
    s = minute_queues(CPU16).pools([], labels=[CPU16])
    with_app(s.world)
    s.world.inject(Fault(kind="unauthorized", method="POST", path=r"/dispatches$", count=2))
    result = s.run(app_inputs())
    assert result.exit_code == 1
    assert [e.status for e in s.world.ledger if e.path.endswith(DISPATCHES)] == [401, 401]
    assert children(s.world) == []
    assert result.outputs["attempts"] == "0"


def test_a_static_token_answered_401_is_never_sent_again():
    s = minute_queues(CPU16).pools([], labels=[CPU16])
    s.world.inject(Fault(kind="unauthorized", method="POST", path=r"/dispatches$", count=1))
    result = s.run()
    assert result.exit_code == 1
    assert [e.status for e in s.world.ledger if e.path.endswith(DISPATCHES)] == [401]
    assert children(s.world) == []


def test_a_mint_refused_by_the_secondary_limit_before_any_child_is_an_admission_wait():
    """A fleet starting together: the first mint meets the secondary limit past its retries.
    No child exists, so admission waits (GitHub's minute plus a spread) and the mint goes again."""
    s = minute_queues(CPU16).pools([], labels=[CPU16])
    with_app(s.world)
    s.world.inject(
        Fault(kind="secondary_rate_limit", method="POST", path=r"/access_tokens$", end=150.0)
    )
    result = s.run(app_inputs())
    assert result.exit_code == 0, result.log
    mints = [e.status for e in s.world.ledger if e.path.endswith("/access_tokens")]
    assert mints[0] == 403
    assert 201 in mints
    assert "::warning title=Waiting for GitHub's secondary rate limit::" in result.log
    [dispatch] = [e for e in s.world.ledger if e.path.endswith(DISPATCHES)]
    assert dispatch.status == 200
    assert dispatch.time > 150.0
    assert len(children(s.world)) == 1
    assert_never_shown(s.world, result)


def test_a_dispatch_401_whose_fresh_token_meets_the_secondary_limit_goes_after_the_wait():
    """The 401 created nothing; the fresh token could not be minted (a rate limit): admission
    waits, then the whole check before the dispatch and the dispatch run again."""
    s = minute_queues(CPU16, timings=Timings(latency=0.25)).pools([], labels=[CPU16])
    with_app(s.world)
    s.world.inject(Fault(kind="unauthorized", method="POST", path=r"/dispatches$", count=1))
    after_the_first_mint = 1.0
    s.world.inject(
        Fault(
            kind="secondary_rate_limit",
            method="POST",
            path=r"/access_tokens$",
            start=after_the_first_mint,
            end=200.0,
        )
    )
    result = s.run(app_inputs())
    assert result.exit_code == 0, result.log
    assert [e.status for e in s.world.ledger if e.path.endswith(DISPATCHES)] == [401, 200]
    assert len(children(s.world)) == 1
    assert result.outputs["attempts"] == "1"
    assert "::warning title=Waiting for GitHub's secondary rate limit::" in result.log


def test_no_token_for_the_dispatch_is_a_refusal_and_the_post_step_looks_for_nothing(
    monkeypatch: pytest.MonkeyPatch,
):
    """The dispatch's token could not be minted: the POST was never sent, so no run can exist
    and the post step has no run-name to list (before, it looked for 2 minutes)."""
    dispatching = False
    real_dispatch, real_token = Runs.dispatch_workflow, AppTokenSource.token

    def dispatch(self: Runs, *args: Any) -> Any:
        nonlocal dispatching
        dispatching = True
        try:
            return real_dispatch(self, *args)
        finally:
            dispatching = False

    def token(self: AppTokenSource) -> str:
        if dispatching:  # the installation is gone by the time of the dispatch
            gone = NotFound("POST", "/app/installations/1/access_tokens", 404, "Not Found")
            raise AppTokenUnavailable(str(APP_ID), "octo-org/octo-repo", 1, gone)
        return real_token(self)

    monkeypatch.setattr(Runs, "dispatch_workflow", dispatch)
    monkeypatch.setattr(AppTokenSource, "token", token)
    s = minute_queues(CPU16).pools([], labels=[CPU16])
    with_app(s.world)
    result = s.run(app_inputs())
    assert result.exit_code == 1
    assert [e for e in s.world.ledger if e.path.endswith(DISPATCHES)] == []
    assert children(s.world) == []
    assert result.outputs["attempts"] == "0"
    assert "no installation token" in result.log.lower() or "installation" in result.log
    assert "run-name" not in result.post_log, result.post_log


def test_the_post_step_mints_its_own_token_and_cancels(tmp_path: Path):
    clock = FakeClock()
    world = busy_world(clock)
    installation = with_app(world)
    # The main step dispatched with the App's token, then died without cleaning up.
    credentials = AppCredentials.read(str(APP_ID), keys().private_pem)
    tokens = AppTokenSource(world.session(), world.api_url, world.repository, credentials, clock)
    main_step = GitHubClient(world.session(), world.api_url, world.repository, tokens, clock)
    reply = main_step.dispatch_workflow(
        "runner-worker.yml", "main", child_inputs("rqf-1", "linux-amd64-cpu8")
    )
    assert reply is not None
    run_id = reply.workflow_run_id
    clock.advance(2 * 3600.0)  # the main step's token expired an hour ago
    state = {"request-id": "rqf-1", "child-run-id": str(run_id), "child-request-id": "rqf-1"}
    environ = {f"INPUT_{k.upper()}": v for k, v in app_inputs().items()}
    code, log = post_step(world, clock, state, tmp_path, extra=environ)
    assert code == 0
    assert f"cleanup confirmed: child run {run_id}" in log
    assert "the post step mints its own installation token" in log
    assert world.history[run_id].conclusion == "cancelled"
    cancel = next(e for e in world.ledger if e.path.endswith(f"/{run_id}/cancel"))
    assert cancel.bucket == installation.owner
    assert cancel.client != world.client_number(minted(world)[0])  # not the main step's token
    assert len(mint_times(world)) == 2
    assert not [e for e in world.ledger if e.status == 401]
    shown = "\n".join(line for line in log.splitlines() if not line.startswith("::add-mask::"))
    shown += (tmp_path / "summary.md").read_text()
    for secret in secrets_of(world):
        assert secret not in shown


def test_app_inputs_that_cannot_be_used_fail_before_any_request_naming_the_input():
    s = minute_queues(CPU16).pools([], labels=[CPU16])
    with_app(s.world)
    result = s.run({"app-id": str(APP_ID), "app-private-key": "-----BEGIN nonsense"})
    assert result.exit_code == 2
    assert "app-private-key" in result.log
    shown = [line for line in result.log.splitlines() if not line.startswith("::add-mask::")]
    assert not [line for line in shown if "nonsense" in line]
    assert s.world.ledger == []
    result = s.run({"app-id": str(APP_ID)}, invariants=False)
    assert result.exit_code == 2
    assert "input 'app-id' needs app-private-key beside it" in result.log
