"""The names of the two actions' inputs, in one light module.

`inputs` (with pydantic) validates them; the composition root lists them in `--help` without
loading pydantic. A test compares both tuples with `action.yml` and the guard manifests.
"""

from __future__ import annotations

__all__ = ["COORDINATOR_INPUTS", "GUARD_INPUTS"]

#: Every coordinator input, as spelled in action.yml.
COORDINATOR_INPUTS = (
    "workflow",
    "workflow-ref",
    "source-ref",
    "source-sha",
    "runner-type",
    "queue-policy",
    "queue-timeout-minutes",
    "execution-timeout-minutes",
    "admission-timeout-minutes",
    "runners",
    "hosted-last-resort",
    "workload",
    "source-policy",
    "api-version",
    "token",
)
#: Every guard input, as spelled in guard/action.yml: five dispatched values, the coordinator's
#: workflow file name(s) and ref, the API version and the token.
GUARD_INPUTS = (
    "request-id",
    "parent-run-id",
    "parent-run-attempt",
    "source-ref",
    "source-sha",
    "coordinator-workflow",
    "coordinator-ref",
    "api-version",
    "token",
)
