"""The coordinator's job time: rules the fixed mutation runner found held by no test (issue 35).

Each test states one rule of `action/sequence/job_time.py` and fails when it breaks: which timeout
ends the job (the step's only when sooner), the minutes left as of the read, the waits a refusal
counts, the timeout it advises, and what a spent quota, a refused or failed read and a file
without content do. Like `tests/test_job_time.py`, everything but the `waited` rule runs the real
coordinator (`cli.main`) against the fake GitHub.
"""

from __future__ import annotations

import math
import re
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

import pytest

from runner_queue_fallback.action.sequence import job_time
from runner_queue_fallback.core.inputs import env_name, read_pool_settings
from runner_queue_fallback.core.profiles import load_profiles
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.plan import make_plan
from runner_queue_fallback.tools.simulate.steps import PARENT_RUN_ID, SimulationRun
from tests.invariants import dispatch_posts
from tests.outside import Tamper, json_body, with_json
from tests.test_coordinator import FOREVER, Scenario
from tests.test_job_time import (
    COORDINATOR_FILE,
    RESET,
    coordinator_yaml,
    job_scenario,
    reads_of,
    run,
    short_quota,
)
from tests.test_quota import spend_all_at

if TYPE_CHECKING:
    from runner_queue_fallback.action.sequence.context import Sequence

#: The coordinator's workflow file, as the contents API path ends.
FILE_READ = rf"/contents/{re.escape(COORDINATOR_FILE)}$"
#: The run attempt's job listing, which gives the job's start.
JOBS_READ = rf"/actions/runs/{PARENT_RUN_ID}/attempts/1/jobs$"


def job_end_line(result: SimulationRun) -> tuple[float, str]:
    """When the job's end was said, and the line that says it."""
    [said] = [(t, line) for t, line in result.log_lines if "The coordinator job ends in" in line]
    return said


def faulted(content: str, *faults: Fault) -> Scenario:
    """`job_scenario(content)` with `faults` planned in its fake GitHub."""
    s = Scenario(faults=faults).pools([], FOREVER, FOREVER)
    s.world.add_parent_run(PARENT_RUN_ID)
    s.world.add_workflow("runner-check.yml", "main", content=content)
    return s


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


def test_two_steps_using_the_action_with_the_same_timeout_count_it():
    same = "      - uses: acme/runner-queue-fallback@v1\n        timeout-minutes: 90\n"
    s = job_scenario(coordinator_yaml("300", step_timeout="90", extra_step=same))
    _, line = job_end_line(run(s))
    assert "ends in 90 min (timeout-minutes 90 of its step in job `runner-check`" in line


def test_the_time_left_is_said_as_of_the_read_after_a_wait_at_the_start():
    """The quota is spent at the start: the file is read after the reset, and the minutes left
    are those from that read to the job's end (90 min from the job's start at 0)."""
    s = job_scenario(coordinator_yaml("90"))
    s.world.spend_quota(s.world.quota)
    read_at, line = job_end_line(run(s))
    assert read_at >= RESET
    assert f"ends in {(90 * 60 - read_at) / 60:.0f} min (timeout-minutes 90 of job" in line


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
    assert job_time.waited(cast("Sequence", seq)) is counts


#: A spent quota resetting in 10 minutes: too far for the client's retries, so the read ends in
#: RateLimited (basis "reset"), and the sequence waits for the reset before reading again.
FAR_RESET = 600


def test_a_spent_quota_on_the_files_read_is_waited_out_and_the_file_read_again():
    spent = Fault(
        "primary_rate_limit", method="GET", path=FILE_READ, count=1, retry_after=FAR_RESET
    )
    s = faulted(coordinator_yaml("90"), spent)
    result = run(s)
    assert result.exit_code == 0, result.log
    reads = [e.time for e in s.world.ledger if re.search(FILE_READ, e.path)]
    assert len(reads) == 2
    assert reads[1] >= FAR_RESET
    _, line = job_end_line(result)
    assert "timeout-minutes 90 of job `runner-check`, started at" in line
    assert "could not be read" not in result.log


def test_a_spent_quota_on_the_jobs_listing_is_waited_out_and_the_jobs_start_read_again():
    spent = Fault(
        "primary_rate_limit", method="GET", path=JOBS_READ, count=1, retry_after=FAR_RESET
    )
    s = faulted(coordinator_yaml("90"), spent)
    result = run(s)
    assert result.exit_code == 0, result.log
    reads = [e.time for e in s.world.ledger if re.search(JOBS_READ, e.path)]
    assert len(reads) == 2
    assert reads[1] >= FAR_RESET
    _, line = job_end_line(result)
    assert "timeout-minutes 90 of job `runner-check`, started at" in line


def test_a_refused_jobs_listing_is_said_and_the_start_counted_from_the_step():
    s = faulted(coordinator_yaml("90"), Fault("forbidden", method="GET", path=JOBS_READ))
    result = run(s)
    assert result.exit_code == 0, result.log
    assert f"Reading the jobs of run {PARENT_RUN_ID}: GET " in result.log
    _, line = job_end_line(result)
    assert (
        "ends in 85 min (timeout-minutes 90 of job `runner-check`, counted from this step's" in line
    )


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
    s = faulted(coordinator_yaml("90"), *([fault] if fault else []))
    if fault is None:
        Tamper(s.world, [without_content]).install()
    result = run(s)
    assert result.exit_code == 0, result.log
    notes = [
        line for line in result.log.splitlines() if "timeout-minutes could not be read" in line
    ]
    assert len(notes) == 1, notes
    assert said in notes[0]
