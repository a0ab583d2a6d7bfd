"""Our reply models read GitHub's own 2026-03-10 shapes, checked against githubkit's schema."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from githubkit_schemas.v2026_03_10 import models as schema
from pydantic import BaseModel, ValidationError

from runner_queue_fallback.github.models import (
    CancelOutcome,
    ContentFile,
    DispatchResult,
    GitRef,
    Job,
    JobList,
    WorkflowRun,
    WorkflowRunList,
)
from tests import github_payloads as payloads


def strictly_valid(model: type[BaseModel], payload: dict[str, Any]) -> None:
    """Validate against GitHub's schema: no coercion, no unknown keys."""
    model.model_validate_json(json.dumps(payload), strict=True, extra="forbid")


PAYLOADS = [
    pytest.param(schema.WorkflowRun, payloads.workflow_run(), id="workflow-run"),
    pytest.param(
        schema.WorkflowRun,
        payloads.workflow_run(status="completed", conclusion="cancelled", run_attempt=2),
        id="workflow-run-cancelled",
    ),
    pytest.param(
        schema.ReposOwnerRepoActionsRunsRunIdAttemptsAttemptNumberJobsGetResponse200,
        payloads.job_list(payloads.job()),
        id="job-list-queued",
    ),
    pytest.param(
        schema.ReposOwnerRepoActionsRunsRunIdAttemptsAttemptNumberJobsGetResponse200,
        payloads.job_list(
            payloads.job(
                status="in_progress",
                runner_id=17,
                runner_name="linux-amd64-cpu16-abc",
                runner_group_name="nv-cpu-general",
                steps=[payloads.step(), payloads.step(2, "Guard", "in_progress")],
            )
        ),
        id="job-list-allocated",
    ),
    pytest.param(schema.Job, payloads.job(runner_id=0, runner_name=""), id="job-runner-zero"),
    pytest.param(schema.WorkflowDispatchResponse, payloads.dispatch_response(), id="dispatch"),
    pytest.param(schema.GitRef, payloads.git_ref(), id="git-ref"),
    pytest.param(
        schema.GitRef, payloads.git_ref("refs/tags/v1", object_type="tag"), id="git-ref-tag"
    ),
    pytest.param(schema.ContentFile, payloads.content_file(), id="content-file"),
    pytest.param(
        schema.ReposOwnerRepoActionsWorkflowsWorkflowIdRunsGetResponse200,
        payloads.workflow_run_list(payloads.workflow_run(), payloads.workflow_run(43)),
        id="workflow-run-list",
    ),
]


@pytest.mark.parametrize(("model", "payload"), PAYLOADS)
def test_payload_matches_githubs_schema(model: type[BaseModel], payload: dict[str, Any]) -> None:
    """Every payload the fakes serve validates strictly against GitHub's generated model."""
    strictly_valid(model, payload)


def test_strict_validation_catches_drift() -> None:
    """The strict check really rejects coerced types and unknown keys."""
    with pytest.raises(ValidationError):
        strictly_valid(schema.WorkflowDispatchResponse, {**payloads.dispatch_response(), "x": 1})
    with pytest.raises(ValidationError):
        strictly_valid(
            schema.WorkflowDispatchResponse,
            {**payloads.dispatch_response(), "workflow_run_id": "42"},
        )


def test_github_example_job_without_created_at_fails_its_schema() -> None:
    """GitHub's documented job example lacks created_at; our builder must not copy that."""
    example = payloads.job()
    del example["created_at"]
    with pytest.raises(ValidationError):
        strictly_valid(schema.Job, example)


def test_workflow_run_fields() -> None:
    """A workflow run gives the identity fields the coordinator compares."""
    run = WorkflowRun.model_validate_json(
        json.dumps(payloads.workflow_run(42, display_title="rqf-x", run_attempt=2))
    )
    assert run.id == 42
    assert run.name == "Runner worker"
    assert run.display_title == "rqf-x"
    assert run.event == "workflow_dispatch"
    assert (run.status, run.conclusion) == ("queued", None)
    assert run.head_sha == payloads.SHA
    assert run.head_branch == "main"
    assert run.run_attempt == 2
    assert run.html_url.endswith("/actions/runs/42")
    assert run.created_at == datetime(2026, 11, 2, 9, 0, 5, tzinfo=UTC)
    assert run.updated_at.tzinfo is not None
    assert run.workflow_file_path == ".github/workflows/runner-worker.yml"


@pytest.mark.parametrize(
    "path",
    [
        ".github/workflows/runner-worker.yml",
        ".github/workflows/runner-worker.yml@main",
        ".github/workflows/runner-worker.yml@refs/heads/main",
    ],
)
def test_workflow_file_path_strips_ref_suffix(path: str) -> None:
    """GitHub shows the path with or without an @ref suffix; both mean the same file."""
    run = WorkflowRun.model_validate(payloads.workflow_run(path=path))
    assert run.workflow_file_path == ".github/workflows/runner-worker.yml"


