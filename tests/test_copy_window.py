"""Issue 44, finding 4: the copy check is complete at any fleet size, at a bounded cost.

The guard lists the child workflow's runs to refuse a copy of a live child's inputs. GitHub serves
at most 1,000 runs per `created` query, and the window ran from the parent attempt's start, which
may be hours before the dispatch: past 1,000 runs there the real child was refused. Now the request
id states a time of GitHub's clock (the `Date` of its last reply before the dispatch, less a
minute, never before the attempt started), the guard lists from it, splits a window past 1,000
runs, and stops at `MAX_LISTING_REQUESTS`, naming the count. Every test runs against the stateful
fake GitHub, which caps a filtered listing at 1,000 runs and sends `Date` on every reply.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import jsonschema  # type: ignore[import-untyped]  # no stubs; only validates a document
import pytest
import requests

from runner_queue_fallback import cli
from runner_queue_fallback.action.guard import MAX_LISTING_REQUESTS, ORIGINAL, GuardResult
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.request_id import RequestId, parse
from runner_queue_fallback.fake_github import DispatchRefused, FakeGitHub, Workload
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import OLDER_SERVER
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.tools.simulate.steps import (
    PARENT_RUN_ID,
    guard_hook,
    run_coordinator,
    standard_world,
)
from tests.outside import Tamper, json_body, with_json
from tests.stats_support import history_world, run_stats, slow_first_spec
from tests.test_guard import (
    GROUP,
    LABEL,
    PARENT_ID,
    TOKEN,
    GuardedWorker,
    coordinate,
    dispatch_child,
    guard_environ,
    list_pages,
    make_world,
    refused_at,
    run_guard,
)
from tests.test_older_server import CPU8, inputs
from tests.test_post_step import post_step
from tests.test_sim_support import dispatch as dispatch_to_pool
from tests.test_sim_support import make_world as sim_world

DOCS = Path(__file__).resolve().parent.parent / "docs"
A_MINUTE = timedelta(seconds=60)  # the stated margin
OLDER_FORM = f"rqf-{PARENT_ID}-1-1-abcd0123"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def github_time(world: FakeGitHub, at: float) -> datetime:
    """GitHub's clock at virtual second `at`, as it writes times (whole seconds)."""
    return datetime.fromisoformat(world.render.time(at))


def stating(world: FakeGitHub, at: float, *, less: float = 0.0) -> str:
    """A request id for the parent attempt that states GitHub's time at `at`, less `less` s."""
    stated = github_time(world, at) - timedelta(seconds=less)
    return str(RequestId(PARENT_ID, 1, 1, "abcd0123", not_before=stated))


def crowd(world: FakeGitHub, clock: FakeClock, count: int, per_second: int = 20) -> None:
    """`count` hand dispatches of the child workflow, `per_second` of them each second."""
    for n in range(count):
        dispatch_child(world, request_id=f"by hand {n}")
        clock.advance(1 / per_second)


def guard_of(
    world: FakeGitHub, clock: FakeClock, run_id: int, request_id: str = OLDER_FORM
) -> tuple[GuardResult, list[str]]:
    """Run the guard of child `run_id` dispatched as `request_id`; the list pages it read."""
    before = len(list_pages(world))
    environ = guard_environ(world, run_id, **{"INPUT_REQUEST-ID": request_id})
    return run_guard(world, clock, environ), list_pages(world)[before:]


# -- the guard: past 1,000 runs in the window ----------------------------------------------------


@pytest.mark.parametrize("form", ["stated-time", "older-form"])
def test_a_listing_past_1000_runs_in_the_window_passes_the_real_child_and_refuses_a_copy(
    clock: FakeClock, form: str
):
    """1,200 hand dispatches in the minute before the real child: the window is split.

    Before: 10 pages of 100 showed 1,000 of them, and the real child was refused ("1000 run(s)
    listed, not every run since the parent attempt started"); an id stating a time was no
    request id at all.
    """
    world = make_world(clock)
    clock.advance(120.0)
    crowd(world, clock, 1200)
    request_id = stating(world, world.now(), less=60.0) if form == "stated-time" else OLDER_FORM
    real = dispatch_child(world, request_id)
    clock.advance(2.0)
    copy = dispatch_child(world, request_id)
    clock.advance(2.0)

    result, pages = guard_of(world, clock, real, request_id)
    assert result.passed, result.log_lines()
    assert "earliest of 1 run(s) with this run-name among 1201 listed" in result.checks[4].observed
    assert len(pages) <= MAX_LISTING_REQUESTS
    spans = [re.search(r"created=([^&]+)", page)[1] for page in pages]  # type: ignore[index]  # every page has one
    assert len(set(spans)) > 1, "the window was split"

    refusal = refused_at(guard_of(world, clock, copy, request_id)[0], ORIGINAL)
    assert refusal.observed.startswith(f"a copy of run {real} (created ")


