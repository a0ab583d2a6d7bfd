"""The fake GitHub: an Actions model with runner pools, a scheduler, faults and a request ledger.

Product code, not a test helper: `simulate`, the benchmarks and the tests all use it. It describes
GitHub and never imports the client (`runner_queue_fallback.github`), `observe`, `coordinator`,
`guard` or `cleanup`; its JSON is checked against GitHub's official models instead.
"""

from runner_queue_fallback.fake_github.actions import (
    CHILD_INPUTS,
    DispatchRefused,
    WorkerContext,
    WorkerHook,
)
from runner_queue_fallback.fake_github.faults import FAULT_KINDS, Fault, FaultKind, FaultPlan
from runner_queue_fallback.fake_github.limits import SecondaryLimits, SecondaryMeter
from runner_queue_fallback.fake_github.model import (
    DEFAULT_TIMINGS,
    CancelRequest,
    FakeJob,
    FakeRun,
    Platform,
    Pool,
    PoolKey,
    RunHistory,
    Timings,
    Workload,
    pool_key,
)
from runner_queue_fallback.fake_github.reply import LedgerEntry, Reply
from runner_queue_fallback.fake_github.scenario import (
    Event,
    ParentSpec,
    PoolSpec,
    Scenario,
    WorkflowSpec,
)
from runner_queue_fallback.fake_github.transport import LoopbackServer, SimAdapter
from runner_queue_fallback.fake_github.vclock import VirtualClock
from runner_queue_fallback.fake_github.world import ETagPolicy, FakeGitHub, RateLimitStatus

__all__ = [
    "CHILD_INPUTS",
    "DEFAULT_TIMINGS",
    "FAULT_KINDS",
    "CancelRequest",
    "DispatchRefused",
    "ETagPolicy",
    "Event",
    "FakeGitHub",
    "FakeJob",
    "FakeRun",
    "Fault",
    "FaultKind",
    "FaultPlan",
    "LedgerEntry",
    "LoopbackServer",
    "ParentSpec",
    "Platform",
    "Pool",
    "PoolKey",
    "PoolSpec",
    "RateLimitStatus",
    "Reply",
    "RunHistory",
    "Scenario",
    "SecondaryLimits",
    "SecondaryMeter",
    "SimAdapter",
    "Timings",
    "VirtualClock",
    "WorkerContext",
    "WorkerHook",
    "WorkflowSpec",
    "Workload",
    "pool_key",
]
