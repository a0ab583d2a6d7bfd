"""Reading a child run: identity, allocation evidence, and the proof that nothing ran."""

from __future__ import annotations

from typing import Any

import pytest

from runner_queue_fallback.action.observe import Expected, Observation, job_mismatches
from runner_queue_fallback.github.models import Job, WorkflowRun
from tests.github_payloads import SHA, job, step, workflow_run


def observation(run: dict[str, object], *jobs: dict[str, object]) -> Observation:
    return Observation(WorkflowRun.model_validate(run), [Job.model_validate(j) for j in jobs])


def test_a_cancelled_run_without_its_job_is_no_proof():
    """Spec: run and job must both be completed/cancelled: a run alone authorises no fallback."""
    over = workflow_run(status="completed", conclusion="cancelled")
    assert not observation(over).cancelled_cleanly
    assert observation(over, job(status="completed", conclusion="cancelled")).cancelled_cleanly


@pytest.mark.parametrize(
    "evidence",
    [
        {"runner_id": 7, "runner_name": "linux-amd64-cpu8-001"},
        {"runner_name": "linux-amd64-cpu8-001"},
        {"status": "in_progress"},
        {"steps": [{"name": "Guard", "status": "in_progress", "conclusion": None, "number": 1}]},
    ],
)
def test_any_runner_or_started_step_is_evidence(evidence: dict[str, Any]):
    """Once a runner or a step is seen there is no more fallback, even when cancelled."""
    seen = observation(
        workflow_run(status="completed", conclusion="cancelled"),
        job(**{"status": "completed", "conclusion": "cancelled", **evidence}),
    )
    assert seen.has_evidence
    assert not seen.cancelled_cleanly


def test_runner_id_zero_is_not_evidence():
    """A never-dispatched cancelled job has been seen with runner_id 0: that is unassigned."""
    seen = observation(
        workflow_run(status="completed", conclusion="cancelled"),
        job(status="completed", conclusion="cancelled", runner_id=0, runner_name=""),
    )
    assert not seen.has_evidence
    assert seen.cancelled_cleanly


def test_a_lagging_job_keeps_the_run_unfinished():
    """Delayed status updates are tolerated: the run says completed, the job is still queued."""
    seen = observation(workflow_run(status="completed", conclusion="cancelled"), job())
    assert not seen.finished
    assert not seen.cancelled_cleanly


def test_success_needs_both_run_and_worker_job():
    ok = job(status="completed", conclusion="success", runner_id=3, runner_name="r", name="worker")
    assert observation(workflow_run(status="completed", conclusion="success"), ok).succeeded
    skipped = job(status="completed", conclusion="skipped", name="worker")
    assert not observation(
        workflow_run(status="completed", conclusion="success"), skipped
    ).succeeded
    assert not observation(workflow_run(status="completed", conclusion="success")).succeeded


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("display_title", "someone-else", "run-name"),
        ("event", "push", "event"),
        ("head_sha", "f" * 40, "head_sha"),
        ("run_attempt", 2, "run_attempt"),
        ("path", ".github/workflows/other.yml", "workflow path"),
    ],
)
def test_identity_must_match_exactly(field: str, value: object, named: str):
    expected = Expected("rqf-1", ".github/workflows/runner-worker.yml", SHA)
    fields: dict[str, Any] = {"display_title": "rqf-1", field: value}
    run = WorkflowRun.model_validate(workflow_run(**fields))
    assert any(named in problem for problem in expected.run_mismatches(run))


def test_path_with_a_ref_suffix_is_the_same_workflow():
    expected = Expected("rqf-1", ".github/workflows/runner-worker.yml", SHA)
    run = WorkflowRun.model_validate(
        workflow_run(display_title="rqf-1", path=".github/workflows/runner-worker.yml@main")
    )
    assert expected.run_mismatches(run) == []


def test_exactly_one_job_named_worker():
    assert job_mismatches([Job.model_validate(job(name="worker"))]) == []
    assert job_mismatches([Job.model_validate(job(name="build"))])
    two = [Job.model_validate(job(1, name="worker")), Job.model_validate(job(2, name="worker"))]
    assert job_mismatches(two)


@pytest.mark.parametrize(
    ("title", "pending"),
    [
        ("", True),  # not filled in yet
        ("   ", True),
        ("Runner worker", True),  # still the workflow's name
        ("rqf-1", False),  # the expected run-name
        ("someone-else", False),  # filled in, and wrong: a mismatch at once
    ],
)
def test_a_run_name_is_pending_only_while_empty_or_still_the_workflows_name(
    title: str, pending: bool
):
    expected = Expected("rqf-1", ".github/workflows/runner-worker.yml", SHA)
    run = WorkflowRun.model_validate(workflow_run(display_title=title))
    assert expected.title_pending(run) is pending
    wrong = [p for p in expected.wrong_fields(run) if p.startswith("run-name")]
    assert bool(wrong) is (not pending and title != "rqf-1")


def test_a_run_name_equal_to_the_workflows_name_is_not_pending_when_expected():
    expected = Expected("Runner worker", ".github/workflows/runner-worker.yml", SHA)
    run = WorkflowRun.model_validate(workflow_run(display_title="Runner worker"))
    assert not expected.title_pending(run)
    assert expected.run_mismatches(run) == []


def test_the_dispatched_child_is_expected_on_its_first_attempt():
    expected = Expected("rqf-1", ".github/workflows/runner-worker.yml", SHA)
    first = WorkflowRun.model_validate(workflow_run(display_title="rqf-1", run_attempt=1))
    assert expected.run_mismatches(first) == []


def test_a_reading_counts_the_steps_that_started():
    steps = [step(1), step(2, "Guard", "in_progress"), step(3, "Workload", "queued")]
    seen = observation(
        workflow_run(status="in_progress"),
        job(status="in_progress", runner_id=3, runner_name="r-1", name="worker", steps=steps),
    )
    assert seen.describe().endswith("runner r-1, 2 step(s) started")