def test_runs_created_before_the_stated_time_cost_the_real_child_nothing(clock: FakeClock):
    """2,500 hand dispatches ended 3 minutes before the dispatch: one list page, 4 requests.

    Before: the window ran from the parent attempt's start, which held all 2,500.
    """
    world = make_world(clock)
    clock.advance(10.0)
    crowd(world, clock, 2500)
    clock.advance(180.0)
    request_id = stating(world, world.now(), less=60.0)
    real = dispatch_child(world, request_id)
    clock.advance(3.0)
    copy = dispatch_child(world, request_id)
    sent_before = len(world.ledger)

    result, pages = guard_of(world, clock, real, request_id)
    assert result.passed, result.log_lines()
    assert len(pages) == 1
    assert len(world.ledger) - sent_before == 4  # own run, parent, one list page, source ref
    assert "among 1 listed since " in result.checks[4].observed
    assert result.checks[4].observed.endswith("(1 list request(s))")

    refusal = refused_at(guard_of(world, clock, copy, request_id)[0], ORIGINAL)
    assert refusal.observed.startswith(f"a copy of run {real} ")


@pytest.mark.parametrize(
    ("crowded", "sent", "needed"),
    [
        pytest.param(1799, 19, None, id="1800-spread-evenly-fit"),
        pytest.param(1849, 11, 21, id="refused-once-the-rest-cannot-fit"),
        pytest.param(2500, 1, 27, id="refused-at-the-first-page"),
    ],
)
def test_a_window_past_the_listing_bound_refuses_and_gives_the_count(
    clock: FakeClock, crowded: int, sent: int, needed: int | None
):
    """More runs in the window than 20 list requests read: refused, the count named.

    The whole window, then its two halves: 1,800 runs spread evenly take 1 + 9 + 9 requests and
    pass. 1,850 take 1 + 10 + 10: refused once the first half is read (925 runs left need 10
    more). 2,501 need 26 pages whatever the split: refused after the first. Never more than 20.
    Before: refused after 10 pages, naming 1,000 runs listed.
    """
    world = make_world(clock)
    clock.advance(1.0)
    crowd(world, clock, crowded, per_second=crowded // 95)
    real = dispatch_child(world, OLDER_FORM)  # every run since the attempt started

    result, pages = guard_of(world, clock, real)
    assert len(pages) == sent <= MAX_LISTING_REQUESTS
    if needed is None:
        assert result.passed, result.log_lines()
        return
    refusal = refused_at(result, ORIGINAL)
    span = f"{world.render.time(0.0)}..{world.render.time(world.runs[real].created_at)}"
    assert refusal.observed.endswith(
        f"{crowded + 1} runs were created in the window {span}: reading every one needs at "
        f"least {needed} list requests, more than the 20 allowed ({sent} sent)"
    )
    assert f"within {MAX_LISTING_REQUESTS} list requests" in str(refusal)


def test_a_part_of_the_window_that_shows_fewer_runs_than_it_counts_refuses(clock: FakeClock):
    """A `total_count` of 5 (under 1,000: no split) over a page of 1 run: the listing changed
    while it was read, or GitHub hid some; refused, naming both numbers."""
    world = make_world(clock)
    clock.advance(90.0)
    request_id = stating(world, world.now(), less=60.0)
    real = dispatch_child(world, request_id)

    def rule(method: str, path: str, reply: Reply, _world: FakeGitHub) -> Reply | None:
        body = json_body(reply)
        if method == "GET" and path.endswith("/runs") and isinstance(body, dict):
            return with_json(reply, {**body, "total_count": 5})
        return None

    Tamper(world, [rule]).install()
    result, pages = guard_of(world, clock, real, request_id)
    refusal = refused_at(result, ORIGINAL)
    assert len(pages) == 1
    assert refusal.observed == (
        "1 run(s) listed, not every one: 1 of the 5 runs counted in a part of the window were "
        "listed (the listing changed while it was read)"
    )


# -- the guard: the stated time's bounds ---------------------------------------------------------


@pytest.mark.parametrize(
    ("stated_at", "passes"),
    [
        pytest.param(-1.0, False, id="before-the-attempt-started"),
        pytest.param(0.0, True, id="when-the-attempt-started"),
        pytest.param(90.0, True, id="when-the-child-was-created"),
        pytest.param(91.0, False, id="after-the-child-was-created"),
    ],
)
def test_a_stated_time_outside_the_attempts_start_and_the_runs_creation_refuses(
    clock: FakeClock, stated_at: float, passes: bool
):
    """The parent attempt started at 0 s, the child is created at 90 s."""
    world = make_world(clock)
    clock.advance(90.0)
    request_id = stating(world, max(0.0, stated_at), less=max(0.0, -stated_at))
    run_id = dispatch_child(world, request_id)

    result, pages = guard_of(world, clock, run_id, request_id)
    if passes:
        assert result.passed, result.log_lines()
        return
    refusal = refused_at(result, ORIGINAL)
    stated = parse(request_id)
    assert stated is not None
    assert stated.not_before is not None
    assert refusal.observed == (
        f"the request id states {stated.not_before.isoformat()}, outside the parent attempt's "
        f"start {github_time(world, 0.0).isoformat()} to this run's creation "
        f"{github_time(world, 90.0).isoformat()}"
    )
    assert "not made for this run by its parent" in str(refusal)
    assert pages == [], "refused before any listing"


# -- the coordinator states GitHub's time, never the runner's ------------------------------------


def guarded_world(clock: FakeClock, *, clock_offset: float) -> tuple[FakeGitHub, GuardedWorker]:
    """test_guard's `e2e_world` (two runners) with GitHub's clock `clock_offset` s from ours."""
    worker = GuardedWorker(clock)
    world = FakeGitHub(
        clock, workload=Workload(duration=60.0), on_worker_start=worker, clock_offset=clock_offset
    )
    worker.world = world
    world.add_workflow()
    world.add_ref("heads/feature")
    world.add_pool(GROUP, LABEL, runners=2)
    world.add_parent_run(PARENT_ID)
    return world, worker


@pytest.mark.parametrize(
    ("clock_offset", "after_start", "stated"),
    [
        pytest.param(-600.0, 300.0, "date", id="runner-clock-10-min-ahead"),
        pytest.param(0.0, 20.0, "start", id="in-the-attempts-first-minute"),
    ],
)
def test_the_request_id_states_githubs_time_less_a_minute_and_a_copy_is_still_refused(
    clock: FakeClock, clock_offset: float, after_start: float, stated: str
):
    """A runner's clock 10 minutes ahead of GitHub's states nothing after the child's creation.

    A copy 2 s after the real child is refused; the real child runs its workload. Stating
    `runner now - 60 s` would have opened the window 9 minutes after the real child, and the
    copy would have passed. Dispatched in the attempt's first minute, the id states its start.
    """
    world, worker = guarded_world(clock, clock_offset=clock_offset)
    clock.advance(after_start)
    copies: list[int] = []

    def copy_the_child() -> None:
        [real] = [run for run in world.runs.values() if run.history is not None]
        copied = world.dispatch("runner-worker.yml", "main", dict(real.inputs))
        assert not isinstance(copied, DispatchRefused), copied
        copies.append(copied.id)

    world._at(after_start + 2.0, copy_the_child)
    assert coordinate(world, clock) == 0
    [copy] = copies
    [real] = [run_id for run_id in world.history if run_id != copy]
    request = parse(world.runs[real].display_title)
    assert request is not None
    created = github_time(world, world.runs[real].created_at)
    expected = created - A_MINUTE if stated == "date" else github_time(world, 0.0)
    assert request.not_before == expected
    runner_now = clock.now() - timedelta(seconds=clock.monotonic() - world.runs[real].created_at)
    assert (runner_now - A_MINUTE > created) == (clock_offset < 0), "the runner's would be late"
    assert world.history[real].workload_started_at is not None
    assert world.history[copy].guard_passed is False
    refusals = [r.refusal for r in worker.results if r.refusal is not None]
    assert [(r.check, r.observed.split(" (")[0]) for r in refusals] == [
        (ORIGINAL, f"a copy of run {real}")
    ]


# -- the searches by run-name start at the stated time ------------------------------------------


def test_an_older_server_run_is_found_by_name_though_the_runner_clock_is_10_minutes_ahead():
    """The search by run-name listed from the dispatch less 5 minutes of the runner's clock:
    after the run's creation on GitHub's clock. It lists from the stated time now.

    Before: no run was found, and the sequence stopped with "no run with run-name ... appeared".
    """
    clock = FakeClock()
    world = FakeGitHub(clock, api_versions=OLDER_SERVER, clock_offset=-600.0)
    world, sha = standard_world(clock, world)
    world.add_pool(CPU8["group"], CPU8["labels"])
    world.on_worker_start = guard_hook(world, clock, [], main=cli.main)
    result = run_coordinator(world, clock, inputs(sha, runners=json.dumps([CPU8])), main=cli.main)
    assert result.exit_code == 0, result.log
    [child] = [run_id for run_id in world.history if run_id != PARENT_RUN_ID]
    assert f"Found run {child} named" in result.log
    assert world.history[child].workload_started_at is not None


def test_the_post_step_lists_from_the_stated_time_and_still_reads_an_id_of_the_older_form(
    tmp_path: Path,
):
    """The main step died during its dispatch; the post step looks for the run by run-name.

    With the runner's clock 10 minutes ahead of GitHub's, `dispatched-at` less 5 minutes is
    after the run's creation: the stated time finds it. An id of the older form (no skew) is
    still found from `dispatched-at`. Before: the first run was neither found nor cancelled.
    """
    for clock_offset, form in ((-600.0, "stated-time"), (0.0, "older-form")):
        clock = FakeClock()
        world = sim_world(clock, clock_offset=clock_offset)
        world.add_pool(GROUP, "linux-amd64-cpu8", runners=0)  # the child stays queued
        stated = github_time(world, 0.0) - A_MINUTE
        request_id = "rqf-9-1-1-0123abcd"
        if form == "stated-time":
            request_id = str(RequestId(9, 1, 1, "0123abcd", not_before=stated))
        state = {"request-id": request_id, "dispatched-at": clock.now().isoformat()}
        child = dispatch_to_pool(world, request_id, labels="linux-amd64-cpu8")
        clock.advance(10)
        code, log = post_step(world, clock, state, tmp_path)
        assert code == 0, log
        assert world.history[child].conclusion == "cancelled", (form, log)
        assert f"cleanup confirmed: child run {child}" in log, form


# -- stats reads both forms ----------------------------------------------------------------------


def test_stats_reads_children_of_both_forms_online_and_from_its_history_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Children of earlier commits (older form) and of this one (stated time) are all ours.

    Before: a run-name stating a time was no request id: counted "not ours" and left out.
    """
    world, clock = history_world(slow_first_spec(sequences=20, seed=5))
    older = sum(1 for run in world.runs.values() if parse(run.display_title) is not None)
    by_hand = len(world.runs) - older  # the generated history's manual dispatches
    now = world.now()
    for n in range(6):
        at = now - 7200.0 - n * 600.0
        title = stating_past(world, 8_000_001 + n, at)
        world.add_past_run(
            "runner-worker.yml",
            title,
            inputs={"request-id": title, "runner": json.dumps({"group": GROUP, "labels": LABEL})},
            created_at=at,
            completed_at=at + 300.0,
            conclusion="success",
            allocated_at=at + 30.0,
            workload_started=True,
        )
    path = tmp_path / "history.json"
    args = ("--json", "--runner-type", "cpu", "--save-history", str(path))
    assert run_stats(world, clock, *args) == 0
    reading = json.loads(capsys.readouterr().out)["reading"]
    assert reading["runs_not_ours"] == by_hand
    assert reading["children"] == older + 6
    saved = json.loads(path.read_text())
    jsonschema.validate(saved, json.loads((DOCS / "history-schema.json").read_text()))
    forms = {parse(child["request_id"]).not_before is None for child in saved["children"]}  # type: ignore[union-attr]  # validated above
    assert forms == {True, False}
    offline = ["stats", "--history", str(path), "--json", "--runner-type", "cpu"]
    assert cli.main(offline, {}) == 0
    assert json.loads(capsys.readouterr().out)["reading"]["children"] == older + 6


def stating_past(world: FakeGitHub, parent: int, at: float) -> str:
    """A request id of parent run `parent` dispatched at `at`, stating GitHub's time less 60 s."""
    return str(RequestId(parent, 1, 1, f"{parent % 2**32:08x}", github_time(world, at) - A_MINUTE))


# -- the client keeps GitHub's Date --------------------------------------------------------------


def test_the_client_keeps_githubs_date_over_http_and_ignores_one_without_a_zone():
    """Served over a loopback HTTP server: the fake's `Date` (GitHub's clock, 10 minutes behind
    the runner's here), not the host's; a later `Date` without a zone does not replace it."""
    clock = FakeClock()
    world = sim_world(clock, clock_offset=-600.0)
    run_id = dispatch_to_pool(world, OLDER_FORM)
    clock.advance(42.5)
    with world.serve() as url:
        client = GitHubClient(requests.Session(), url, world.repository, TOKEN, clock)
        assert client.server_date() is None
        client.get_run(run_id)
        assert client.server_date() == github_time(world, 42.0)
        assert client.server_date() == clock.now().replace(microsecond=0) - timedelta(minutes=10)

        def no_zone(method: str, path: str, reply: Reply, _world: FakeGitHub) -> Reply | None:
            del method, path
            headers = {**reply.headers, "Date": "Thu, 01 Jan 2026 00:00:30 -0000"}
            return replace(reply, headers=headers)

        Tamper(world, [no_zone]).install()
        clock.advance(5.0)
        client.get_run(run_id)
        assert client.server_date() == github_time(world, 42.0)
