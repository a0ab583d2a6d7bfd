"""Named regressions of issues 15 and 26 (trust boundaries), each driven through `main(...)` on the fake.

Every test in the first part failed before the fix; its docstring says what happened then. The
tests in the last part pin behaviour that already worked but that no test held.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.errors import GitHubError
from runner_queue_fallback.core.inputs import env_name
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import WORKER_TOKEN, Timings, Workload, fake_token
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.tools.simulate.capture import capture_stdout
from runner_queue_fallback.tools.simulate.steps import (
    PARENT_RUN_ID,
    SOURCE_REF,
    SimulationRun,
    run_coordinator,
    standard_world,
)
from tests.invariants import check_invariants, children, dispatch_posts
from tests.outside import (
    MARKER,
    Rule,
    Tamper,
    child_run_id,
    commands_from_outside,
    error_reply,
    foreign_links,
    json_body,
    watch_stdout,
    with_json,
)

CPU16, CPU8 = "linux-amd64-cpu16", "linux-amd64-cpu8"
GROUP = "nv-cpu-general"
FOREVER = ((0.0, 10.0**9),)
COMMAND_TEXT = f"boom\n::warning::{MARKER} %0A::error::{MARKER} ##[warning]{MARKER}"


class World:
    """The standard repository with CPU pools, a tamper on its replies, and a coordinator run."""

    def __init__(self, *, timings: Timings | None = None, workload: Workload | None = None):
        self.clock = FakeClock()
        fake = FakeGitHub(self.clock, timings=timings or Timings(), workload=workload)
        self.world, self.sha = standard_world(self.clock, fake)
        self.tamper = Tamper(self.world).install()
        self.inputs = {
            "workflow": "runner-worker.yml",
            "workflow-ref": "main",
            "source-ref": SOURCE_REF,
            "source-sha": self.sha,
            "runner-type": "cpu",
            "queue-timeout-minutes": "1",
            "execution-timeout-minutes": "5",
            "runners": json.dumps(
                [{"group": GROUP, "labels": CPU16}, {"group": GROUP, "labels": CPU8}]
            ),
        }

    def pools(self, *busy: tuple[tuple[float, float], ...]) -> World:
        for label, intervals in zip((CPU16, CPU8), busy, strict=False):
            self.world.add_pool(GROUP, label, runners=1, busy=intervals)
        return self

    def run(self, changes: Mapping[str, str] | None = None, *, bug: bool = False) -> SimulationRun:
        inputs = {**self.inputs, **(changes or {})}
        with watch_stdout() as watch:
            result = run_coordinator(self.world, self.clock, inputs, main=cli.main)
        check_invariants(self.world, result, candidates=2)
        assert watch.problems() == [], watch.problems()
        everything = "\n".join([result.log, result.post_log, *result.guard_logs])
        assert commands_from_outside(everything) == [], commands_from_outside(everything)
        assert bug or "Traceback" not in everything
        return result


def cancels(world: FakeGitHub) -> list[float]:
    return [e.time for e in world.ledger if e.method == "POST" and e.path.endswith("/cancel")]


# -- 1. the guard binds the child to its coordinator --------------------------------------

OTHER_RUN = 7_000_777


def guard_world(clock: FakeClock) -> tuple[FakeGitHub, str]:
    world, sha = standard_world(clock)
    world.add_parent_run(OTHER_RUN, workflow="ci.yml")  # an unrelated CI run, in progress
    return world, sha


def hand_dispatch(
    world: FakeGitHub, sha: str, request_id: str, parent: int, attempt: int = 1
) -> int:
    run = world.dispatch(
        "runner-worker.yml",
        "main",
        {
            "request-id": request_id,
            "parent-run-id": str(parent),
            "parent-run-attempt": str(attempt),
            "source-ref": SOURCE_REF,
            "source-sha": sha,
            "runner": json.dumps({"group": GROUP, "labels": CPU16}),
            "workload": "{}",
        },
    )
    assert hasattr(run, "id"), run
    return run.id


def run_guard(
    world: FakeGitHub, clock: FakeClock, run_id: int, *, summary: str = "", **inputs: str
) -> tuple[int, str]:
    child = world.runs[run_id]
    environ = {
        "GITHUB_RUN_ID": str(run_id),
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_REPOSITORY": world.repository,
        "GITHUB_API_URL": world.api_url,
        "GITHUB_SERVER_URL": world.server_url,
        env_name("token"): WORKER_TOKEN,
        **{env_name(k): v for k, v in child.inputs.items() if k not in {"runner", "workload"}},
        **{env_name(k): v for k, v in inputs.items()},
        "GITHUB_STEP_SUMMARY": summary,
    }
    out = io.StringIO()
    with capture_stdout(out), watch_stdout() as watch:
        code = cli.main(["guard"], environ, clock=clock, session=world.session())
    assert watch.problems() == [], watch.problems()
    return code, out.getvalue()


def test_guard_refuses_a_hand_made_dispatch_with_a_foreign_request_id():
    """A person dispatched the child by hand: `request-id=hello`, an unrelated CI run as parent.

    Before: the run-name matched the request-id input (the dispatcher chose both) and the CI run
    was in progress, so the guard passed and the workload started. After: `hello` is no request
    id of that parent, and the guard refuses before any API request for it.
    """
    clock = FakeClock()
    world, sha = guard_world(clock)
    run_id = hand_dispatch(world, sha, "hello", OTHER_RUN)
    clock.sleep(10)
    code, log = run_guard(world, clock, run_id)
    assert code == 1, log
    assert "request id" in log
    assert "'hello', not a request id" in log


def test_guard_refuses_a_parent_of_another_workflow_when_coordinator_workflow_is_set():
    """The request id has the right form and names its parent, but the parent is a CI run.

    Before: the guard checked only that the parent was in progress at that attempt, and knew of
    no coordinator workflow: it passed. After: with `coordinator-workflow: runner-check.yml` the
    parent must be a run of that workflow.
    """
    clock = FakeClock()
    world, sha = guard_world(clock)
    run_id = hand_dispatch(world, sha, f"rqf-{OTHER_RUN}-1-1-0123abcd", OTHER_RUN)
    clock.sleep(10)
    code, log = run_guard(world, clock, run_id, **{"coordinator-workflow": "runner-check.yml"})
    assert code == 1, log
    assert "a run of ci.yml" in log
    assert "coordinator-workflow" in log
    # The same child with the real coordinator as parent passes.
    good = hand_dispatch(world, sha, f"rqf-{PARENT_RUN_ID}-1-1-0123abcd", PARENT_RUN_ID)
    clock.sleep(10)
    code, log = run_guard(world, clock, good, **{"coordinator-workflow": "runner-check.yml"})
    assert code == 0, log


def test_guard_refuses_a_child_created_before_its_parent_attempt_started():
    """A child made for attempt 2 of a parent, dispatched before that attempt existed.

    Before: the parent was in progress at attempt 2 when the guard ran, so it passed. After: the
    child must have been created after the parent attempt started (`run_started_at`).
    """
    clock = FakeClock()
    world, sha = guard_world(clock)
    run_id = hand_dispatch(world, sha, f"rqf-{PARENT_RUN_ID}-2-1-0123abcd", PARENT_RUN_ID, 2)
    world.rerun_parent(PARENT_RUN_ID, at=5.0)
    clock.sleep(10)
    code, log = run_guard(world, clock, run_id)
    assert code == 1, log
    assert "started before this child was created" in log


# -- 2. refs by git's rules, paths from encoded segments -----------------------------------

TRAVERSAL = "refs/heads/x/../../../../../../other/fork/git/ref/heads/x"


def test_traversal_source_ref_is_refused_before_any_request(no_network):
    """`source-ref` with `..` passed validation, and the client read a ref in another repository.

    Before: accepted; the HTTP stack removed the dot segments. After: exit 2, no request.
    """
    session, adapter = no_network
    clock = FakeClock()
    world, sha = standard_world(clock)
    environ = {
        env_name("workflow"): "runner-worker.yml",
        env_name("workflow-ref"): "main",
        env_name("source-ref"): TRAVERSAL,
        env_name("source-sha"): sha,
        env_name("runner-type"): "cpu",
        env_name("token"): fake_token("x"),
        "GITHUB_REPOSITORY": world.repository,
        "GITHUB_RUN_ID": "1",
        "GITHUB_RUN_ATTEMPT": "1",
    }
    out = io.StringIO()
    with capture_stdout(out):
        code = cli.main(["coordinate"], environ, clock=clock, session=session)
    assert code == 2
    assert "source-ref" in out.getvalue()
    assert adapter.sent == []
    with capture_stdout(out):
        code = cli.main(
            ["coordinate"],
            {
                **environ,
                env_name("source-ref"): "refs/heads/main",
                env_name("workflow-ref"): "a/../b",
            },
            clock=clock,
            session=session,
        )
    assert code == 2
    assert adapter.sent == []


def test_client_refuses_dot_segments_and_encodes_each_segment(no_network):
    """One place builds every path: `..` is refused, `/` inside a single value is encoded."""
    session, adapter = no_network
    client = GitHubClient(session, "https://api.github.test", "o/r", "t", FakeClock())
    with pytest.raises(GitHubError, match=r"segment '\.\.'"):
        client.get_commit_sha("heads/x/../../other")
    with pytest.raises(GitHubError, match="segment ''"):
        client.get_file_sha(".github//x.yml", "main")
    assert adapter.sent == []
    with pytest.raises(AssertionError):  # the no-network adapter: a request was attempted
        client.dispatch_workflow("a/b.yml", "main", {})
    assert adapter.sent[-1].split(" ")[1].endswith("/actions/workflows/a%2Fb.yml/dispatches")


# -- 3. odd replies: no traceback, no child left behind ------------------------------------


def rate_limit_once_while_queued(retry_after: str) -> Rule:
    fired: list[float] = []

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        if method == "GET" and child_run_id(path, world) and world.now() > 40 and not fired:
            fired.append(world.now())
            message = "You have exceeded a secondary rate limit. Please wait."
            return error_reply(403, message, {"Retry-After": retry_after})
        return None

    return rule


@pytest.mark.parametrize(
    "retry_after",
    [
        pytest.param("Thu, 01 Jan 2026 00:00:30 -0000", id="http-date-without-zone"),
        pytest.param("nan", id="nan"),
        pytest.param("inf", id="inf"),
        pytest.param("-30", id="negative"),
    ],
)
def test_odd_retry_after_is_read_as_absent(retry_after: str):
    """A `Retry-After` HTTP date ending in `-0000`, or NaN/inf/negative seconds.

    Before: the date raised TypeError (naive minus aware datetime) out of `Coordinator.run`: a
    traceback, no cleanup, the child left queued; `nan` made the wait NaN. After: read as absent
    (the default wait, capped at 60 s), and the sequence goes on.
    """
    w = World().pools(FOREVER, ())
    w.tamper.rules.append(rate_limit_once_while_queued(retry_after))
    result = w.run()
    assert w.tamper.fired == 1
    assert result.exit_code == 0, result.log
    assert all(math.isfinite(s) and 0 <= s <= 60 for s in w.clock.sleeps), w.clock.sleeps


def test_deeply_nested_error_body_is_cut_not_raised():
    """A 502 whose body is JSON nested 100,000 deep, while the child is queued.

    Before: RecursionError from reading GitHub's `message` escaped `Coordinator.run`: no
    cleanup, no `::error`. After: the message is cut and the reply is a retried server error.
    """
    deep = b"[" * 100_000 + b"]" * 100_000
    fired: list[float] = []

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        if method == "GET" and child_run_id(path, world) and world.now() > 40 and not fired:
            fired.append(world.now())
            return Reply(502, {"Content-Type": "application/json"}, deep)
        return None

    w = World().pools(FOREVER, ())
    w.tamper.rules.append(rule)
    result = w.run()
    assert fired
    assert result.exit_code == 0, result.log


def test_unexpected_exception_still_cleans_up_and_publishes(monkeypatch: pytest.MonkeyPatch):
    """Any exception, not only the project's own, goes through cleanup and publishing."""
    from runner_queue_fallback.action.sequence import queue  # noqa: PLC0415  # the phase to break

    def broken(*_args: object, **_kwargs: object) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(queue, "wait_in_queue", broken)
    w = World().pools(FOREVER, ())
    result = w.run(bug=True)
    assert result.exit_code == 1
    [kid] = children(w.world)
    assert kid.conclusion == "cancelled"
    assert result.log.count("::error") == 1
    assert "unexpected ZeroDivisionError in the fallback sequence: a bug" in result.log
    assert result.outputs["run-id"] == str(kid.run_id)
    assert "Unexpected error" in result.log