def test_workflow_run_nullable_fields() -> None:
    """name, status, conclusion and head_branch may be null."""
    run = WorkflowRun.model_validate(
        payloads.workflow_run(name=None, status=None, head_branch=None)
    )
    assert (run.name, run.status, run.conclusion, run.head_branch) == (None, None, None, None)


def test_models_are_frozen() -> None:
    """A reply is an observation: it cannot be edited."""
    run = WorkflowRun.model_validate(payloads.workflow_run())
    with pytest.raises(ValidationError):
        run.status = "completed"  # type: ignore[misc]  # the point: frozen models refuse this


def test_job_list_fields() -> None:
    """A job list gives the job, its labels, runner fields and steps."""
    jobs = JobList.model_validate_json(
        json.dumps(
            payloads.job_list(
                payloads.job(
                    7,
                    run_id=42,
                    run_attempt=2,
                    status="in_progress",
                    runner_id=17,
                    runner_name="cpu16-abc",
                    runner_group_name="nv-cpu-general",
                    steps=[payloads.step(1, "Set up job"), payloads.step(2, "Guard", "queued")],
                )
            )
        )
    ).jobs
    assert len(jobs) == 1
    job = jobs[0]
    assert (job.id, job.run_id, job.run_attempt, job.name) == (7, 42, 2, "worker")
    assert (job.status, job.conclusion) == ("in_progress", None)
    assert job.labels == ["linux-amd64-cpu16"]
    assert (job.runner_id, job.runner_name, job.runner_group_name) == (
        17,
        "cpu16-abc",
        "nv-cpu-general",
    )
    assert job.html_url is not None
    assert job.html_url.endswith("/job/7")
    assert job.started_at == datetime(2026, 11, 2, 9, 0, 5, tzinfo=UTC)
    assert [(s.number, s.name, s.status, s.conclusion) for s in job.steps] == [
        (1, "Set up job", "completed", "success"),
        (2, "Guard", "queued", None),
    ]
    assert job.has_runner


@pytest.mark.parametrize(
    ("runner_id", "runner_name", "assigned"),
    [
        pytest.param(None, None, False, id="null"),
        pytest.param(0, "", False, id="zero-and-empty"),
        pytest.param(0, None, False, id="zero"),
        pytest.param(None, "", False, id="empty-name"),
        pytest.param(17, "cpu16-abc", True, id="assigned"),
        pytest.param(17, None, True, id="id-only"),
        pytest.param(None, "cpu16-abc", True, id="name-only"),
    ],
)
def test_job_has_runner(runner_id: int | None, runner_name: str | None, assigned: bool) -> None:
    """Null, 0 and "" all mean no runner was assigned; any real id or name means one was."""
    job = Job.model_validate(payloads.job(runner_id=runner_id, runner_name=runner_name))
    assert job.has_runner is assigned


def test_job_without_steps_or_attempt() -> None:
    """steps and run_attempt are optional in GitHub's schema."""
    data = payloads.job()
    del data["steps"], data["run_attempt"]
    job = Job.model_validate(data)
    assert job.steps == []
    assert job.run_attempt is None


def test_dispatch_result_fields() -> None:
    """The dispatch reply gives the new run's id and both links."""
    result = DispatchResult.model_validate_json(json.dumps(payloads.dispatch_response(99)))
    assert result.workflow_run_id == 99
    assert result.run_url == f"{payloads.API}/repos/{payloads.REPOSITORY}/actions/runs/99"
    assert result.html_url == f"{payloads.WEB}/{payloads.REPOSITORY}/actions/runs/99"


def test_git_ref_and_content_file_fields() -> None:
    """A git ref gives its object's type and SHA; a content file gives its blob SHA."""
    ref = GitRef.model_validate_json(
        json.dumps(payloads.git_ref("refs/tags/v1", payloads.OTHER_SHA, "tag"))
    )
    assert (ref.ref, ref.object.type, ref.object.sha) == ("refs/tags/v1", "tag", payloads.OTHER_SHA)
    content = ContentFile.model_validate_json(json.dumps(payloads.content_file(sha="e" * 40)))
    assert (content.type, content.sha) == ("file", "e" * 40)


def test_workflow_run_list_fields() -> None:
    """A run list parses every run."""
    runs = WorkflowRunList.model_validate_json(
        json.dumps(payloads.workflow_run_list(payloads.workflow_run(1), payloads.workflow_run(2)))
    )
    assert runs.total_count == 2
    assert [run.id for run in runs.workflow_runs] == [1, 2]


def test_cancel_outcomes() -> None:
    """Cancel has exactly two non-error outcomes (a 409 for a run not completed is an error)."""
    assert {outcome.name for outcome in CancelOutcome} == {"ACCEPTED", "ALREADY_COMPLETED"}
