"""The coordinator knows when its own job ends, and no wait for quota of ours outlives it.

Issue 27, item 2. Everything runs the real coordinator (`cli.main`) against the fake GitHub on a
fake clock: the parent run has its own job (key `runner-check`, on runner `GitHub Actions <id>`),
and the coordinator's workflow file is served at the commit GITHUB_WORKFLOW_SHA names.
"""

from __future__ import annotations

import math
import re
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

import pytest

from runner_queue_fallback.action.sequence import job_time
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.inputs import env_name, read_pool_settings
from runner_queue_fallback.core.profiles import load_profiles
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.simulate.steps import PARENT_RUN_ID, SimulationRun, job_environ
from runner_queue_fallback.workflow.plan import make_plan
from tests.invariants import dispatch_posts
from tests.outside import Tamper, json_body, with_json
from tests.test_coordinator import FOREVER, Scenario
from tests.test_quota import long_retry_after, spend_all_at

if TYPE_CHECKING:
    from runner_queue_fallback.action.sequence.state import SequenceState

#: One CPU candidate of the default list: 2 min startup, 10 min queue, 2 min cancellation,
#: 15 min execution (the Scenario's input), 5 min for the post step.
NEEDS_MINUTES = 34
#: The fake's quota window starts with the first counted request, at virtual time 0.
RESET = timing.QUOTA_WINDOW_SECONDS
COORDINATOR_FILE = ".github/workflows/runner-check.yml"


def coordinator_yaml(
    job_timeout: str | None = None,
    step_timeout: str | None = None,
    *,
    uses: str = "acme/runner-queue-fallback@v1",
    job_key: str = "runner-check",
    extra_step: str = "",
) -> str:
    """The coordinator's own workflow file, with the timeouts given (None: not set)."""
    lines = ["name: Runner check", "on: workflow_dispatch", "jobs:", f"  {job_key}:"]
    lines += ["    runs-on: ubuntu-latest"]
    if job_timeout is not None:
        lines += [f"    timeout-minutes: {job_timeout}"]
    lines += ["    steps:", f"      - uses: {uses}"]
    if step_timeout is not None:
        lines += [f"        timeout-minutes: {step_timeout}"]
    lines += ["        with:", "          runner-type: cpu"]
    return "\n".join(lines) + "\n" + extra_step


def job_scenario(content: str | None, *faults: Fault, job_started: float = 0.0) -> Scenario:
    """A world whose parent's job started at `job_started` and whose workflow file is `content`,
    with `faults` planned in its fake GitHub."""
    s = Scenario(faults=faults).pools([], FOREVER, FOREVER)
    s.world.add_parent_run(PARENT_RUN_ID, job_started=job_started)
    if content is not None:
        s.world.add_workflow("runner-check.yml", "main", content=content)
    return s


def run(s: Scenario, **environ: str) -> SimulationRun:
    return s.run(extra_environ={**job_environ(s.world), **environ})


def short_quota(s: Scenario) -> None:
    """Other workflows left 10 requests of the hour: the coordinator waits for the reset."""
    s.world.spend_quota(s.world.quota - 10)


def reads_of(s: Scenario, path_end: str) -> int:
    return sum(1 for e in s.world.ledger if e.client == 0 and e.path.endswith(path_end))


def refused_for_the_job(result: SimulationRun, s: Scenario, named: str) -> None:
    """Failed at once, before any wait and any child; the error names the timeout and the need."""
    assert result.exit_code == 1, result.log
    assert dispatch_posts(s.world) == []
    assert s.clock.monotonic() < 60, "no wait is begun that would leave too little"
    [error] = [line for line in result.log.splitlines() if line.startswith("::error")]
    assert named in error
    assert f"candidate 1/3 (nv-cpu-general / linux-amd64-cpu16) needs {NEEDS_MINUTES} min" in error
    assert "startup window 2 min, queue deadline 10 min, cancellation window 2 min" in error
    assert "execution timeout 15 min, post step 5 min" in error
    assert "no child was dispatched" in error


# -- the job's timeout, as read --------------------------------------------------------------------


def test_an_admission_wait_that_would_leave_the_candidate_too_little_fails_at_once():
    """timeout-minutes 90: after the hour's reset 30 min are left, the candidate needs 34."""
    s = job_scenario(coordinator_yaml("90"))
    short_quota(s)
    result = run(s)
    refused_for_the_job(result, s, "timeout-minutes 90 of job `runner-check`")
    assert "API quota too low to dispatch candidate 1" in result.log
    assert "Give the job timeout-minutes of at least" in result.log