# -- 4. outside text is never a command or a link ------------------------------------------


def test_error_message_with_command_syntax_is_not_a_command():
    """GitHub's `message` (`\\n::warning`, `%0A`, `##[`) in a cancellation check's log line.

    Before: "Cancellation check failed: ... 500: boom" was printed as is: the message started its
    own line with `::warning::` and carried `##[warning]`. After: one escaped line.
    """
    fired: list[float] = []

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        if method == "GET" and child_run_id(path, world) and cancels(world) and len(fired) < 3:
            fired.append(world.now())
            return error_reply(500, COMMAND_TEXT)
        return None

    w = World().pools(FOREVER, ())
    w.tamper.rules.append(rule)
    result = w.run()  # checks that no command came from outside text
    assert len(fired) == 3
    assert "Cancellation check failed" in result.log
    assert MARKER in result.log
    assert result.exit_code == 0, result.log


def test_html_url_with_a_parenthesis_does_not_make_links_in_the_summary():
    """The dispatch reply's `html_url` closed the Markdown link and added a link and an image.

    Before: pasted raw into `[id](url)`. After: a URL off the server's https host is code.
    """

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        body = json_body(reply)
        if method == "POST" and path.endswith("/dispatches") and isinstance(body, dict):
            body["html_url"] += (
                f") ![{MARKER}](https://evil.test/x.png) [{MARKER}](https://evil.test"
            )
            return with_json(reply, body)
        return None

    w = World().pools((), ())
    w.tamper.rules.append(rule)
    result = w.run()
    assert result.exit_code == 0, result.log
    assert MARKER in result.summary
    assert foreign_links(result.summary, w.world.server_url) == []
    assert "](<https://github.test/" in result.summary  # the artifacts link of the real run


