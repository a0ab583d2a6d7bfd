"""Run coordinators (ours or the baseline) in one simulated repository and read what GitHub saw.

Long (one fleet run) because lanes, the runner participant, guards on the quota and the per-
coordinator records share one virtual clock and one world.

Every figure comes from the fake GitHub's request ledger and run history, never from the
coordinators' own logs or counters: the same source for ours and for the baseline.

A variant names a coordinator and a world: "ours" and "baseline" run in a world whose ETags hold
while a resource is unchanged; "ours-no-etag" is our coordinator (conditional requests on, as
always) in a world where ETags change on every read, so no read is ever answered 304.

With `jobs` (a `JobLimits`), each coordinator runs as the runner runs a job: its main step is
cancelled at the job's `timeout-minutes` (SIGINT, then killed 10 s later), and its post step
(`cleanup`, through `cli.main` as the runner calls it) runs after the main step, cut off 5 minutes
after the job's cancellation. Signals arrive at a step's next wait (a request takes `latency`).
Each such coordinator knows its job as on a runner (`GITHUB_WORKFLOW_REF`, `GITHUB_WORKFLOW_SHA`,
`GITHUB_JOB`, `RUNNER_NAME`): its parent run's job started when it did, and its workflow file
(one per `timeout-minutes`) says that timeout.

With `guards`, each child's first step runs the real guard (`cli.main(["guard"])`, with the
child's token) when a runner starts it: its reads (own run, parent, the run search, source ref)
count against the repository's quota like any other; a spent quota makes it wait for a reset
within its `guard-quota-wait-minutes` (`guard_wait`: that input; None, its default) and refuse the
workload otherwise (it fails closed). Without, the fake's guard step just passes after 2 s, sending
nothing.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import json
import math
import random
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from bench.baseline import OriginalCoordinator
from bench.losses import CancelContext, StartedCancel, started_cancels
from runner_queue_fallback import cli
from runner_queue_fallback.action.coordinator import Coordinator, Result
from runner_queue_fallback.core.actions_io import Reporter
from runner_queue_fallback.core.clock import Clock, FakeClock
from runner_queue_fallback.core.errors import Interrupted
from runner_queue_fallback.core.inputs import (
    CoordinatorInputs,
    RunContext,
    env_name,
    read_coordinator_inputs,
    read_run_context,
)
from runner_queue_fallback.core.profiles import Profile, load_profiles
from runner_queue_fallback.fake_github import (
    ETagPolicy,
    FakeGitHub,
    LedgerEntry,
    Reply,
    RunHistory,
    SecondaryLimits,
    Timings,
    VirtualClock,
    WorkerContext,
)
from runner_queue_fallback.fake_github.apps import AppKeys, FakeInstallation, generate_app_keys
from runner_queue_fallback.fake_github.hooks import WorkerHook
from runner_queue_fallback.fake_github.model import Workload
from runner_queue_fallback.fake_github.world import API_VERSIONS, QUOTA_WINDOW
from runner_queue_fallback.github.app_token import AppCredentials, AppTokenSource
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.github.tokens import TokenSource
from runner_queue_fallback.tools.simulate.capture import GuardLog, capture_stdout, read_key_values
from runner_queue_fallback.tools.simulate.own_job import coordinator_workflow
from runner_queue_fallback.tools.simulate.steps import (
    PARENT_RUN_ID,
    coordinator_environ,
    guard_hook,
    job_environ,
    standard_world,
    with_defaults,
)
from runner_queue_fallback.workflow.plan import Plan, make_plan

__all__ = [
    "FOREVER",
    "QUOTA_WINDOW",
    "VARIANTS",
    "ChildTimeline",
    "CoordinatorRecord",
    "CoordinatorSpec",
    "JobLimits",
    "LedgerTotals",
    "PoolSpec",
    "Trial",
    "Variant",
    "build_coordinator",
    "ledger_totals",
    "simulate",
]

Variant = Literal["ours", "ours-no-etag", "baseline"]
#: (a) ours, (b) ours where ETags change on every read (a world setting), (c) the original's
#: polling policy (no conditional requests).
VARIANTS: tuple[Variant, ...] = ("ours", "ours-no-etag", "baseline")
#: The world each variant runs in: how its ETags behave.
VARIANT_ETAGS: dict[Variant, ETagPolicy] = {
    "ours": "stable",
    "ours-no-etag": "every-read",
    "baseline": "stable",
}
FOREVER = math.inf
_FAR = 10.0**9  # "busy forever" as a finite interval end for the fake's pools
_T = TypeVar("_T")
RATE_LIMIT_STATUSES = frozenset({403, 429})  # no faults are injected: every 403/429 is a limit
#: The runner's signals to a cancelled step: SIGINT, SIGTERM 7.5 s later, killed 2.5 s after that.
KILL_AFTER_SIGNAL_SECONDS = 10.0


@dataclass(frozen=True)
class JobLimits:
    """How the runner ends a coordinator's job: its `timeout-minutes`, and the post step's limit.

    `timeout_minutes=None`: what `plan` says the job needs (the least a consumer may set and still
    pass `lint`), plus `timeout_margin_minutes`.
    """

    timeout_minutes: float | None = None
    timeout_margin_minutes: float = 0.0
    #: GitHub ends a post step about 5 minutes after the job is cancelled (here: its timeout)
    post_step_seconds: float = 300.0


class StepKilled(BaseException):
    """The runner killed the step (10 s after its signal, or at the post step's limit)."""


class StepClock:
    """The clock one step sees: the shared clock, with the runner's signal and kill at set times.

    A sleep that reaches `signal_at` ends there with `Interrupted` (as SIGINT would); one that
    reaches `kill_at` ends there with `StepKilled`. Everything else is the shared clock's.
    """

    def __init__(self, clock: VirtualClock, signal_at: float, kill_at: float) -> None:
        """Deliver the signal at `signal_at` and kill at `kill_at` (virtual seconds)."""
        self.clock = clock
        self.signal_at = signal_at
        self.kill_at = kill_at
        self.signalled = False
        self.killed = False

    def monotonic(self) -> float:
        """The shared clock's virtual seconds."""
        return self.clock.monotonic()

    def now(self) -> Any:
        """The shared clock's wall-clock time."""
        return self.clock.now()

    def on_advance(self, listener: Callable[[], None]) -> None:
        """As the shared clock."""
        self.clock.on_advance(listener)

    def advance(self, seconds: float) -> None:
        """As the shared clock (request latency)."""
        self.clock.advance(seconds)

    def sleep(self, seconds: float) -> None:
        """Sleep, unless the signal or the kill comes first: then sleep until it and raise."""
        now = self.clock.monotonic()
        if not self.signalled and now + seconds >= self.signal_at:
            self.clock.sleep(max(0.0, self.signal_at - now))
            self.signalled = True
            raise Interrupted("SIGINT")
        if now + seconds >= self.kill_at:
            self.clock.sleep(max(0.0, self.kill_at - now))
            self.killed = True
            raise StepKilled
        self.clock.sleep(seconds)


@dataclass
class JobOutcome:
    """How the runner's side of one coordinator's job went (with `JobLimits` only)."""

    timeout_minutes: float
    deadline: float  # virtual seconds: the job's timeout
    main_ended_at: float
    timed_out: bool  # the main step was signalled at the job's timeout
    main_killed: bool  # ...and did not exit within the 10 s before the kill
    post_exit_code: int | None  # None: the post step was cut off
    ended_at: float  # the post step's end: the whole job's


@dataclass
class _Job:
    """One coordinator of a lane, ready to run."""

    start: float
    index: int
    coordinator: Coordinator
    client: GitHubClient
    clock: StepClock | None  # with JobLimits: its main step's clock
    environ: dict[str, str]
    files: Path
    limits: JobLimits | None
    timeout_minutes: float
    log: io.StringIO

    def __lt__(self, other: _Job) -> bool:
        return (self.start, self.index) < (other.start, other.index)


@dataclass(frozen=True)
class LedgerTotals:
    """Requests of some ledger entries: sent, counted (primary limit), 304s, rate-limit replies.

    `quota_reads` are the `GET /rate_limit` reads admission makes: free, like a 304.
    """

    sent: int = 0
    counted: int = 0
    not_modified: int = 0
    rate_limited: int = 0
    quota_reads: int = 0


def ledger_totals(entries: Iterable[LedgerEntry]) -> LedgerTotals:
    """The one place ledger entries are added up (a 304 and a rate-limit reply do not count)."""
    sent = counted = not_modified = rate_limited = quota_reads = 0
    for entry in entries:
        sent += 1
        counted += int(entry.counted)
        not_modified += int(entry.status == 304)
        rate_limited += int(entry.status in RATE_LIMIT_STATUSES and not entry.counted)
        quota_reads += int(entry.path == "/rate_limit" and entry.status == 200)
    return LedgerTotals(sent, counted, not_modified, rate_limited, quota_reads)


@dataclass(frozen=True)
class PoolSpec:
    """One candidate pool of a coordinator: its queue timeout and how its runners behave."""

    labels: str  # e.g. linux-amd64-cpu16
    queue_minutes: float
    busy_for: float = 0.0  # seconds after the coordinator starts with no free runner (inf: never)
    workload_seconds: float = 60.0  # how long the worker runs once it starts


@dataclass(frozen=True)
class CoordinatorSpec:
    """One coordinator of a trial: its role in the mix, its candidates, when it starts."""

    role: str
    pools: tuple[PoolSpec, ...]
    start: float = 0.0  # virtual seconds
    execution_minutes: int = 90
    lane: int | None = None  # coordinators of one lane run one after another in one thread
    seed: int = 0  # the coordinator's random source, where it takes one
    admission_minutes: int | None = None  # its `admission-timeout-minutes` (None: the default)


@dataclass
class ChildTimeline:
    """One dispatched child, read from the ledger and history: ledger `seq` and virtual times."""

    run_id: int
    base_path: str  # /repos/{owner}/{repo}/actions/runs/{run_id}
    queue_minutes: float
    dispatched_at: float
    allocated: bool
    dispatch_seq: int | None = None  # the dispatch POST that created it
    completed_at: float | None = None  # when it really ended (None: never, in the simulation)
    first_seen: LedgerEntry | None = None  # first jobs read after the job was listed
    queued_seen: bool = False  # that first look saw it waiting for a runner
    cancel: LedgerEntry | None = None  # the cancel POST
    confirmed: LedgerEntry | None = None  # first jobs read after the cancel landed
    allocation_seen: LedgerEntry | None = None  # first jobs read after a runner was assigned
    last: LedgerEntry | None = None  # last request about this child

    @property
    def deadline(self) -> float | None:
        """First seen queued + the candidate's queue timeout."""
        if self.first_seen is None or not self.queued_seen:
            return None
        return self.first_seen.time + self.queue_minutes * 60

    @property
    def cancel_lateness(self) -> float | None:
        """Seconds from the queue deadline to the cancel POST (a queue timeout only)."""
        if self.cancel is None or self.deadline is None or self.allocated:
            return None
        return self.cancel.time - self.deadline

    @property
    def queue_end(self) -> LedgerEntry | None:
        """Where the queued phase ends: the cancel, or the poll that saw a runner."""
        if not self.queued_seen:
            return None
        return self.cancel or self.allocation_seen


@dataclass
class CoordinatorRecord:
    """What one coordinator did, as GitHub saw it."""

    index: int
    parent_run_id: int
    role: str
    variant: Variant
    started_at: float
    ended_at: float
    success: bool
    error: str | None
    error_type: str | None
    cleanup_confirmed: bool | None
    retries: int
    client_stats: dict[str, int]
    entries: list[LedgerEntry] = field(default_factory=list)
    children: list[ChildTimeline] = field(default_factory=list)
    job: JobOutcome | None = None  # with JobLimits: timeout and post step
    log: str = ""  # what the main step printed
    #: its children whose workload started and that it cancelled (bench/losses.py)
    started_cancels: list[StartedCancel] = field(default_factory=list)

    @property
    def exited_at(self) -> float:
        """When its job ended: after the post step with JobLimits, else the main step's end."""
        return self.ended_at if self.job is None else self.job.ended_at

    @property
    def children_left(self) -> int:
        """Children not completed when its job ended (post step included)."""
        end = self.exited_at
        return sum(1 for c in self.children if c.completed_at is None or c.completed_at > end)

    @property
    def totals(self) -> LedgerTotals:
        """The requests the fake received from this coordinator."""
        return ledger_totals(self.entries)

    @property
    def orphans(self) -> int:
        """Children still queued or running after this coordinator had ended."""
        return sum(
            1 for c in self.children if c.completed_at is None or c.completed_at > self.ended_at
        )

    @property
    def duration(self) -> float:
        """Virtual seconds from its start to its end."""
        return self.ended_at - self.started_at


class TimedFakeGitHub(FakeGitHub):
    """The fake GitHub, keeping the CPU time its own code takes (to tell it from ours)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """As FakeGitHub; `fake_cpu` starts at 0."""
        self.fake_cpu = 0.0
        self._inside = threading.local()
        super().__init__(*args, **kwargs)

    def handle(
        self, method: str, path_and_query: str, headers: Mapping[str, str], body: bytes = b""
    ) -> Reply:
        """Serve a request, timing it on this thread's CPU clock."""
        return self._timed(
            lambda: super(TimedFakeGitHub, self).handle(method, path_and_query, headers, body)
        )

    def catch_up(self) -> None:
        """Move the model on, timing it."""
        self._timed(super().catch_up)

    def _timed(self, work: Callable[[], _T]) -> _T:
        if getattr(self._inside, "depth", 0):
            return work()
        self._inside.depth = 1
        start = time.thread_time()
        try:
            return work()
        finally:
            self.fake_cpu += time.thread_time() - start
            self._inside.depth = 0


@dataclass
class Trial:
    """One simulation: a world, its coordinators, what the fake saw, and the CPU it took."""

    variant: Variant
    quota: int
    latency: float
    records: list[CoordinatorRecord]
    ledger: list[LedgerEntry]
    history: list[RunHistory]
    cpu_seconds: float  # the whole process: coordinators, client, transport and the fake
    fake_cpu_seconds: float  # of which the fake GitHub's own request handling and scheduling
    virtual_seconds: float
    #: with `guards`: what each guard step printed, and the ledger's number of the child token
    guard_logs: list[GuardLog] = field(default_factory=list)
    guard_client: int | None = None
    #: the App installation's bucket the coordinators spent (None: the repository's, `quota`)
    coordinator_quota: int | None = None
    #: the guards' `guard-quota-wait-minutes` as they read it (None: the input's default)
    guard_wait: int | None = None

    @property
    def totals(self) -> LedgerTotals:
        """The requests of every coordinator of the trial."""
        return ledger_totals(entry for record in self.records for entry in record.entries)

    @property
    def rate_limited(self) -> int:
        """Rate-limit replies over the whole trial."""
        return self.totals.rate_limited

    @property
    def leaked_children(self) -> int:
        """Children still not completed when every coordinator had ended."""
        return sum(1 for h in self.history if h.completed_at is None)

    @property
    def coordinator_hours(self) -> float:
        """Sum of the coordinators' durations, in hours."""
        return sum(r.duration for r in self.records) / 3600


def simulate(
    variant: Variant,
    specs: Sequence[CoordinatorSpec],
    *,
    quota: int = 1000,
    latency: float = 0.25,
    etags: ETagPolicy | None = None,
    secondary: SecondaryLimits | None = None,
    jobs: JobLimits | None = None,
    api_versions: frozenset[str] = API_VERSIONS,
    guards: bool = False,
    guard_wait: int | None = None,
    quota_spent_at: Sequence[float] = (),
    coordinator_quota: int | None = None,
) -> Trial:
    """Run every spec's coordinator at once on one virtual clock in one repository.

    `etags` overrides the variant's world (`VARIANT_ETAGS`); `secondary` turns the fake's
    secondary limits on; `jobs` runs each coordinator as a job (timeout, post step);
    `api_versions=OLDER_SERVER`: an older GitHub Enterprise Server (the older contract);
    `guards`: each child runs the real guard, on the repository's quota, with `guard_wait` as its
    `guard-quota-wait-minutes` (None: the input's default); `quota_spent_at`:
    other workflows of the repository spend its whole quota at these virtual seconds;
    `coordinator_quota`: the coordinators (main and post steps) mint a GitHub App's installation
    tokens and spend that installation's bucket of this many an hour, while `quota` stays the
    repository's (the guards', and without an App the coordinators').
    """
    clock = VirtualClock()
    world = TimedFakeGitHub(
        clock,
        quota=quota,
        timings=Timings(latency=latency, timeout_minutes=1e5),
        etags=etags or VARIANT_ETAGS[variant],
        secondary=secondary,
        api_versions=api_versions,
    )
    # The clock only builds a world when none is given; ours is a VirtualClock.
    standard_world(cast("FakeClock", clock), world)
    for at in quota_spent_at:
        world._at(at, lambda: world.spend_quota(world.quota))  # noqa: SLF001 (the model's own timer)
    app = None if coordinator_quota is None else _install_app(world, variant, coordinator_quota)
    guard_logs: list[GuardLog] = []
    if guards:
        hook = guard_hook(world, clock, [], main=cli.main, stamped=guard_logs)
        world.on_worker_start = hook if guard_wait is None else _with_guard_wait(hook, guard_wait)
    profiles = load_profiles()
    ends: list[float] = [0.0] * len(specs)
    starts: list[float] = [spec.start for spec in specs]
    outcomes: list[_Outcome | None] = [None] * len(specs)
    lanes: dict[object, list[_Job]] = {}
    with tempfile.TemporaryDirectory(prefix="rqf-bench-") as tmp:  # GITHUB_OUTPUT etc.
        for index, spec in enumerate(specs):
            files = Path(tmp) / f"{index:05d}"
            files.mkdir()
            environ = _environ(world, spec, index, variant=variant, files=files)
            environ.update(app.inputs if app is not None else {})
            key = ("lane", spec.lane) if spec.lane is not None else ("own", index)
            lanes.setdefault(key, []).append(
                _job(variant, world, clock, spec, index, environ, files, profiles, jobs, app)
            )
        running = [len(lanes)]
        participants = [
            _lane(
                clock,
                world,
                sorted(lane),
                outcomes=outcomes,
                starts=starts,
                ends=ends,
                running=running,
            )
            for lane in lanes.values()
        ]
        if guards:
            participants.append(_runner(clock, world, running))
        cpu = time.process_time()
        clock.run_all(participants)
        cpu = time.process_time() - cpu
    records = _records(world, specs, variant, outcomes, starts=starts, ends=ends)
    return Trial(
        variant=variant,
        quota=quota,
        latency=latency,
        records=records,
        ledger=list(world.ledger),
        history=list(world.history.values()),
        cpu_seconds=cpu,
        fake_cpu_seconds=world.fake_cpu,
        virtual_seconds=clock.monotonic(),
        guard_logs=guard_logs,
        guard_client=world.client_number(world.worker_token),
        coordinator_quota=coordinator_quota,
        guard_wait=guard_wait,
    )


def _with_guard_wait(hook: WorkerHook, minutes: int) -> WorkerHook:
    """The guard hook with `guard-quota-wait-minutes` set in the step's environment."""
    name = env_name("guard-quota-wait-minutes")

    def run(context: WorkerContext) -> bool:
        return hook(replace(context, environ={**context.environ, name: str(minutes)}))

    return run


@dataclass(frozen=True)
class _App:
    """The GitHub App every coordinator mints its tokens from: its inputs, and its installation."""

    inputs: dict[str, str]
    installation: FakeInstallation


#: The App's id in the bench.
BENCH_APP_ID = 31337
#: Which coordinator the steps on this thread belong to (a lane runs one step at a time).
_STEP = threading.local()


@functools.cache
def _app_keys() -> AppKeys:
    """One key pair for every trial (a 2048-bit key takes a while to make)."""
    return generate_app_keys()


def _install_app(world: FakeGitHub, variant: Variant, quota: int) -> _App:
    """Install the App on the repository's owner, on a bucket of `quota` an hour.

    Every token minted is numbered in the ledger as its coordinator's (`coordinator_token`), so
    that a coordinator's requests are its own whichever of its tokens sent them.
    """
    keys = _app_keys()
    installation = world.install_app(world.add_app(BENCH_APP_ID, keys.public_pem), quota=quota)
    assert world.apps is not None

    def attribute(token: str) -> None:
        index = getattr(_STEP, "index", None)
        if index is not None:
            world.alias_client(token, coordinator_token(variant, index))

    world.apps.on_mint = attribute
    inputs = {
        env_name("app-id"): str(BENCH_APP_ID),
        env_name("app-private-key"): keys.private_pem,
        # a fleet names its installation: no lookup per step on the App's own quota
        env_name("app-installation-id"): str(installation.id),
    }
    return _App(inputs, installation)


#: What a lane keeps of one coordinator: it, its client, the runner's side of its job, its log.
_Outcome = tuple[Coordinator, GitHubClient, "JobOutcome | None", str]


def build_coordinator(  # noqa: PLR0917 (the composition root's arguments, in its order)
    kind: type[Coordinator],
    inputs: CoordinatorInputs,
    ctx: RunContext,
    client: GitHubClient,
    clock: Clock,
    reporter: Reporter,
    *,
    seed: int,
) -> Coordinator:
    """Build one coordinator as the composition root does; the bench's only wiring of it.

    INTEGRATION HOOK: a coordinator that takes an injected random source (for the
    admission wait's spread) gets `random.Random(seed)` under whichever of these keywords its
    constructor accepts, so each bench coordinator is seeded and every run repeats exactly.
    """
    keyword = next((k for k in _RANDOM_KEYWORDS if k in inspect.signature(kind).parameters), None)
    extra: dict[str, Any] = {} if keyword is None else {keyword: random.Random(seed)}
    return kind(inputs, ctx, client, clock, reporter, **extra)


#: Keywords a coordinator may use for its injected random source (see `build_coordinator`).
_RANDOM_KEYWORDS = ("rng", "random", "randomness", "spread_random")


def job_timeout_minutes(plan: Plan, limits: JobLimits) -> float:
    """The job's `timeout-minutes`: as set, or what `plan` says the job needs plus the margin.

    A fleet that shares one quota follows the README: it adds `plan`'s "possible extra" line
    (the admission timeout, its spread and one quota reset) to the minimum timeout. A workflow
    file holds whole minutes: the value is rounded up.
    """
    if limits.timeout_minutes is not None:
        return math.ceil(limits.timeout_minutes)
    return math.ceil(
        plan.timeout_minutes + plan.quota_extra_minutes + limits.timeout_margin_minutes
    )


def _job(  # noqa: PLR0917 (one coordinator's whole set-up)
    variant: Variant,
    world: FakeGitHub,
    clock: VirtualClock,
    spec: CoordinatorSpec,
    index: int,
    environ: dict[str, str],
    files: Path,
    profiles: Mapping[str, Profile],
    limits: JobLimits | None,
    app: _App | None = None,
) -> _Job:
    """One coordinator of `variant` (ours, or the baseline's subclass), its client and its job.

    With `app`, its client sends with the App's installation tokens, minted as the composition
    root mints them.
    """
    ctx = read_run_context(environ)
    inputs = read_coordinator_inputs(environ, profiles)
    timeout = math.inf
    step_clock: StepClock | None = None
    if limits is not None:
        timeout = job_timeout_minutes(make_plan(inputs.pools), limits)
        step_clock = StepClock(clock, math.inf, math.inf)  # the times are set when it starts
        environ.update(_own_job(world, PARENT_RUN_ID + index, timeout))
        ctx = read_run_context(environ)
    used: Clock = step_clock or clock
    log = io.StringIO()
    reporter = Reporter(log, state_path=files / "state")
    token: str | TokenSource = inputs.token.get_secret_value()
    if app is not None:
        credentials = AppCredentials.read(
            inputs.app_id, inputs.app_private_key.get_secret_value(), str(app.installation.id)
        )
        token = AppTokenSource(
            world.session(),
            ctx.api_url,
            ctx.repository,
            credentials,
            used,
            api_version=inputs.api_version,
            on_token=reporter.mask,
            log=reporter.log,
        )
    client = GitHubClient(
        world.session(),
        ctx.api_url,
        ctx.repository,
        token,
        used,
        conditional=variant != "baseline",
        api_version=inputs.api_version,
    )
    kind = OriginalCoordinator if variant == "baseline" else Coordinator
    coordinator = build_coordinator(kind, inputs, ctx, client, used, reporter, seed=spec.seed)
    return _Job(
        spec.start, index, coordinator, client, step_clock, environ, files, limits, timeout, log
    )


def _own_job(world: FakeGitHub, parent: int, timeout_minutes: float) -> dict[str, str]:
    """Give the parent run a workflow file saying the job's `timeout-minutes`; its job's environ."""
    minutes = math.ceil(timeout_minutes)
    file = f"runner-check-{minutes}.yml"
    if f".github/workflows/{file}" not in world.commits[world.refs["heads/main"]]:
        world.add_workflow(file, "main", content=coordinator_workflow(minutes))
    world.runs[parent].workflow_file = file
    return job_environ(world, parent_run_id=parent)


def _environ(
    world: FakeGitHub, spec: CoordinatorSpec, index: int, *, variant: Variant, files: Path
) -> dict[str, str]:
    """Add coordinator `index`'s runner group and parent run; return its step environment."""
    parent = PARENT_RUN_ID + index
    token = coordinator_token(variant, index)
    group = f"bench-{index:03d}"
    for pool in spec.pools:
        busy = [] if pool.busy_for <= 0 else [(0.0, min(_FAR, spec.start + pool.busy_for))]
        world.add_pool(
            group,
            pool.labels,
            runners=1,
            busy=busy,
            workload=Workload(duration=pool.workload_seconds),
        )
    if parent not in world.runs:
        world.add_parent_run(parent)
    runners = [
        {"group": group, "labels": p.labels, "queue-timeout-minutes": p.queue_minutes}
        for p in spec.pools
    ]
    inputs = {
        "runner-type": "cpu",
        "execution-timeout-minutes": str(spec.execution_minutes),
        "token": token,
        "runners": json.dumps(runners),
    }
    if spec.admission_minutes is not None:
        inputs["admission-timeout-minutes"] = str(spec.admission_minutes)
    return coordinator_environ(
        world, with_defaults(world, inputs), files, parent_run_id=parent, token=token
    )


def coordinator_token(variant: Variant, index: int) -> str:
    """The token of coordinator `index`: each has its own, so the fake's ledger tells them apart."""
    return f"ghs_bench_{variant.replace('-', '_')}_{index:04d}"


def _records(
    world: FakeGitHub,
    specs: Sequence[CoordinatorSpec],
    variant: Variant,
    outcomes: Sequence[_Outcome | None],
    *,
    starts: Sequence[float],
    ends: Sequence[float],
) -> list[CoordinatorRecord]:
    """Each coordinator's requests (by its token's client number) and children, from the fake."""
    by_client: dict[int | None, list[LedgerEntry]] = {}
    for entry in world.ledger:
        by_client.setdefault(entry.client, []).append(entry)
    records = []
    for index, (spec, outcome) in enumerate(zip(specs, outcomes, strict=True)):
        client = world.client_number(coordinator_token(variant, index))
        assert outcome is not None  # every lane runs all of its coordinators
        records.append(
            _record(
                index,
                spec,
                variant=variant,
                world=world,
                outcome=outcome,
                entries=by_client.get(client, []) if client is not None else [],
                started_at=starts[index],
                ended_at=ends[index],
            )
        )
    return records


def _lane(
    clock: VirtualClock,
    world: FakeGitHub,
    jobs: Sequence[_Job],
    *,
    outcomes: list[_Outcome | None],
    starts: list[float],
    ends: list[float],
    running: list[int],
) -> Callable[[], None]:
    """One participant: its coordinators in start order, each waiting for its start time.

    `running` counts the lanes not yet done (this one takes itself off when it is).
    """

    def body() -> None:
        try:
            _lane_jobs(clock, world, jobs, outcomes=outcomes, starts=starts, ends=ends)
        finally:
            running[0] -= 1

    return body


#: The runner's participant wakes at least this often, and never sooner than this after a look.
RUNNER_MAX_SLEEP = 60.0
RUNNER_MIN_SLEEP = 0.25


def _runner(clock: VirtualClock, world: FakeGitHub, running: list[int]) -> Callable[[], None]:
    """A participant for the runners: it wakes when the next step is due, so guards start on time.

    Without it the model reaches a guard's start only when some coordinator next looks, maybe
    a minute on; the guard then runs on its own timeline from its start, and every request the
    others send meanwhile is served from that past (their quota resets disagree with it).
    """

    def body() -> None:
        while running[0] > 0:
            due = world.next_event_at()
            wait = RUNNER_MAX_SLEEP if due is None else due - clock.monotonic()
            clock.sleep(min(RUNNER_MAX_SLEEP, max(RUNNER_MIN_SLEEP, wait)))
            world.catch_up()

    return body


def _lane_jobs(
    clock: VirtualClock,
    world: FakeGitHub,
    jobs: Sequence[_Job],
    *,
    outcomes: list[_Outcome | None],
    starts: list[float],
    ends: list[float],
) -> None:
    """Run one lane's coordinators in start order, each from its start time."""
    for job in jobs:
        if job.start > clock.monotonic():
            clock.sleep(job.start - clock.monotonic())
        index = job.index
        _STEP.index = index  # the App's tokens this lane mints now are this coordinator's
        starts[index] = clock.monotonic()  # later than planned if the lane ran late
        _job_starts(world, PARENT_RUN_ID + index, starts[index])
        outcome: JobOutcome | None = None
        try:
            if job.clock is None:
                job.coordinator.run()
            else:
                outcome = _run_job(job, clock, world)
        finally:
            ends[index] = clock.monotonic() if outcome is None else outcome.main_ended_at
            outcomes[index] = (job.coordinator, job.client, outcome, job.log.getvalue())


def _job_starts(world: FakeGitHub, parent: int, at: float) -> None:
    """The parent run's job (the coordinator's own) starts now, as the runner starts it."""
    own = world.runs[parent].job
    if own is not None:
        own.created_at = own.started_at = at


def _run_job(job: _Job, clock: VirtualClock, world: FakeGitHub) -> JobOutcome:
    """The main step until it exits or the job's timeout ends it, then the post step."""
    assert job.clock is not None
    assert job.limits is not None
    deadline = clock.monotonic() + job.timeout_minutes * 60
    job.clock.signal_at, job.clock.kill_at = deadline, deadline + KILL_AFTER_SIGNAL_SECONDS
    with contextlib.suppress(StepKilled):  # killed: its result is what it had recorded so far
        job.coordinator.run()
    main_ended = clock.monotonic()
    cut_off = deadline + job.limits.post_step_seconds
    post_clock = StepClock(clock, cut_off, cut_off + KILL_AFTER_SIGNAL_SECONDS)
    state = read_key_values(job.files / "state")
    post_env = {**job.environ, **{f"STATE_{k}": v for k, v in state.items()}}
    post_exit: int | None = None
    if clock.monotonic() < cut_off:
        with capture_stdout(io.StringIO()):
            try:
                post_exit = cli.main(
                    ["cleanup"], post_env, clock=post_clock, session=world.session()
                )
            except (Interrupted, StepKilled):
                post_exit = None
    return JobOutcome(
        timeout_minutes=job.timeout_minutes,
        deadline=deadline,
        main_ended_at=main_ended,
        timed_out=job.clock.signalled,
        main_killed=job.clock.killed,
        post_exit_code=post_exit,
        ended_at=clock.monotonic(),
    )


def _record(
    index: int,
    spec: CoordinatorSpec,
    *,
    variant: Variant,
    world: FakeGitHub,
    outcome: _Outcome,
    entries: list[LedgerEntry],
    started_at: float,
    ended_at: float,
) -> CoordinatorRecord:
    coordinator, client, job, log = outcome
    result: Result = coordinator.result
    parent = PARENT_RUN_ID + index
    cleanup = result.cleanup
    error = result.error
    stats = client.stats
    record = CoordinatorRecord(
        index=index,
        parent_run_id=parent,
        role=spec.role,
        variant=variant,
        started_at=started_at,
        ended_at=ended_at,
        success=result.success,
        error=None if error is None else str(error),
        error_type=None if error is None else type(error).__name__,
        cleanup_confirmed=None if cleanup is None else bool(cleanup.confirmed),
        retries=stats.retries,
        client_stats={
            "sent": stats.sent,
            "not_modified": stats.not_modified,
            "counted": stats.counted,
            "retries": stats.retries,
        },
        entries=entries,
        job=job,
        log=log,
    )
    minutes = {p.labels: p.queue_minutes for p in spec.pools}
    kids = sorted(
        (
            history
            for run_id, history in world.history.items()
            if world.runs[run_id].inputs.get("parent-run-id") == str(parent)
        ),
        key=lambda h: h.dispatched_at,
    )
    record.children = [_timeline(h, entries, minutes, world.repository) for h in kids]
    context = CancelContext(
        client=world.client_number(coordinator_token(variant, index)),
        execution_seconds=spec.execution_minutes * 60,
        job_deadline=None if job is None else job.deadline,
        latency=world.timings.latency,
        log=log,
    )
    record.started_cancels = started_cancels(kids, entries, context)
    dispatches = [e for e in entries if e.method == "POST" and e.path.endswith("/dispatches")]
    for child, post in zip(record.children, dispatches, strict=False):
        child.dispatch_seq = post.seq
    return record


def _timeline(
    history: RunHistory, entries: list[LedgerEntry], minutes: dict[str, float], repository: str
) -> ChildTimeline:
    labels = history.pool[1][0] if history.pool and history.pool[1] else ""
    base = f"/repos/{repository}/actions/runs/{history.run_id}"
    child = ChildTimeline(
        run_id=history.run_id,
        base_path=base,
        queue_minutes=minutes.get(labels, math.nan),
        dispatched_at=history.dispatched_at,
        allocated=history.allocated_at is not None,
        completed_at=history.completed_at,
    )
    jobs_path = f"{base}/attempts/1/jobs"
    jobs_reads = [e for e in entries if e.path == jobs_path and e.status in {200, 304}]
    about = [e for e in entries if e.path == base or e.path.startswith(base + "/")]
    child.last = about[-1] if about else None
    child.first_seen = next((e for e in jobs_reads if e.time >= history.job_queued_at), None)
    allocated_at = history.allocated_at
    if child.first_seen is not None:
        child.queued_seen = allocated_at is None or child.first_seen.time < allocated_at
    if allocated_at is not None:
        child.allocation_seen = next((e for e in jobs_reads if e.time >= allocated_at), None)
    child.cancel = next(
        (e for e in entries if e.method == "POST" and e.path == f"{base}/cancel"), None
    )
    if child.cancel is not None and history.completed_at is not None:
        landed = max(history.completed_at, child.cancel.time)
        child.confirmed = next(
            (e for e in jobs_reads if e.seq > child.cancel.seq and e.time >= landed), None
        )
    return child