def test_an_admission_wait_that_leaves_enough_is_taken_and_its_spread_cut_to_fit():
    """timeout-minutes 96: 36 min are left after the reset, enough for the candidate's 34.

    The random spread after the reset (this run draws 154 s) is cut to the 2 min the job leaves
    over, so that the candidate still fits when it is dispatched.
    """
    s = job_scenario(coordinator_yaml("96"))
    short_quota(s)
    result = run(s)
    assert result.exit_code == 0, result.log
    [dispatched] = dispatch_posts(s.world)
    assert dispatched >= RESET
    assert dispatched + NEEDS_MINUTES * 60 <= 96 * 60


def test_the_job_timeout_counts_from_the_jobs_started_at():
    """The job started 10 minutes before the step: timeout 100 leaves 30 min after the reset."""
    s = job_scenario(coordinator_yaml("100"), job_started=-600.0)
    short_quota(s)
    result = run(s)
    refused_for_the_job(result, s, "timeout-minutes 100 of job `runner-check`")
    assert re.search(
        r"The coordinator job ends in 90 min \(.*started at \d\d:\d\d:\d\dZ\)", result.log
    )


def test_a_runner_clock_behind_githubs_does_not_move_the_jobs_end_later():
    """Issue 44, item 7: GitHub says the job started 10 min after this runner's clock reads now.

    The job has run at least as long as this step (begun at 2 min on the fake clock): timeout 90
    ends it in 90 min, not in 100, and after the reset 30 min are left for a candidate that
    needs 34.
    """
    s = job_scenario(coordinator_yaml("90"), job_started=120.0 + 600.0)
    s.clock.sleep(120.0)
    short_quota(s)
    result = run(s)
    assert result.exit_code == 1, result.log
    assert dispatch_posts(s.world) == []
    [error] = [line for line in result.log.splitlines() if line.startswith("::error")]
    assert "would leave the coordinator job 30 min (timeout-minutes 90 of job" in error
    assert re.search(
        r"The coordinator job ends in 90 min \(.*started at \d\d:\d\d:\d\dZ; this runner's clock "
        r"is at least 600 s behind GitHub's, so the job is counted as begun 0 s ago\)",
        result.log,
    )


def test_a_second_of_difference_is_said():
    """GitHub's times are whole seconds: one second is the least difference there is to say."""
    s = job_scenario(coordinator_yaml("90"), job_started=120.0 + 1.0)
    s.clock.sleep(120.0)
    result = run(s)
    assert "this runner's clock is at least 1 s behind GitHub's" in result.log


def test_a_runner_clock_far_ahead_counts_the_job_no_older_than_its_timeout():
    """GitHub's start, 200 min ago by this runner's clock, with timeout 100: the clock is ahead."""
    s = job_scenario(coordinator_yaml("100"), job_started=-200 * 60.0)
    result = run(s)
    assert re.search(
        r"The coordinator job ends in 0 min \(.*started at \d\d:\d\d:\d\dZ; this runner's clock "
        r"is at least 6000 s ahead of GitHub's, so the job is counted as begun 6000 s ago\)",
        result.log,
    )


def test_a_job_not_found_by_its_runner_counts_from_the_step_less_five_minutes():
    """RUNNER_NAME names no job of the run: the start is the step's less 5 min, 95 min from here."""
    s = job_scenario(coordinator_yaml("98"))
    short_quota(s)
    result = run(s, RUNNER_NAME="some other runner")
    refused_for_the_job(result, s, "timeout-minutes 98 of job `runner-check`")
    assert "counted from this step's start less 5 min" in result.log
    # with its own runner named, the same job fits (98 - 60 = 38 min left)
    s = job_scenario(coordinator_yaml("98"))
    short_quota(s)
    assert run(s).exit_code == 0


def test_a_smaller_step_level_timeout_on_its_own_step_wins():
    s = job_scenario(coordinator_yaml("300", step_timeout="90"))
    short_quota(s)
    refused_for_the_job(run(s), s, "timeout-minutes 90 of its step in job `runner-check`")


def test_a_larger_step_level_timeout_changes_nothing():
    s = job_scenario(coordinator_yaml("90", step_timeout="300"))
    short_quota(s)
    refused_for_the_job(run(s), s, "timeout-minutes 90 of job `runner-check`")