def test_dispatcher_chosen_request_id_cannot_make_a_link_in_the_guard_summary(tmp_path):
    """`escape_markdown` left `[text](url)` and `![](url)` working in the guard's summary."""
    clock = FakeClock()
    world, sha = guard_world(clock)
    request_id = (
        f"[{MARKER}](https://evil.test/x) ![i](https://evil.test/i.png) ##[warning]{MARKER}"
    )
    run_id = hand_dispatch(world, sha, request_id, PARENT_RUN_ID)
    clock.sleep(10)
    summary = tmp_path / "summary.md"
    code, log = run_guard(world, clock, run_id, summary=str(summary))
    assert code == 1
    text = summary.read_text()
    assert MARKER in text
    assert foreign_links(text, world.server_url) == []
    assert commands_from_outside(log) == []


# -- 5. lagging conclusions ------------------------------------------------------------------


def lag_conclusion(reads: int, *, when: str) -> Rule:
    """Show a completed child run with a null conclusion for its first `reads` reads."""
    seen: dict[int, int] = {}

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        run_id = child_run_id(path, world)
        body = json_body(reply)
        if method != "GET" or run_id is None or not path.endswith(f"/runs/{run_id}"):
            return None
        if not isinstance(body, dict) or body.get("conclusion") != when:
            return None
        seen[run_id] = seen.get(run_id, 0) + 1
        if seen[run_id] > reads:
            return None
        return with_json(reply, {**body, "conclusion": None})

    return rule


