"""The GitHub REST API as the action uses it: one client, typed replies, the retry policy."""

from runner_queue_fallback.github.client import API_VERSION, GitHubClient, RequestStats
from runner_queue_fallback.github.models import (
    CancelOutcome,
    DispatchResult,
    Job,
    Step,
    WorkflowRun,
)

__all__ = [
    "API_VERSION",
    "CancelOutcome",
    "DispatchResult",
    "GitHubClient",
    "Job",
    "RequestStats",
    "Step",
    "WorkflowRun",
]