def test_without_timeout_minutes_the_job_has_githubs_default_of_360():
    """No timeout-minutes: 360 from the job's start, 5 h 10 min ago: 50 min left, 0 after the wait."""
    s = job_scenario(coordinator_yaml(None), job_started=-310 * 60.0)
    short_quota(s)
    refused_for_the_job(run(s), s, "timeout-minutes 360 of job `runner-check` (the default)")


def test_the_file_is_read_at_github_workflow_sha_not_at_the_moved_ref():
    """The run's commit says 90; main has since moved to a commit saying 360: 90 counts."""
    s = job_scenario(coordinator_yaml("90"))
    environ = job_environ(s.world)  # GITHUB_WORKFLOW_SHA: the commit the run started from
    s.world.move_ref("heads/main")
    s.world.add_workflow("runner-check.yml", "main", content=coordinator_yaml("360"))
    short_quota(s)
    refused_for_the_job(s.run(extra_environ=environ), s, "timeout-minutes 90 of job")


def test_two_steps_using_the_action_with_different_timeouts_count_only_the_jobs():
    second = "      - uses: acme/runner-queue-fallback@v1\n        timeout-minutes: 30\n"
    s = job_scenario(coordinator_yaml("90", step_timeout="200", extra_step=second))
    short_quota(s)
    result = run(s)
    refused_for_the_job(result, s, "timeout-minutes 90 of job `runner-check`")
    assert "2 steps of job `runner-check` use runner-queue-fallback by name" in result.log


def test_the_jobs_end_costs_two_requests_once_per_sequence():
    """The file and the run attempt's jobs, read once, even across a fallback."""
    s = Scenario().pools(FOREVER, [], FOREVER)
    s.world.add_workflow("runner-check.yml", "main", content=coordinator_yaml("200"))
    result = run(s)
    assert result.exit_code == 0, result.log
    assert len(dispatch_posts(s.world)) == 2
    assert reads_of(s, f"/contents/{COORDINATOR_FILE}") == 1
    assert reads_of(s, f"/actions/runs/{PARENT_RUN_ID}/attempts/1/jobs") == 1


@pytest.mark.found_by("mutation", issue=47)
def test_a_known_job_end_is_no_child_a_limit_before_the_dispatch_keeps_the_spec_rule():
    """Reading the job's end is the sequence's first fact; no child may exist yet, so with
    admission-timeout-minutes 0 a two-minute secondary limit on the source's read still ends it
    at once, as the spec says, instead of being waited out as for a child. (Nothing held the
    state's first `run_unseen`: started True, it made the client wait out that limit.)"""
    s = job_scenario(coordinator_yaml("300"), long_retry_after())
    s.inputs["admission-timeout-minutes"] = "0"
    result = run(s)
    assert result.exit_code == 1, result.log
    assert "timeout-minutes 300 of job `runner-check`" in result.log, "the job's end was read"
    assert dispatch_posts(s.world) == []
    assert s.clock.sleeps == [], "not waited out"
    assert "admission-timeout-minutes (0); no child was dispatched" in result.log


# -- a dispatch after a wait ------------------------------------------------------------------------


def test_a_fallback_after_an_admission_wait_is_not_dispatched_when_it_cannot_fit():
    """timeout 100: the wait leaves ~40 min, candidate 1 takes ~11 of them, candidate 2 needs 34."""
    s = Scenario().pools(FOREVER, [], FOREVER)
    s.world.add_workflow("runner-check.yml", "main", content=coordinator_yaml("100"))
    short_quota(s)
    result = run(s)
    assert result.exit_code == 1, result.log
    assert len(dispatch_posts(s.world)) == 1, "candidate 2 is not dispatched"
    [error] = [line for line in result.log.splitlines() if line.startswith("::error")]
    assert "min of waiting for the API quota" in error
    assert "timeout-minutes 100 of job `runner-check`" in error
    assert f"candidate 2/3 (nv-cpu-general / linux-amd64-cpu8) needs {NEEDS_MINUTES} min" in error
    assert "no child was dispatched" in error