def test_lagging_conclusion_during_the_cancellation_proof_falls_back():
    """The cancelled run showed `completed` with a null conclusion for two reads.

    Before: "ended unexpectedly", no fallback. After: read again at the 5-s cadence in the proof
    window; cancelled cleanly, then the next pool.
    """
    w = World().pools(FOREVER, ())
    w.tamper.rules.append(lag_conclusion(2, when="cancelled"))
    result = w.run()
    assert result.exit_code == 0, result.log
    assert "ended unexpectedly" not in result.log
    assert len(dispatch_posts(w.world)) == 2
    assert "waiting for its conclusion" in result.log


def test_lagging_conclusion_after_a_successful_worker_is_success():
    """The worker succeeded; the run read `completed` with a null conclusion twice.

    Before: "the worker did not succeed: run concluded None": a green worker, a red parent.
    After: waited for in the 2-minute settle window; success.
    """
    w = World().pools((), ())
    w.tamper.rules.append(lag_conclusion(2, when="success"))
    result = w.run()
    assert result.exit_code == 0, result.log
    assert "concluded None" not in result.log
    assert "lagging report" in result.log


# -- 6. the startup window as the spec words it ---------------------------------------------


def pending_title(until: float, *, after: float = 0.0) -> Rule:
    """Show the child's run-name as the workflow's name between `after` and `until` (relative)."""

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        run_id = child_run_id(path, world)
        body = json_body(reply)
        if (
            method != "GET"
            or run_id is None
            or not isinstance(body, dict)
            or "display_title" not in body
        ):
            return None
        age = world.now() - world.history[run_id].dispatched_at
        if after <= age < until:
            return with_json(reply, {**body, "display_title": body["name"]})
        return None

    return rule


