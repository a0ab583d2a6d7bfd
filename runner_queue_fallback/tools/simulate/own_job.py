"""The coordinator's own job in a simulation: its workflow file, with the timeout `plan` advises.

On a runner the coordinator reads when its job ends (`action/sequence/job_time.py`): the job's
`timeout-minutes` in the run's workflow file, which the runner names (GITHUB_WORKFLOW_REF,
GITHUB_WORKFLOW_SHA, GITHUB_JOB), and the job's start from the job on RUNNER_NAME. `simulate`
gives its coordinators what a runner would: the parent run's workflow file, whose job has the
`timeout-minutes` `plan` advises for their inputs (its minimum and the quota's possible extra, as
the examples set it), and the same four variables (`steps.job_environ`). So the coordinator runs as
on a runner, and says nothing that only a missing runner would make it say.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from runner_queue_fallback.core.errors import RQFError
from runner_queue_fallback.core.inputs import env_name, read_pool_settings
from runner_queue_fallback.core.profiles import load_profiles
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.workflow.plan import make_plan

__all__ = ["add_own_workflow", "advised_timeout", "coordinator_workflow"]


def coordinator_workflow(timeout_minutes: int, jobs: Sequence[str] = ("runner-check",)) -> str:
    """A coordinator's own workflow file: its jobs, each with `timeout-minutes` and our step."""
    lines = ["name: Runner check", "on: pull_request", "jobs:"]
    for job in jobs:
        lines += [
            f"  {job}:",
            "    runs-on: ubuntu-latest",
            f"    timeout-minutes: {timeout_minutes}",
        ]
        lines += ["    steps:", "      - uses: NVIDIA/runner-queue-fallback@v1"]
    return "\n".join(lines) + "\n"


def advised_timeout(inputs: Mapping[str, str]) -> int | None:
    """The `timeout-minutes` `plan` advises for a coordinator's inputs; None if they are invalid.

    Invalid inputs are the coordinator's to report, as it does before reading its job.
    """
    try:
        settings = read_pool_settings({env_name(k): v for k, v in inputs.items()}, load_profiles())
    except RQFError:
        return None
    return make_plan(settings).advised_timeout_minutes


def add_own_workflow(
    world: FakeGitHub, parents: Sequence[int], inputs: Sequence[Mapping[str, str]]
) -> int | None:
    """Write the parent runs' workflow file; the `timeout-minutes` it gives, or None if none.

    The coordinators of one scenario are one job of a matrix: one file, one job, the largest
    timeout any of them is advised. Nothing is written over a file the scenario has itself, nor
    for invalid inputs (the coordinator stops at them before it reads its job).
    """
    advised = [advised_timeout(given) for given in inputs]
    if not advised or None in advised:
        return None
    timeout = max(minutes for minutes in advised if minutes is not None)
    jobs: dict[str, set[str]] = {}  # workflow file: the job keys of the parents that run it
    for parent_run_id in parents:
        parent = world.runs[parent_run_id]
        assert parent.job is not None  # noqa: S101  # every parent run has its own job
        jobs.setdefault(parent.workflow_file, set()).add(parent.job.name)
    branch = world.default_branch
    files = world.commits[world.refs[f"heads/{branch}"]]
    if any(f".github/workflows/{name}" in files for name in jobs):
        return None
    for name, keys in jobs.items():
        world.add_workflow(name, branch, content=coordinator_workflow(timeout, sorted(keys)))
    return timeout