def test_a_quota_spent_at_the_start_is_waited_out_and_the_jobs_end_read_after_the_reset():
    """Every read is refused: the admission wait comes first, then the read, then the refusal."""
    s = job_scenario(coordinator_yaml("90"))
    s.world.spend_quota(s.world.quota)
    result = run(s)
    assert result.exit_code == 1, result.log
    assert dispatch_posts(s.world) == []
    [read] = [e for e in s.world.ledger if e.path.endswith(COORDINATOR_FILE) and e.status == 200]
    assert read.time >= RESET
    [error] = [line for line in result.log.splitlines() if line.startswith("::error")]
    assert "min of waiting for the API quota, the coordinator job ends in" in error
    assert "timeout-minutes 90 of job `runner-check`" in error
    assert f"needs {NEEDS_MINUTES} min" in error


def test_without_an_added_wait_a_short_job_is_not_refused_at_run_time():
    """timeout-minutes 20 is below plan's minimum (lint's RQF203), but nothing waited: as the spec."""
    s = job_scenario(coordinator_yaml("20"))
    result = run(s)
    assert result.exit_code == 0, result.log
    assert len(dispatch_posts(s.world)) == 1


# -- a value that cannot be read ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "environ", "said"),
    [
        (coordinator_yaml("${{ inputs.minutes }}"), {}, "is an expression"),
        (coordinator_yaml("90", step_timeout="${{ matrix.t }}"), {}, "is an expression"),
        (coordinator_yaml("90", job_key="call"), {}, "has no job `runner-check` (GITHUB_JOB)"),
        (
            "on: workflow_dispatch\njobs:\n  runner-check:\n    uses: ./.github/workflows/x.yml\n",
            {},
            "calls a reusable workflow",
        ),
        (None, {}, "-> 404"),
        ("jobs: [a, b\n", {}, "is not a readable workflow"),
        (coordinator_yaml("1.5"), {}, "is '1.5', not a whole number of minutes"),
        (coordinator_yaml("90"), {"GITHUB_JOB": ""}, "GITHUB_JOB is not set"),
        (
            coordinator_yaml("90"),
            {"GITHUB_WORKFLOW_REF": "octo-org/octo-repo/runner-check.yml"},
            "names no workflow file",
        ),
        (coordinator_yaml("90"), {"GITHUB_WORKFLOW_SHA": "main"}, "'main' is not a commit SHA"),
        (coordinator_yaml("90"), {"GITHUB_WORKFLOW_REF": ""}, "GITHUB_WORKFLOW_REF is not set"),
        (
            coordinator_yaml("90"),
            {
                "GITHUB_WORKFLOW_REF": "other/repo/.github/workflows/runner-check.yml@refs/heads/main"
            },
            "the workflow file is in other/repo",
        ),
    ],
    ids=[
        "expression",
        "step-expression",
        "no-such-job",
        "reusable",
        "404",
        "not-a-workflow",
        "not-whole",
        "no-job-key",
        "no-file-in-ref",
        "not-a-sha",
        "unset",
        "other-repo",
    ],
)
def test_an_unreadable_timeout_is_said_once_and_the_sequence_goes_on_as_before(
    content, environ, said
):
    """The admission wait is taken as without this check; the child is dispatched after it."""
    s = job_scenario(content)
    short_quota(s)
    result = run(s, **environ)
    assert result.exit_code == 0, result.log
    notes = [
        line for line in result.log.splitlines() if "timeout-minutes could not be read" in line
    ]
    assert len(notes) == 1, notes
    assert said in notes[0]
    assert dispatch_posts(s.world)[0] >= RESET


# -- which timeout ends the job, as of when -----------------------------------------------------


#: The coordinator's workflow file, as the contents API path ends.
FILE_READ = rf"/contents/{re.escape(COORDINATOR_FILE)}$"


#: The run attempt's job listing, which gives the job's start.
JOBS_READ = rf"/actions/runs/{PARENT_RUN_ID}/attempts/1/jobs$"


def job_end_line(result: SimulationRun) -> tuple[float, str]:
    """When the job's end was said, and the line that says it."""
    [said] = [(t, line) for t, line in result.log_lines if "The coordinator job ends in" in line]
    return said


@pytest.mark.found_by("mutation", issue=35)
@pytest.mark.parametrize(
    ("job", "step", "said"),
    [
        ("90", "89", "ends in 89 min (timeout-minutes 89 of its step in job `runner-check`, from"),
        ("300", "90", "ends in 90 min (timeout-minutes 90 of its step in job `runner-check`, from"),
        ("90", "90", "ends in 90 min (timeout-minutes 90 of job `runner-check`, started at"),
    ],
    ids=["a-minute-sooner", "much-sooner", "at-the-same-time"],
)
def test_the_steps_timeout_minutes_counts_from_the_steps_start_only_when_it_ends_sooner(
    job, step, said
):
    """Job and step start together here: a step timeout a minute under the job's ends the job
    then; one ending with the job's changes nothing (the job's is named)."""
    _, line = job_end_line(run(job_scenario(coordinator_yaml(job, step_timeout=step))))
    assert said in line