def test_pending_run_name_at_the_first_startup_read_is_waited_for():
    """The first read showed the run-name still equal to the workflow's name.

    Before: failed at once ("not the run that was dispatched") and cancelled a good child.
    After: tolerated until the window's expiry; here it fills in at 30 s and all goes on.
    """
    w = World().pools((), ())
    w.tamper.rules.append(pending_title(30.0))
    result = w.run()
    assert result.exit_code == 0, result.log
    assert len(dispatch_posts(w.world)) == 1


def test_pending_run_name_until_expiry_reports_expected_and_observed():
    """A run-name that never fills in fails at the window's expiry, naming both values."""
    w = World().pools((), ())
    w.tamper.rules.append(pending_title(10.0**9))
    result = w.run()
    assert result.exit_code == 1
    assert "2-minute startup window" in result.log
    assert "expected 'rqf-" in result.log
    assert "observed 'Runner worker' (not filled in yet)" in result.log


def test_run_name_seen_matching_then_pending_fails_at_once():
    """A field seen matching that then changes fails at once, even inside the startup window."""
    w = World(timings=Timings(jobs_delay=60.0)).pools((), ())
    w.tamper.rules.append(pending_title(10.0**9, after=25.0))
    result = w.run()
    assert result.exit_code == 1
    assert "changed after it was seen matching" in result.log
    cancel = cancels(w.world)[0]
    assert cancel < children(w.world)[0].dispatched_at + 40


def test_read_in_flight_across_the_startup_window_end_is_judged_on_its_reply():
    """The last startup read was sent inside the window; its reply arrived after it.

    Before: the late reply was thrown away and the startup failed, cancelling a good child.
    After: judged on its reply (the spec: in-flight requests extend the observation window).
    """
    # Each request takes 1.75 s: the last startup read is sent at 118.75 s, answered at 120.5 s.
    w = World(timings=Timings(latency=1.75)).pools(FOREVER, ())

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        run_id = child_run_id(path, world)
        body = json_body(reply)
        if (
            method != "GET"
            or run_id is None
            or run_id != min(world.history)
            or not path.endswith("/jobs")
        ):
            return None
        if world.now() - world.history[run_id].dispatched_at < HIDDEN and isinstance(body, dict):
            return with_json(reply, {**body, "total_count": 0, "jobs": []})
        return None

    w.tamper.rules.append(rule)
    result = w.run()
    assert result.exit_code == 0, result.log
    assert "2-minute startup window" not in result.log
    first = children(w.world)[0]
    reads = [
        e.time - first.dispatched_at
        for e in w.world.ledger
        if e.path.endswith(f"/runs/{first.run_id}/attempts/1/jobs")
    ]
    shown = [t for t in reads if t >= HIDDEN]
    assert shown[0] > STARTUP_WINDOW_SECONDS  # sent after the run's reply, which came late


