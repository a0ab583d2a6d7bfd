"""One handler, three doors: a requests adapter, responses callbacks and a loopback HTTP server."""

from __future__ import annotations

import re

import pytest
import requests
import responses
from githubkit import GitHub
from githubkit.exception import RequestError, RequestFailed

from runner_queue_fallback import cli
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github import Fault, FaultPlan
from runner_queue_fallback.fake_github.transport import DirectSession
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.simulate.steps import run_coordinator, standard_world
from tests.test_fuzz_coordinator import base_inputs
from tests.test_sim_support import AUTH, REPO, advance_to, child_inputs, make_world

OWNER, NAME = "octo-org", "octo-repo"
NONCE = re.compile(r"(rqf-[\w-]+-)[0-9a-f]{8}\b")


def test_githubkit_drives_the_loopback_server():
    """An independent real client: dispatch, get run, list jobs, cancel, 409."""
    clock = FakeClock()
    world = make_world(clock)
    with world.serve() as url, GitHub("t", base_url=f"{url}/", auto_retry=False) as gh:
        dispatched = gh.rest.actions.create_workflow_dispatch(
            OWNER, NAME, "runner-worker.yml", data={"ref": "main", "inputs": child_inputs("gk-1")}
        ).parsed_data
        run_id = dispatched.workflow_run_id
        with pytest.raises(RequestFailed) as missing:
            gh.rest.actions.get_workflow_run(OWNER, NAME, run_id)
        assert missing.value.response.status_code == 404
        advance_to(clock, 6.0)
        run = gh.rest.actions.get_workflow_run(OWNER, NAME, run_id).parsed_data
        assert (run.display_title, run.status) == ("gk-1", "in_progress")
        jobs = gh.rest.actions.list_jobs_for_workflow_run(OWNER, NAME, run_id).parsed_data
        assert [j.name for j in jobs.jobs] == ["worker"]
        assert jobs.jobs[0].runner_name == "linux-amd64-cpu16-001"
        attempt = gh.rest.actions.get_workflow_run_attempt(OWNER, NAME, run_id, 1).parsed_data
        assert attempt.run_attempt == 1
        assert gh.rest.actions.cancel_workflow_run(OWNER, NAME, run_id).status_code == 202
        advance_to(clock, 20.0)
        done = gh.rest.actions.get_workflow_run(OWNER, NAME, run_id).parsed_data
        assert (done.status, done.conclusion) == ("completed", "cancelled")
        with pytest.raises(RequestFailed) as conflict:
            gh.rest.actions.cancel_workflow_run(OWNER, NAME, run_id)
        assert conflict.value.response.status_code == 409
    assert {e.client for e in world.ledger} == {0}


def test_loopback_drops_the_connection_for_no_reply_faults():
    world = make_world(faults=FaultPlan([Fault("timeout", count=1)]))
    with world.serve() as url, GitHub("t", base_url=f"{url}/", auto_retry=False) as gh:
        with pytest.raises(RequestError):  # githubkit's transport error: no HTTP reply at all
            gh.rest.actions.get_workflow_run(OWNER, NAME, 4242)
        assert gh.rest.actions.get_workflow_run(OWNER, NAME, 4242).parsed_data.id == 4242


def test_requests_session_is_served_in_process():
    world = make_world()
    session = world.session()
    reply = session.get(f"https://api.github.test{REPO}/actions/runs/4242", headers=AUTH, timeout=5)
    assert reply.status_code == 200
    assert reply.reason == "OK"
    assert reply.json()["id"] == 4242
    assert reply.headers["x-ratelimit-remaining"] == "999"
    with pytest.raises(requests.exceptions.ConnectionError):  # only the API root is faked
        session.get("https://elsewhere.invalid/", timeout=5)


def test_api_url_with_a_path_prefix():
    world = make_world(api_url="https://ghes.test/api/v3")
    reply = world.session().get(
        f"https://ghes.test/api/v3{REPO}/actions/runs/4242", headers=AUTH, timeout=5
    )
    assert reply.json()["url"] == f"https://ghes.test/api/v3{REPO}/actions/runs/4242"


def test_responses_callbacks_share_the_same_handler():
    world = make_world(faults=FaultPlan([Fault("timeout", path="/jobs$", count=1)]))
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        world.register(rsps)
        base = f"https://api.github.test{REPO}"
        reply = requests.post(
            f"{base}/actions/workflows/runner-worker.yml/dispatches",
            json={"ref": "main", "inputs": child_inputs()},
            headers=AUTH,
            timeout=5,
        )
        assert reply.status_code == 200
        assert reply.headers["Content-Type"] == "application/json; charset=utf-8"
        with pytest.raises(requests.exceptions.ReadTimeout):
            requests.get(f"{base}/actions/runs/4242/jobs", headers=AUTH, timeout=5)
        assert requests.get(f"{base}/nope", headers=AUTH, timeout=5).status_code == 404
    assert [e.status for e in world.ledger] == [200, None, 404]


@pytest.mark.parametrize(
    "faults",
    [(), (Fault("timeout", count=2), Fault("status", status=502, count=2, path=r"/jobs$"))],
    ids=["nominal", "faults"],
)
def test_the_direct_session_serves_a_run_exactly_as_requests_does(faults):
    """The fuzzers' shortcut past requests' preparation changes nothing the coordinator sees."""

    def run(*, direct: bool) -> tuple[str, ...]:
        clock = FakeClock()
        world = FakeGitHub(clock, faults=FaultPlan(list(faults)), direct=direct)
        world, sha = standard_world(clock, world)
        world.add_pool("nv-cpu-general", "linux-amd64-cpu16", busy=[(0.0, 10.0**9)])
        world.add_pool("nv-cpu-general", "linux-amd64-cpu8")
        inputs = base_inputs({"source-sha": sha, "queue-timeout-minutes": "1"})
        result = run_coordinator(world, clock, inputs, main=cli.main)
        ledger = "\n".join(f"{e.time} {e.method} {e.path} {e.status}" for e in world.ledger)
        # Request ids end in a random nonce, different in any two runs.
        return tuple(NONCE.sub("<nonce>", text) for text in (result.log, result.post_log, ledger))

    through_requests = run(direct=False)
    assert "linux-amd64-cpu8" in through_requests[0]  # the run fell back, so it went far enough
    assert run(direct=True) == through_requests


def test_the_direct_session_refuses_what_it_does_not_implement():
    session = DirectSession(make_world())
    with pytest.raises(TypeError, match="params"):
        session.request("GET", f"https://api.github.test{REPO}/actions/runs", params={"a": "1"})