@pytest.mark.found_by("mutation", issue=35)
def test_two_steps_using_the_action_with_the_same_timeout_count_it():
    same = "      - uses: acme/runner-queue-fallback@v1\n        timeout-minutes: 90\n"
    s = job_scenario(coordinator_yaml("300", step_timeout="90", extra_step=same))
    _, line = job_end_line(run(s))
    assert "ends in 90 min (timeout-minutes 90 of its step in job `runner-check`" in line


@pytest.mark.found_by("mutation", issue=35)
def test_the_time_left_is_said_as_of_the_read_after_a_wait_at_the_start():
    """The quota is spent at the start: the file is read after the reset, and the minutes left
    are those from that read to the job's end (90 min from the job's start at 0)."""
    s = job_scenario(coordinator_yaml("90"))
    s.world.spend_quota(s.world.quota)
    read_at, line = job_end_line(run(s))
    assert read_at >= RESET
    assert f"ends in {(90 * 60 - read_at) / 60:.0f} min (timeout-minutes 90 of job" in line


# -- the waits it counts, the timeout it advises, a candidate that fits to the second -----------


@pytest.mark.found_by("mutation", issue=35)
def test_after_a_quota_pause_alone_the_refusal_counts_the_minutes_paused():
    """No admission wait: the quota is spent during candidate 1's queue, and the pause until its
    reset is the only wait; candidate 2 then cannot fit, and the error counts that pause."""
    s = Scenario().pools(FOREVER, [], FOREVER)
    s.world.add_workflow("runner-check.yml", "main", content=coordinator_yaml("80"))
    spend_all_at(s, 300.0)
    result = run(s)
    assert result.exit_code == 1, result.log
    assert len(dispatch_posts(s.world)) == 1, "candidate 2 is not dispatched"
    [error] = [line for line in result.log.splitlines() if line.startswith("::error")]
    paused = re.search(r"after (\d+) min of waiting for the API quota", error)
    assert paused is not None, error
    waited = re.search(r"(\d+)s waited for a spent quota", result.log)
    assert waited is not None, "the pause is counted"
    assert int(paused[1]) == round(int(waited[1]) / 60) > 50


@pytest.mark.found_by("mutation", issue=35)
def test_the_advised_timeout_is_plans_minimum_plus_its_possible_extra():
    s = job_scenario(coordinator_yaml("90"))
    short_quota(s)
    result = run(s)
    environ = {env_name(k): v for k, v in s.inputs.items()}
    plan = make_plan(read_pool_settings(environ, load_profiles()))
    advised = plan.timeout_minutes + math.ceil(plan.quota_extra_minutes)
    assert plan.quota_extra_minutes > 0
    assert (
        f"timeout-minutes of at least {advised} (`plan`'s minimum {plan.timeout_minutes} plus its "
        "possible extra)"
    ) in result.log


@pytest.mark.found_by("mutation", issue=35)
@pytest.mark.parametrize(
    ("seconds", "counts"), [(0.0, False), (0.5, True), (1.0, True)], ids=["none", "half", "one"]
)
@pytest.mark.parametrize("kind", ["admission", "quota"])
def test_any_added_wait_however_short_makes_the_job_time_count(kind, seconds, counts):
    """An admission wait or a wait for a quota's reset (half a second when the reset is that
    close) is one the specification's sizing leaves out."""
    result = SimpleNamespace(admission_waited=seconds if kind == "admission" else 0.0)
    stats = SimpleNamespace(quota_waited=seconds if kind == "quota" else 0.0)
    seq = SimpleNamespace(result=result, client=SimpleNamespace(stats=stats))
    assert job_time.waited(cast("SequenceState", seq)) is counts


@pytest.mark.found_by("mutation", issue=35)
def test_a_candidate_that_fits_the_job_to_the_second_after_the_reset_is_waited_for():
    """timeout-minutes 95 from a job started 59 s before the step: after the reset (3,601 s with
    its margin) exactly the 34 minutes the candidate needs are left, so it is dispatched."""
    s = job_scenario(coordinator_yaml("95"), job_started=-59.0)
    short_quota(s)
    result = run(s)
    assert result.exit_code == 0, result.log
    assert len(dispatch_posts(s.world)) == 1
    s = job_scenario(coordinator_yaml("95"), job_started=-60.0)
    short_quota(s)
    assert run(s).exit_code == 1, "a second less, and it is not"
    assert dispatch_posts(s.world) == []


