"""In-memory model of one repository's Actions: refs, workflow files, runs, jobs, runner pools.

The model is a discrete-event simulation on virtual seconds (`clock.monotonic()`). Fixed-time
happenings (a job appearing, a step starting, a cancel landing, a scheduled fault) sit in a heap;
after every event the pools hand free runners to waiting jobs, first come first served. The model
describes GitHub, never our client's view of it (the `fake_github/` boundary rule in DESIGN.md).
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from pydantic import ConfigDict

from runner_queue_fallback.core.labels import label_set

__all__ = [
    "DEFAULT_PLATFORM",
    "DEFAULT_TIMINGS",
    "TOKEN_LENGTH",
    "WORKER_TOKEN",
    "CancelRequest",
    "FakeJob",
    "FakeRun",
    "FakeStep",
    "Platform",
    "Pool",
    "PoolKey",
    "Requeue",
    "RunHistory",
    "Timings",
    "WorkflowFile",
    "Workload",
    "fake_token",
    "pool_key",
    "serves",
]

#: A pool is named by its runner group and its sorted labels, as `runs-on: {group, labels}` says.
PoolKey = tuple[str, tuple[str, ...]]

STEP_SETUP = "Set up job"
STEP_GUARD = "Guard"
STEP_WORKLOAD = "Workload"


def pool_key(group: str, labels: str | Sequence[str]) -> PoolKey:
    """Normalise `{group, labels}` into a hashable pool key: labels as GitHub matches them.

    The labels are a sorted set of case-folded names (`core/labels.py`), so `[Linux, X64]` and
    `[x64, linux]` are one pool.
    """
    return (group, tuple(sorted(label_set(labels))))


def serves(pool: PoolKey, asked: PoolKey) -> bool:
    """Whether a pool's runners answer a `runs-on` that asks `asked`.

    The group, if one is named, must be the pool's, and every label asked for among the pool's;
    a group alone takes any runner of the group.
    """
    group, labels = asked
    return (not group or group == pool[0]) and set(labels) <= set(pool[1])


def git_blob_sha(content: str) -> str:
    r"""The blob SHA git would give `content` (sha1 of `blob <len>\\0<bytes>`)."""
    data = content.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def fake_commit_sha(*parts: object) -> str:
    """A deterministic 40-hex commit SHA derived from `parts`."""
    text = json.dumps([str(p) for p in parts])
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


#: How long an installation token of the 2026 format is (`fake_token`).
TOKEN_LENGTH = 520


def fake_token(label: str) -> str:
    """A fake token in the format GitHub uses since 2026-04-27: `ghs_<label>_<JWT>`, 520 long.

    `GITHUB_TOKEN` may be an installation token of about 520 characters with `.`, `_` and `-`
    (reference/github-api.md, section 12); nothing may assume the old 40-character shape. The
    same `label` gives the same token, so a test can look for it.
    """
    header = _b64(b'{"alg":"RS256","typ":"JWT"}')
    claims = _b64(json.dumps({"iss": "Iv23li-sim_app", "sub": label}).encode())
    head = f"ghs_{label}_{header}.{claims}."
    digest, signature = label.encode(), ""
    while len(head) + len(signature) < TOKEN_LENGTH:
        digest = hashlib.sha256(digest).digest()
        signature += _b64(digest + b"\xfb\xff\xbf")  # the last bytes give a `-` and a `_`
    return (head + signature)[:TOKEN_LENGTH]


def _b64(data: bytes) -> str:
    """base64url without padding, as a JWT writes its parts."""
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


#: The token the fake hands the child's guard (`${{ github.token }}` in the child).
WORKER_TOKEN = fake_token("worker_token")


@dataclass(frozen=True)
class Workload:
    """What the child's workload step does once the guard lets it start."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    outcome: Literal["success", "failure"] = "success"
    duration: float = 60.0