#: The job list stays empty until just before the window's end: only the in-flight read sees it.
HIDDEN = 118.0
STARTUP_WINDOW_SECONDS = 120.0


# -- 7. no false alarm after a refusal --------------------------------------------------------


def test_post_step_after_a_refused_dispatch_has_nothing_to_clean_up():
    """A dispatch refused with 422 creates no run.

    Before: the post step searched by run-name and said "no run with run-name ... was found: if
    one appears, cancel it by hand". After: it knows nothing was created.
    """

    w = World().pools((), ())
    w.world.inject(Fault(kind="status", status=422, method="POST", path=r"/dispatches$"))
    result = w.run()
    assert result.exit_code == 1
    assert children(w.world) == []
    assert "cancel it by hand" not in result.post_log
    assert "no run was created" in result.post_log
    assert "nothing to clean up" in result.post_log
    assert result.post_exit_code == 0


# -- 8. behaviour that worked, now held by a test ---------------------------------------------


def deadline_of_first_child() -> float:
    """When the first child's queue deadline is reached (the fresh read), with 0.25 s latency."""
    w = World(timings=Timings(latency=0.25)).pools(FOREVER, ())
    result = w.run()
    return next(t for t, line in result.log_lines if "Queue deadline of" in line)


def test_fresh_read_at_the_deadline_finding_a_runner_does_not_cancel():
    """A runner arrives between the last queue poll and the fresh read: no cancel, no fallback."""
    deadline = deadline_of_first_child()
    w = World(timings=Timings(latency=0.25)).pools(((0.0, deadline - 0.1),), FOREVER)
    result = w.run()
    assert result.exit_code == 0, result.log
    assert cancels(w.world) == []
    assert len(dispatch_posts(w.world)) == 1
    assert "fresh read before cancelling" in result.log


def test_pinned_after_start_still_checks_the_source_while_queued():
    """`pinned-after-start` exempts only an allocated worker: a queued child's source is checked."""
    w = World().pools(FOREVER, ())
    w.world.move_ref(SOURCE_REF.removeprefix("refs/"), at=40.0)
    result = w.run({"source-policy": "pinned-after-start"})
    assert result.exit_code == 1
    assert "moved" in result.log
    assert children(w.world)[0].conclusion == "cancelled"


def test_pinned_after_start_still_honours_parent_cancellation():
    """An allocated worker under `pinned-after-start` still stops when the parent is cancelled."""
    w = World(workload=Workload(duration=600.0)).pools((), ())
    w.world.finish_parent(PARENT_RUN_ID, "cancelled", at=120.0)
    result = w.run({"source-policy": "pinned-after-start", "execution-timeout-minutes": "15"})
    assert result.exit_code == 1
    assert f"parent run {PARENT_RUN_ID}" in result.log.lower() or "parent" in result.log
    assert children(w.world)[0].conclusion == "cancelled"


def test_parent_rerun_stops_the_coordinator():
    """The parent re-run (a new attempt) while the child is queued: the sequence stops."""
    w = World().pools(FOREVER, ())
    w.world.rerun_parent(PARENT_RUN_ID, at=40.0)
    result = w.run()
    assert result.exit_code == 1
    assert "attempt" in result.log
    assert len(dispatch_posts(w.world)) == 1
    assert children(w.world)[0].conclusion == "cancelled"


def test_404_after_startup_fails_at_once():
    """A 404 for the child after the startup window is not retried: the sequence stops."""
    w = World().pools(FOREVER, ())
    w.world.inject(
        Fault(
            kind="status",
            status=404,
            method="GET",
            path=r"/actions/runs/9\d{9}$",
            start=50.0,
            count=1,
        )
    )
    result = w.run()
    assert result.exit_code == 1
    assert "404" in result.log
    assert len(dispatch_posts(w.world)) == 1


