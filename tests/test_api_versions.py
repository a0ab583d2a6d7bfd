"""GitHubClient and the API version: detection on the first reply, 204 dispatches, the run-name search."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import requests
import responses
from responses import registries

from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.errors import DispatchAmbiguous, GitHubAPIError
from runner_queue_fallback.fake_github.model import fake_token
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.github.versions import ApiVersionRefused, refuses_version
from tests import github_payloads as payloads

TOKEN = fake_token("versionTestToken")
API = payloads.API
REPO = f"/repos/{payloads.REPOSITORY}"
RUN_URL = f"{API}{REPO}/actions/runs/42"
RUNS_URL = f"{API}{REPO}/actions/workflows/runner-worker.yml/runs"
DISPATCH_URL = f"{API}{REPO}/actions/workflows/runner-worker.yml/dispatches"
SINCE = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def mocked() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(
        assert_all_requests_are_fired=True, registry=registries.OrderedRegistry
    ) as mock:
        yield mock


def make_client(version: str, logs: list[str]) -> GitHubClient:
    return GitHubClient(
        requests.Session(),
        API,
        payloads.REPOSITORY,
        TOKEN,
        FakeClock(),
        log=logs.append,
        api_version=version,
    )


def versions(mocked: responses.RequestsMock) -> list[str | None]:
    return [call.request.headers.get("X-GitHub-Api-Version") for call in mocked.calls]


def refusal(message: str) -> dict[str, object]:
    return {"status": 400, "json": {"message": message, "documentation_url": "https://x.test"}}


@pytest.mark.parametrize(
    "message",
    [
        "API version '2026-03-10' is not a supported version.",  # github.com
        "Unsupported API Version: 2026-03-10",  # a wording GitHub Enterprise Server might use
        "Invalid X-GitHub-Api-Version header 2026-03-10",
    ],
)
def test_auto_moves_to_2022_11_28_when_the_first_reply_refuses_the_version(mocked, message):
    """The first 400 that mentions the version: the same read again as 2022-11-28, logged once."""
    logs: list[str] = []
    client = make_client("auto", logs)
    mocked.get(RUN_URL, **refusal(message))
    mocked.get(RUN_URL, json=payloads.workflow_run())
    mocked.get(RUN_URL, json=payloads.workflow_run())
    assert client.get_run(42).id == 42
    assert client.get_run(42).id == 42
    assert versions(mocked) == ["2026-03-10", "2022-11-28", "2022-11-28"]
    assert client.version == "2022-11-28"
    assert client.older_contract
    assert len(logs) == 1
    assert message in logs[0]  # the server's own words are logged


def test_auto_keeps_2026_03_10_when_the_first_reply_accepts_it(mocked):
    """A first reply that is not a version refusal settles 2026-03-10; a later 400 is an error."""
    client = make_client("auto", [])
    mocked.get(RUN_URL, json=payloads.workflow_run())
    mocked.get(RUN_URL, **refusal("Problems parsing JSON"))
    client.get_run(42)
    with pytest.raises(GitHubAPIError) as caught:
        client.get_run(42)
    assert not isinstance(caught.value, ApiVersionRefused)
    assert versions(mocked) == ["2026-03-10", "2026-03-10"]


def test_a_400_that_does_not_mention_the_version_does_not_move_auto(mocked):
    """A first-reply 400 for another reason is that error, and the version stays 2026-03-10."""
    client = make_client("auto", [])
    mocked.get(RUN_URL, **refusal("Problems parsing JSON"))
    with pytest.raises(GitHubAPIError):
        client.get_run(42)
    assert client.version == "2026-03-10"
    assert len(mocked.calls) == 1


def test_a_pinned_version_refused_is_an_error_naming_the_input(mocked):
    """api-version: 2026-03-10 on a server without it: one request, and the fix in the message."""
    client = make_client("2026-03-10", [])
    mocked.get(RUN_URL, **refusal("API version '2026-03-10' is not a supported version."))
    with pytest.raises(ApiVersionRefused) as caught:
        client.get_run(42)
    text = str(caught.value)
    assert "input 'api-version'" in text
    assert "auto" in text
    assert "2022-11-28" in text
    assert len(mocked.calls) == 1


def test_the_first_request_being_a_dispatch_is_settled_by_a_read_first(mocked):
    """The dispatch POST is never the probe: a list read settles the version, then one POST."""
    client = make_client("auto", [])
    mocked.get(RUNS_URL, **refusal("API version '2026-03-10' is not a supported version."))
    mocked.get(RUNS_URL, json={"total_count": 0, "workflow_runs": []})
    mocked.post(DISPATCH_URL, status=204)
    assert client.dispatch_workflow("runner-worker.yml", "main", {"request-id": "r"}) is None
    assert [call.request.method for call in mocked.calls] == ["GET", "GET", "POST"]
    assert versions(mocked) == ["2026-03-10", "2022-11-28", "2022-11-28"]


def test_a_204_dispatch_under_auto_moves_to_2022_11_28(mocked):
    """A server that ignores the header answers the dispatch 204: accepted, run unknown."""
    logs: list[str] = []
    client = make_client("auto", logs)
    mocked.get(RUN_URL, json=payloads.workflow_run())
    mocked.post(DISPATCH_URL, status=204)
    mocked.get(RUN_URL, json=payloads.workflow_run())
    client.get_run(42)
    assert client.dispatch_workflow("runner-worker.yml", "main", {}) is None
    client.get_run(42)
    assert versions(mocked) == ["2026-03-10", "2026-03-10", "2022-11-28"]
    assert [line for line in logs if "204 No Content" in line]


def test_a_204_dispatch_with_2026_03_10_pinned_is_ambiguous_and_names_the_input(mocked):
    """Pinned 2026-03-10 and a 204: a run may exist (recovered by run-name), never re-sent."""
    client = make_client("2026-03-10", [])
    mocked.post(DISPATCH_URL, status=204)
    with pytest.raises(DispatchAmbiguous) as caught:
        client.dispatch_workflow("runner-worker.yml", "main", {})
    assert "input 'api-version'" in str(caught.value)
    assert len(mocked.calls) == 1


def test_2022_11_28_sends_no_run_details_field_and_takes_204(mocked):
    """On the older contract the body is {ref, inputs} only (older servers refuse extra fields)."""
    client = make_client("2022-11-28", [])
    mocked.post(DISPATCH_URL, status=204)
    assert client.dispatch_workflow("runner-worker.yml", "main", {"a": "b"}) is None
    body = json.loads(mocked.calls[0].request.body or b"{}")
    assert body == {"ref": "main", "inputs": {"a": "b"}}
    assert versions(mocked) == ["2022-11-28"]


def _page(titles: list[str], first_id: int) -> dict[str, object]:
    runs = [payloads.workflow_run(first_id + n, display_title=t) for n, t in enumerate(titles)]
    return {"total_count": 250, "workflow_runs": runs}


def test_the_run_name_search_follows_pages_on_the_api_host(mocked):
    """The run named on page 3 is found: pages follow `Link: rel="next"` and stop at a match."""
    client = make_client("2022-11-28", [])
    page2 = f"{RUNS_URL}?page=2"
    page3 = f"{RUNS_URL}?page=3"
    mocked.get(RUNS_URL, json=_page(["other"] * 100, 1), headers={"Link": f'<{page2}>; rel="next"'})
    mocked.get(page2, json=_page(["other"] * 100, 101), headers={"Link": f'<{page3}>; rel="next"'})
    mocked.get(page3, json=_page(["other", "rqf-wanted"], 201))
    runs = client.find_runs_by_name("runner-worker.yml", "rqf-wanted", created_after=SINCE)
    assert [run.id for run in runs] == [202]
    assert len(mocked.calls) == 3
    first = mocked.calls[0].request.url or ""
    assert "event=workflow_dispatch" in first
    assert (
        "created=%3E%3D2026-11-02T09:00:00Z" in first or "created=>=2026-11-02T09:00:00Z" in first
    )


def test_the_run_name_search_matches_the_name_exactly(mocked):
    """A run whose title only contains the request id is not the child."""
    client = make_client("2022-11-28", [])
    mocked.get(RUNS_URL, json=_page(["rqf-wanted-2", "x rqf-wanted", "RQF-WANTED"], 1))
    assert client.find_runs_by_name("runner-worker.yml", "rqf-wanted", created_after=SINCE) == []


def test_refuses_version_only_for_a_400_that_mentions_it():
    """The match the detection uses: status 400 and the word 'version' or the date."""
    assert refuses_version(400, "API version '2026-03-10' is not a supported version.", "x")
    assert refuses_version(400, "bad header 2026-03-10", "2026-03-10")
    assert not refuses_version(400, "Problems parsing JSON", "2026-03-10")
    assert not refuses_version(422, "version mismatch", "2026-03-10")