# -- reads that wait, fail or come without content ----------------------------------------------


#: A spent quota resetting in 10 minutes: too far for the client's retries, so the read ends in
#: RateLimited (basis "reset"), and the sequence waits for the reset before reading again.
FAR_RESET = 600


@pytest.mark.found_by("mutation", issue=35)
def test_a_spent_quota_on_the_files_read_is_waited_out_and_the_file_read_again():
    spent = Fault(
        "primary_rate_limit", method="GET", path=FILE_READ, count=1, retry_after=FAR_RESET
    )
    s = job_scenario(coordinator_yaml("90"), spent)
    result = run(s)
    assert result.exit_code == 0, result.log
    reads = [e.time for e in s.world.ledger if re.search(FILE_READ, e.path)]
    assert len(reads) == 2
    assert reads[1] >= FAR_RESET
    _, line = job_end_line(result)
    assert "timeout-minutes 90 of job `runner-check`, started at" in line
    assert "could not be read" not in result.log


@pytest.mark.found_by("mutation", issue=35)
def test_a_spent_quota_on_the_jobs_listing_is_waited_out_and_the_jobs_start_read_again():
    spent = Fault(
        "primary_rate_limit", method="GET", path=JOBS_READ, count=1, retry_after=FAR_RESET
    )
    s = job_scenario(coordinator_yaml("90"), spent)
    result = run(s)
    assert result.exit_code == 0, result.log
    reads = [e.time for e in s.world.ledger if re.search(JOBS_READ, e.path)]
    assert len(reads) == 2
    assert reads[1] >= FAR_RESET
    _, line = job_end_line(result)
    assert "timeout-minutes 90 of job `runner-check`, started at" in line


@pytest.mark.found_by("mutation", issue=35)
def test_a_refused_jobs_listing_is_said_and_the_start_counted_from_the_step():
    s = job_scenario(coordinator_yaml("90"), Fault("forbidden", method="GET", path=JOBS_READ))
    result = run(s)
    assert result.exit_code == 0, result.log
    assert f"Reading the jobs of run {PARENT_RUN_ID}: GET " in result.log
    _, line = job_end_line(result)
    assert (
        "ends in 85 min (timeout-minutes 90 of job `runner-check`, counted from this step's" in line
    )


@pytest.mark.found_by("mutation", issue=35)
def test_without_runner_name_the_start_is_counted_from_the_step_without_reading_the_jobs():
    s = job_scenario(coordinator_yaml("90"))
    result = run(s, RUNNER_NAME="")
    assert result.exit_code == 0, result.log
    assert reads_of(s, f"/actions/runs/{PARENT_RUN_ID}/attempts/1/jobs") == 0
    _, line = job_end_line(result)
    assert (
        "ends in 85 min (timeout-minutes 90 of job `runner-check`, counted from this step's" in line
    )


def without_content(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
    """GitHub's reply for a file of 1 to 100 MB: its metadata, no content."""
    body = json_body(reply)
    if method != "GET" or not re.search(FILE_READ, path) or not isinstance(body, dict):
        return None
    return with_json(reply, {**body, "encoding": "none", "content": ""})


@pytest.mark.found_by("mutation", issue=35)
@pytest.mark.parametrize(
    ("fault", "said"),
    [
        (
            Fault("secondary_rate_limit", method="GET", path=FILE_READ),
            "reading " + COORDINATOR_FILE,
        ),
        (Fault("connection", method="GET", path=FILE_READ), "reading " + COORDINATOR_FILE),
        (None, "came without its content (larger than 1 MB?)"),
    ],
    ids=["secondary-limit", "no-reply", "no-content"],
)
def test_a_file_that_cannot_be_read_is_said_once_and_the_sequence_goes_on(fault, said):
    s = job_scenario(coordinator_yaml("90"), *([fault] if fault else []))
    if fault is None:
        Tamper(s.world, [without_content]).install()
    result = run(s)
    assert result.exit_code == 0, result.log
    notes = [
        line for line in result.log.splitlines() if "timeout-minutes could not be read" in line
    ]
    assert len(notes) == 1, notes
    assert said in notes[0]