def test_a_later_identity_change_fails_at_once():
    """After startup, a run-name that changes to another value stops the sequence at once."""
    w = World().pools(FOREVER, ())

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        run_id = child_run_id(path, world)
        body = json_body(reply)
        if run_id and isinstance(body, dict) and "display_title" in body and world.now() > 50:
            return with_json(reply, {**body, "display_title": "someone-else"})
        return None

    w.tamper.rules.append(rule)
    result = w.run()
    assert result.exit_code == 1
    assert "not the run that was dispatched" in result.log
    assert "'someone-else'" in result.log
    assert len(dispatch_posts(w.world)) == 1


def test_waiting_round_and_cancellation_log_lines_show_both_states_and_the_runner():
    """The spec's log lines: each waiting round and each cancellation check."""
    w = World().pools(FOREVER, ())
    result = w.run()
    kid = children(w.world)[0].run_id
    assert (
        f"Waiting round 1, candidate 1/2 (nv-cpu-general / linux-amd64-cpu16): child {kid} "
        "run queued/-; job worker queued/-, runner none"
    ) in result.log
    assert f"child {kid} run {kid}" not in result.log  # the id is named once
    assert "since dispatch," in result.log
    assert "left to the queue deadline; next check in" in result.log
    assert (
        f"Cancellation check: run {kid} completed/cancelled; job worker completed/cancelled, "
        "runner none, 0 step(s) started"
    ) in result.log


def test_run_link_label_in_the_summary_when_no_job_was_seen():
    """No job ever listed: the summary links the run, labelled as the fallback."""
    w = World(timings=Timings(jobs_delay=10_000.0)).pools((), ())
    result = w.run()
    assert result.exit_code == 1
    assert "View worker job logs here \\(run link: the job link is not available" not in (
        result.summary
    )
    assert (
        "View worker job logs here (run link: the job link is not available; never had a runner)"
    ) in result.summary


def test_lost_dispatch_reply_whose_run_never_appears():
    """A 502 to the dispatch with no run created: searched by run-name for 2 minutes, never re-sent."""
    w = World().pools((), ())
    w.world.inject(Fault(kind="status", status=502, method="POST", path=r"/dispatches$", count=1))
    result = w.run()
    assert result.exit_code == 1
    assert "no run with run-name rqf-" in result.log
    assert "appeared within 2 minutes" in result.log
    assert len(dispatch_posts(w.world)) == 1
    assert children(w.world) == []


def test_coordinator_with_its_own_run_in_an_unknown_state_fails_at_once():
    """The shared parent check: `waiting` is neither active nor a grace state; no dispatch."""
    w = World().pools((), ())
    w.world.runs[PARENT_RUN_ID].status = "waiting"
    result = w.run()
    assert result.exit_code == 1
    assert "observed status 'waiting'" in result.log
    assert dispatch_posts(w.world) == []
    assert w.clock.sleeps == []


# -- 9. issue 26: copies, and a parent of this repository's coordinator at its ref -----------


def copy_of(world: FakeGitHub, run_id: int) -> int:
    """Dispatch the child again with a live child's inputs, as a co-tenant could."""
    copied = world.dispatch("runner-worker.yml", "main", dict(world.runs[run_id].inputs))
    assert hasattr(copied, "id"), copied
    return copied.id


def show_parent(world: FakeGitHub, **fields: object) -> None:
    """The parent run as GitHub might show it: another path, event or head repository."""

    def rule(method: str, path: str, reply: Reply, _world: FakeGitHub) -> Reply | None:
        body = json_body(reply)
        if method == "GET" and path.endswith(f"/runs/{PARENT_RUN_ID}") and isinstance(body, dict):
            return with_json(reply, {**body, **fields})
        return None

    Tamper(world, [rule]).install()


REQUEST = f"rqf-{PARENT_RUN_ID}-1-1-0123abcd"
TRUSTED = {"coordinator-workflow": "runner-check.yml", "coordinator-ref": "refs/heads/main"}