@dataclass(frozen=True)
class Timings:
    """How GitHub's asynchronous parts are paced, in virtual seconds."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    visibility_delay: float = 3.0  # dispatch -> the run answers 200 instead of 404
    jobs_delay: float = 2.0  # run queued -> its worker job is listed (queued)
    start_delay: float = 5.0  # runner assigned -> the first step (the guard) runs
    guard_duration: float = 2.0  # how long the guard step takes when no hook runs it
    cancel_delay: float = 3.0  # POST /cancel accepted -> run and job completed/cancelled
    force_cancel_delay: float = 1.0  # same for /force-cancel
    run_completion_lag: float = 0.0  # run says completed this long after the job really ended
    job_completion_lag: float = 0.0  # job says completed this long after it really ended
    latency: float = 0.0  # every reply arrives this long after the request was served
    timeout_minutes: float = 15.0  # the child job's `timeout-minutes`
    requested_delay: float = 0.0  # run visible -> leaves `requested` (0: never shows it)
    pending_delay: float = 0.0  # then `pending` (concurrency limit), no job listed, this long
    listing_delay: float = 0.0  # run visible -> listed by GET .../workflows/{file}/runs


DEFAULT_TIMINGS = Timings()

#: How GitHub re-queues a job a runner was assigned but did not pick up: not at all; with the job
#: `queued` throughout (the support trace of actions-runner-controller#4602); or with the runner
#: shown on the still-queued job until it clears.
Requeue = Literal["off", "invisible", "visible"]


@dataclass(frozen=True)
class Platform:
    """What GitHub was seen doing in 2026 that a tidy model would not; every one off by default.

    Each has its source in `reference/github-api.md` section 12 (README, "What the server must
    do"). `requeue`: "If the runner doesn't pick up the assigned job within 60 seconds, the job is
    re-queued" (GitHub's docs): the first `requeues` runners assigned to each job leave it after
    `requeue_after` seconds. `zombies`: the n-th children dispatched (1 is the first) stay
    `queued` with no job, and their cancel and force-cancel answer 409 "Cannot cancel a workflow
    run that has not been queued yet." (actions/runner#3872). `unheeded_cancel`: a plain cancel
    of a run whose job has no runner is accepted (202) and changes nothing; only a force-cancel
    ends it (gjsify/gjsify#1548: 20 minutes queued until a force-cancel). `twice`: the n-th
    children dispatched whose job GitHub runs on two runners (actions/runner#3010, #3544, #4179):
    when its steps start on the runner the job shows, a second runner, which the job never
    shows, starts them too (its guard runs; its workload would, were the guard to pass).
    """

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    requeue: Requeue = "off"
    requeues: int = 1
    requeue_after: float = 60.0
    zombies: tuple[int, ...] = ()
    unheeded_cancel: bool = False
    twice: tuple[int, ...] = ()


DEFAULT_PLATFORM = Platform()


@dataclass(frozen=True)
class WorkflowFile:
    """One workflow file as stored in a commit."""

    content: str
    dispatchable: bool = True
    inputs: tuple[str, ...] | None = None  # declared dispatch inputs; None accepts any
    required: tuple[str, ...] = ()
    name: str = "Runner worker"

    @property
    def sha(self) -> str:
        """The blob SHA of the file."""
        return git_blob_sha(self.content)


#: The runner group a job run by a GitHub-hosted runner shows (`runner_group_id` 0), and the
#: start of such a runner's name: what GitHub's jobs API has been seen to answer, not checked here.
HOSTED_GROUP_NAME = "GitHub Actions"


@dataclass
class Pool:
    """Self-hosted runners sharing one `{group, labels}`; `busy` intervals have no free runner.

    `hosted`: GitHub-hosted runners of one label (`runs-on` names no group, the key's group is
    ""); `runners` is then the plan's concurrency limit for them: jobs past it queue.
    """

    key: PoolKey
    runners: int
    busy: tuple[tuple[float, float], ...] = ()
    workload: Workload | None = None
    group_id: int = 1
    holding: list[int] = field(default_factory=list)  # run ids holding a runner
    served: int = 0  # runners handed out so far (names the next runner)
    #: Replay: each new job waits this many seconds (drawn per job; inf: never) before a runner
    #: may take it, on top of the pool's other rules.
    wait: Callable[[], float] | None = None
    hosted: bool = False

    def free(self, at: float) -> int:
        """How many runners are free at virtual time `at`."""
        if any(start <= at < end for start, end in self.busy):
            return 0
        return max(0, self.runners - len(self.holding))

    @property
    def group_name(self) -> str:
        """The runner group a job of this pool shows once a runner takes it."""
        return HOSTED_GROUP_NAME if self.hosted else self.key[0]

    def runner_name(self, number: int) -> str:
        """The name of the pool's `number`th runner (`GitHub Actions 3` when hosted)."""
        if self.hosted:
            return f"{HOSTED_GROUP_NAME} {number}"
        return f"{self.key[1][0] if self.key[1] else 'runner'}-{number:03d}"


@dataclass(frozen=True)
class CancelRequest:
    """One accepted request to cancel a child: who sent it, and the world as it stood then.

    Kept so that a check can tell why a started workload was cancelled by its coordinator
    (DESIGN.md invariant 11) from what GitHub knew, not from the coordinator's own account.
    """

    at: float
    client: int | None  # the ledger's number for the sender (None: not sent through the API)
    force: bool
    allocated: bool  # a runner held the job when the request came
    workload_started: bool  # the guard had passed and the workload had begun
    parent_active: bool  # the parent named by the inputs was in progress at the named attempt
    source_moved: bool  # the `source-ref` input no longer pointed at the `source-sha` input


@dataclass
class RunHistory:
    """What really happened to one child run, in virtual seconds, for invariant checks."""

    run_id: int
    request_id: str
    pool: PoolKey | None
    dispatched_at: float
    first_visible_at: float
    job_queued_at: float
    allocated_at: float | None = None
    started_at: float | None = None  # first step (the guard) began
    guard_passed: bool | None = None
    workload_started_at: float | None = None
    cancel_requested_at: float | None = None
    completed_at: float | None = None  # the true end, before any reporting lag
    conclusion: str | None = None
    runner: str | None = None
    #: every cancel or force-cancel GitHub accepted for this run, in order
    cancel_requests: list[CancelRequest] = field(default_factory=list)
    #: when GitHub re-queued the job because its assigned runner never picked it up
    requeued_at: list[float] = field(default_factory=list)
    #: the runner the job never shows that ran it too (`Platform.twice`), and whether the guard
    #: there passed (the workload would have run a second time)
    second_runner: str | None = None
    second_guard_passed: bool | None = None


@dataclass
class FakeStep:
    """One step of the worker job."""

    name: str
    number: int
    status: str = "in_progress"
    conclusion: str | None = None
    started_at: float | None = None
    completed_at: float | None = None


@dataclass
class FakeJob:
    """The child's single job, `worker` (or the parent's own job, by its key)."""

    id: int
    created_at: float
    labels: list[str]
    status: str = "queued"
    conclusion: str | None = None
    started_at: float | None = None
    completed_at: float | None = None
    runner_id: int | None = None
    runner_name: str | None = None
    runner_group_id: int | None = None
    runner_group_name: str | None = None
    steps: list[FakeStep] = field(default_factory=list)
    name: str = "worker"


@dataclass
class FakeRun:
    """A workflow run as GitHub shows it (parent or child)."""

    id: int
    workflow_file: str
    workflow_id: int
    workflow_name: str
    head_branch: str | None
    head_sha: str
    display_title: str
    run_number: int
    created_at: float
    visible_at: float
    updated_at: float
    event: str = "workflow_dispatch"
    attempt: int = 1
    status: str = "queued"
    conclusion: str | None = None
    started_at: float = 0.0
    inputs: dict[str, str] = field(default_factory=dict)
    job_at: float | None = None  # when the worker job is listed (children only)
    job: FakeJob | None = None
    history: RunHistory | None = None
    pool: PoolKey | None = None
    finished: bool = False  # the job really ended (lagged reports may still say otherwise)
    ready_at: float = 0.0  # no runner may take the job before this (a pool's drawn wait)
    #: who dispatched it, when not the repository's user: an App's bot (`<slug>[bot]`)
    actor: str | None = None
    zombie: bool = False  # never shows a job; cancel and force-cancel answer 409 (`Platform`)
    twice: bool = False  # its job also runs on a runner the job never shows (`Platform`)
    requeues_left: int = 0  # runners still to be assigned the job that will not pick it up
    #: the assignment that will be re-queued: (since, runner name, shown on the job)
    stale: tuple[float, str, bool] | None = None
    #: earlier attempts: attempt -> (status, conclusion, updated_at, started_at)
    attempts: dict[int, tuple[str, str | None, float, float]] = field(default_factory=dict)

    def touch(self, at: float) -> None:
        """Mark the run resource as changed at `at`."""
        self.updated_at = max(self.updated_at, at)


class EventQueue:
    """Fixed-time events in (time, insertion order) order."""

    def __init__(self) -> None:
        """Start empty."""
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()

    def push(self, at: float, action: Callable[[], None]) -> None:
        """Run `action` when the model reaches `at`."""
        heapq.heappush(self._heap, (at, next(self._seq), action))

    def next_time(self) -> float | None:
        """The time of the earliest pending event."""
        return self._heap[0][0] if self._heap else None

    def pop(self) -> Callable[[], None]:
        """Remove and return the earliest event."""
        return heapq.heappop(self._heap)[2]


def parse_runner(value: str) -> tuple[PoolKey | None, list[str]]:
    """Read the child's `runner` input (`{"group": ..., "labels": ...}`) as `runs-on` would.

    Labels without a group (`{"labels": "ubuntu-24.04"}`, hosted or a team's own) have group "";
    a group alone (`{"group": "ci"}`) has no labels.
    """
    try:
        data = json.loads(value)
    except ValueError:
        return None, []
    if not isinstance(data, Mapping):
        return None, []
    group, labels = data.get("group", ""), data.get("labels", [])
    if isinstance(labels, str):
        labels = [labels]
    if not isinstance(group, str) or not isinstance(labels, list):
        return None, []
    text_labels = [str(label) for label in labels]
    return pool_key(group, text_labels), text_labels