def test_guard_refuses_a_copy_dispatched_seconds_after_the_real_child():
    """A copy of a live child's inputs, dispatched 3 s after it.

    Before: same request id, parent and source: the guard passed and the workload ran twice.
    After: the copy is not the earliest run bearing its request id: "a copy of run N".
    """
    clock = FakeClock()
    world, sha = guard_world(clock)
    real = hand_dispatch(world, sha, REQUEST, PARENT_RUN_ID)
    clock.sleep(3)
    copy = copy_of(world, real)
    clock.sleep(5)
    code, log = run_guard(world, clock, copy, **TRUSTED)
    assert code == 1, log
    assert f"a copy of run {real} " in log
    code, log = run_guard(world, clock, real, **TRUSTED)
    assert code == 0, log


def test_guard_refuses_a_parent_whose_workflow_path_names_another_repository():
    """`other-org/any-repo/.github/workflows/runner-check.yml@...` is not our coordinator.

    Before: the file name matched `coordinator-workflow` whatever came before it. After: a prefix
    must name GITHUB_REPOSITORY.
    """
    clock = FakeClock()
    world, sha = guard_world(clock)
    show_parent(world, path="other-org/any-repo/.github/workflows/runner-check.yml@refs/heads/main")
    run_id = hand_dispatch(world, sha, REQUEST, PARENT_RUN_ID)
    clock.sleep(10)
    code, log = run_guard(world, clock, run_id, **{"coordinator-workflow": "runner-check.yml"})
    assert code == 1, log
    assert "'other-org/any-repo/.github/workflows/runner-check.yml@refs/heads/main'" in log


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        pytest.param(
            {"path": ".github/workflows/runner-check.yml@refs/heads/feature"},
            "at refs/heads/feature (the @ref of its workflow path)",
            id="from-a-branch",
        ),
        pytest.param(
            {"head_branch": "feature"},
            "at refs/heads/feature (the head branch of its workflow_dispatch run)",
            id="dispatched-on-a-branch",
        ),
        pytest.param(
            {
                "event": "pull_request",
                "head_repository": {"full_name": "mallory/octo-repo"},
            },
            "its code comes from 'mallory/octo-repo', not octo-org/octo-repo",
            id="fork-pull-request-from-main",
        ),
    ],
)
def test_guard_refuses_a_parent_run_from_another_ref_with_coordinator_ref(
    fields: dict[str, object], why: str
):
    """With `coordinator-ref: refs/heads/main`, the coordinator's file from any other ref fails.

    Before: a run of `runner-check.yml` from any branch, or a fork's pull request from its own
    `main`, passed as the parent.
    """
    clock = FakeClock()
    world, sha = guard_world(clock)
    show_parent(world, **fields)
    run_id = hand_dispatch(world, sha, REQUEST, PARENT_RUN_ID)
    clock.sleep(10)
    code, log = run_guard(world, clock, run_id, **TRUSTED)
    assert code == 1, log
    assert why in log
    assert "coordinator-ref" in log


@pytest.mark.parametrize("ref", ["main", "refs/pull/1/merge", "refs/heads/a..b", "refs/heads/"])
def test_a_coordinator_ref_that_is_no_branch_or_tag_ref_is_an_input_error(no_network, ref: str):
    """Refused by name before any request (exit 2)."""
    session, adapter = no_network
    environ = {
        "GITHUB_RUN_ID": "5",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_REPOSITORY": "octo-org/octo-repo",
        env_name("request-id"): REQUEST,
        env_name("parent-run-id"): str(PARENT_RUN_ID),
        env_name("parent-run-attempt"): "1",
        env_name("source-ref"): SOURCE_REF,
        env_name("source-sha"): "a" * 40,
        env_name("coordinator-ref"): ref,
        env_name("token"): fake_token("x"),
    }
    out = io.StringIO()
    with capture_stdout(out):
        code = cli.main(["guard"], environ, clock=FakeClock(), session=session)
    assert code == 2
    assert "coordinator-ref" in out.getvalue()
    assert adapter.sent == []
