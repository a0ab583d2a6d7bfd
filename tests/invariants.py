"""The invariants of DESIGN.md, checked from what the fake GitHub saw (not from our own logs)."""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass, field

from bench.losses import CancelContext, StartedCancel, started_cancels, warned_of_job_end
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.inputs import PoolSettings
from runner_queue_fallback.core.outcome import OUTCOMES
from runner_queue_fallback.fake_github.model import RunHistory, pool_key, serves
from runner_queue_fallback.fake_github.reply import LedgerEntry
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.simulate.steps import PARENT_RUN_ID, TOKEN, SimulationRun


def dispatch_posts(world: FakeGitHub) -> list[float]:
    """Virtual times of every dispatch POST the fake received."""
    return [e.time for e in world.ledger if e.method == "POST" and e.path.endswith("/dispatches")]


def counted_dispatch_posts(world: FakeGitHub) -> list[float]:
    """Dispatch POSTs as invariant 4 counts them: not one answered 401 or by a rate limit.

    GitHub refused that one and created nothing: after a 401 the same dispatch may go once more
    with a fresh token (an App's installation token that expired), after a rate limit once more
    after admission's wait (docs/departures.md).
    """
    return [
        e.time
        for e in world.ledger
        if e.method == "POST" and e.path.endswith("/dispatches") and not created_nothing(e)
    ]


def created_nothing(entry: LedgerEntry) -> bool:
    """A dispatch reply that says no run was made and lets the coordinator send it again."""
    return entry.status == 401 or rate_limited(entry)


def _after_refused_credential(world: FakeGitHub, entry: LedgerEntry) -> bool:
    """Whether the dispatch POST before `entry` (any client) was answered 401."""
    earlier = [
        e
        for e in world.ledger
        if e.seq < entry.seq and e.method == "POST" and e.path.endswith("/dispatches")
    ]
    return bool(earlier) and earlier[-1].status == 401


def _refused(entry: LedgerEntry) -> bool:
    """A dispatch POST GitHub refused: a 4xx reply (408 is ambiguous), so no run was created."""
    return (
        entry.method == "POST"
        and entry.status is not None
        and 400 <= entry.status < 500  # the 4xx range
        and entry.status != 408  # a request timeout is ambiguous
    )


def children(world: FakeGitHub) -> list:  # type: ignore[type-arg]  # RunHistory list
    return sorted(world.history.values(), key=lambda h: h.dispatched_at)


def _check_outcome(kids: list[RunHistory], run: SimulationRun) -> None:
    """The gate's word (issue 31) is set on every exit and agrees with what really happened."""
    outcome = run.outputs.get("outcome")
    assert outcome in OUTCOMES, (outcome, run.exit_code)
    assert (outcome == "success") is (run.exit_code == 0), (outcome, run.exit_code)
    if outcome == "failure":  # a worker ran: a step of the last child began
        assert kids, "failure without a child"
        assert kids[-1].started_at is not None, "failure for a child whose job never started"
    if outcome == "no-pool":  # every candidate skipped before its dispatch: no child at all
        assert not kids, "no-pool with a child"
        entries = json.loads(run.outputs.get("attempts-json") or "[]")
        assert entries, "no-pool without a skipped entry"
        assert all(e["outcome"] == "skipped" for e in entries), entries
    if outcome == "no-runner":  # every child cancelled before a runner took it
        assert kids, "no-runner without a child"
        assert all(kid.allocated_at is None for kid in kids)
        assert all(kid.conclusion == "cancelled" for kid in kids)


def check_invariants(world: FakeGitHub, run: SimulationRun, *, candidates: int) -> None:
    """Invariants 1-5 and 7 (6, no real sleep, is enforced by the autouse fixture)."""
    kids = children(world)
    # 1. At most one child of the sequence is non-terminal at any time.
    for earlier, later in itertools.pairwise(kids):
        end = earlier.completed_at if earlier.completed_at is not None else math.inf
        assert end <= later.dispatched_at, (
            f"child {later.run_id} dispatched while {earlier.run_id} was live"
        )
    # 2. No dispatch after allocation or execution evidence.
    for kid in kids[:-1]:
        assert kid.allocated_at is None, (
            f"child {kid.run_id} had a runner, yet another was dispatched"
        )
        assert kid.workload_started_at is None
    # 3. Success implies a successful worker of matching identity.
    if run.exit_code == 0:
        last = kids[-1]
        assert last.conclusion == "success"
        assert last.workload_started_at is not None
        assert run.outputs["run-id"] == str(last.run_id)
    # 4. The dispatch POST is sent at most once per candidate: never twice for one request id.
    # One answered 401 or by a rate limit created nothing, and may be sent once more.
    assert len(counted_dispatch_posts(world)) <= candidates
    again = [e for e in world.ledger if e.path.endswith("/dispatches") and created_nothing(e)]
    assert len(dispatch_posts(world)) <= candidates + len(again)
    request_ids = [kid.request_id for kid in kids]
    assert len(set(request_ids)) == len(request_ids), (
        f"a request id was dispatched twice: {request_ids}"
    )
    # `attempts` counts dispatches sent: a refused one (4xx, not 408) created no run and is not
    # one; one without a clear reply (a timeout, 408, 5xx) may have, and is.
    refused = [e for e in world.ledger if e.path.endswith("/dispatches") and _refused(e)]
    sent = len(dispatch_posts(world)) - len(refused)
    assert run.outputs.get("attempts", "0") == str(sent)
    # 5. Every child is confirmed over at exit, or reported unconfirmed by run id.
    # A run whose dispatch reply was lost and that never showed up by its run-name can only be
    # named by that run-name: the coordinator never learned its id.
    for kid in kids:
        if kid.completed_at is None:
            text = run.log + run.post_log
            assert (
                f"NOT confirmed for child run {kid.run_id}" in text
                or f"no run with run-name {kid.request_id} appeared" in text
            ), f"child {kid.run_id} left running"
    # 7. The token never appears in logs, outputs or summaries.
    # The ::add-mask:: command itself is how the runner learns the secret; it is never displayed.
    text = "\n".join([run.log, run.post_log, run.summary, *run.outputs.values(), *run.guard_logs])
    everything = "\n".join(
        line for line in text.splitlines() if not line.startswith("::add-mask::")
    )
    assert TOKEN not in everything
    assert "ghs_worker_token" not in everything


# ------------------------------------------------------------------------------ spec bounds
#
# The fuzz tests (tests/test_fuzz_coordinator.py) instrument a run and check the bounds of the
# spec's "Behavior and limits" from what the fake GitHub saw (the ledger, the run history) and
# from the virtual clock, not from the coordinator's own account of itself.

#: Fault kinds after which the client may retry (401/403 permission failures are final).
RETRYABLE_FAULTS = frozenset(
    {
        "status",
        "timeout",
        "connection",
        "malformed",
        "primary_rate_limit",
        "secondary_rate_limit",
        "lost_reply",
    }
)
RATE_LIMIT_FAULTS = frozenset({"primary_rate_limit", "secondary_rate_limit"})
#: The waits of the spec: 5 s polls and first backoff, 10 s second backoff, the 15 s first
#: startup check, 60 s execution polls; and our queued polls, 4 minutes apart far from the
#: deadline (a departure, README). Anything else is a poll nearing or landing on a deadline, a
#: rate-limit wait or an admission wait.
CADENCE = frozenset({5.0, 10.0, 15.0, 60.0, timing.QUEUE_POLL_FAR_SECONDS})
RETRY_WAIT_MAX = timing.RATE_LIMIT_WAIT_CAP_SECONDS
#: Polls off the cadence per candidate: those nearing the deadline (a third of what is left,
#: at least a minute) and the one landing on it.
NEAR_DEADLINE_POLLS = 8
#: Once a child exists a spent quota or a long retry-after is waited out (a departure, README):
#: at most a whole quota window per rate-limit reply. Admission waits a reset plus a spread.
RESET_WAIT_MAX = timing.RESET_WAIT_MAX_SECONDS
#: What the coordinator logs when a waiting phase pauses for a spent quota's reset.
QUOTA_PAUSE = "nothing is sent before the reset, then a fresh read of the child decides"
#: What it logs when such a pause delayed the first sighting of a queued job: the queue clock
#: starts at the job's `created_at`, and its deadline may have passed before any waiting round.
LATE_QUEUE_CLOCK = "ago (its created_at)"
ADMISSION_WAIT_MAX = timing.RESET_WAIT_MAX_SECONDS + timing.ADMISSION_SPREAD_SECONDS


def rate_limited(entry: LedgerEntry) -> bool:
    """A rate-limit reply: a rate-limit fault, or the fake's spent quota (403/429, no fault)."""
    return entry.fault in RATE_LIMIT_FAULTS or (entry.fault is None and entry.status in {403, 429})


def wait_allowance(entries: list[LedgerEntry]) -> float:
    """The longest the client may wait after these replies: an hour a rate limit, else 60 s."""
    return sum(RESET_WAIT_MAX if rate_limited(e) else RETRY_WAIT_MAX for e in entries)


@dataclass
class Send:
    """One HTTP request as the client sent it: its token, URL and the client's attempt number."""

    token: str
    method: str
    url: str
    attempts: int
    time: float
    inputs: dict[str, str] = field(default_factory=dict)


@dataclass
class Observed:
    """What the instruments of a fuzz run saw besides the ledger."""

    sends: list[Send] = field(default_factory=list)
    #: (command, start, end) of every cli.main call: coordinate, guard, cleanup
    commands: list[tuple[str, float, float]] = field(default_factory=list)
    stack: list[str] = field(default_factory=list)
    guard_logs: list[str] = field(default_factory=list)
    interrupted_at: float | None = None

    def span(self, command: str) -> tuple[float, float] | None:
        """Start and end of the first run of `command`."""
        return next(((s, e) for c, s, e in self.commands if c == command), None)

    def guard_seconds(self, start: float = 0.0, end: float = math.inf) -> float:
        """Virtual time spent inside guard steps between `start` and `end`."""
        return sum(e - s for c, s, e in self.commands if c == "guard" and start <= s <= end)


def retryable(entry: LedgerEntry) -> bool:
    """Whether the client may retry after this reply (a transient failure or a rate limit)."""
    if entry.fault is not None:
        return entry.fault in RETRYABLE_FAULTS
    status = entry.status
    return status is None or status in {403, 408, 429} or status >= 500


def _client_of(world: FakeGitHub, token: str) -> int | None:
    return world._client(f"Bearer {token}")


def check_spec_bounds(  # noqa: C901, PLR0912, PLR0915  # one list of the spec's bounds
    world: FakeGitHub,
    run: SimulationRun,
    clock: FakeClock,
    observed: Observed,
    *,
    settings: PoolSettings,
    budget_seconds: float,
    guard: bool,
    latency: float,
) -> None:
    """The spec's limits: retries, waits, cadence, windows, deadlines, the timeout budget."""
    candidates = settings.candidates
    kids = children(world)
    # Never a traceback: an unexpected exception would have escaped cli.main already; a guard
    # that crashed is recorded by the fake.
    assert run.exit_code in {0, 1}, run.exit_code
    assert run.post_exit_code in {0, 1, None}
    assert world.hook_errors == [], world.hook_errors

    # -- every request went through the client, and its retries are honest -----------------
    by_client: dict[int | None, list[Send]] = {}
    for send in observed.sends:
        by_client.setdefault(_client_of(world, send.token), []).append(send)
    entries: dict[int | None, list[LedgerEntry]] = {}
    for entry in world.ledger:
        entries.setdefault(entry.client, []).append(entry)
    assert {k: len(v) for k, v in by_client.items()} == {k: len(v) for k, v in entries.items()}
    for client, sends in by_client.items():
        pairs = list(zip(sends, entries[client], strict=True))
        reissued = 0
        for index, (send, entry) in enumerate(pairs):
            assert send.method == entry.method
            assert send.url.split("?")[0].endswith(entry.path)
            resent = _after_refused_credential(world, entry)
            if entry.method == "POST" and entry.path.endswith("/dispatches"):
                # Never retried, but once after a 401, with a fresh token (a client of its own).
                assert send.attempts == 1 or (send.attempts == 2 and resent), (
                    "a dispatch POST is never retried"
                )
            # Once a child exists, rate-limit waits do not use up the two retries (a departure).
            chain = [e for _, e in pairs[max(0, index - send.attempts + 1) : index]]
            allowed = 1 + timing.MAX_RETRIES + sum(1 for e in chain if rate_limited(e))
            assert send.attempts <= allowed, f"more than two retries: {send}"
            if index == 0:
                assert send.attempts == 1 or resent
                continue
            previous, before = pairs[index - 1]
            same = (previous.method, previous.url) == (send.method, send.url)
            if same and before.status == 400 and send.attempts == previous.attempts:
                # `api-version: auto`: the first reply refused 2026-03-10; the same request is
                # sent once more as 2022-11-28 (never a dispatch: the client reads first).
                assert not entry.path.endswith("/dispatches"), "a dispatch POST was sent twice"
                continue
            if send.attempts > 1:
                # A retry repeats the request that just failed, with the next attempt number.
                assert same, f"retry {send} does not follow its own failed attempt"
                assert previous.attempts == send.attempts - 1
                assert retryable(before), f"{send} retried after {before}"
                reissued = 0
            elif same and retryable(before):
                # A new call of a request that just failed comes after a poll interval, or
                # once as the first read of the cleanup that follows the failed call; more is
                # a retry beyond the two the spec allows.
                gap = send.time - previous.time - latency
                if gap < timing.CANCEL_POLL_SECONDS - 1e-6:
                    reissued += 1
                    assert reissued <= 1, (
                        f"{send.method} {send.url} re-sent {gap:g}s after a failed attempt "
                        f"({before.fault or before.status}): more than two retries"
                    )
            else:
                reissued = 0

    # -- dispatches: once per candidate, in order, to the candidate's pool -----------------
    # (once more, with a new request id, after one that created nothing: a rate limit)
    coordinator = by_client.get(_client_of(world, TOKEN), [])
    coordinator_entries = entries.get(_client_of(world, TOKEN), [])
    dispatches = [
        s for s in coordinator if s.method == "POST" and s.url.split("?")[0].endswith("/dispatches")
    ]
    request_ids = [s.inputs.get("request-id", "") for s in dispatches]
    number, again, last_id, seen = 0, False, "", set()
    for send, entry in zip(coordinator, coordinator_entries, strict=True):
        if send not in dispatches:
            continue
        request_id = send.inputs.get("request-id", "")
        # one refused by a rate limit goes again with its request id, so that should GitHub
        # ever have made a run of the first, the guard lets only the earlier run the workload
        assert request_id == last_id if again else request_id not in seen, (
            "two dispatches of one request"
        )
        seen.add(request_id)
        number = number if again else number + 1
        assert request_id.startswith(f"rqf-{PARENT_RUN_ID}-1-{number}-")
        assert send.inputs["runner"] == candidates[number - 1].runner_json()
        again, last_id = created_nothing(entry), request_id
    # The outputs describe the last dispatch sent: one GitHub refused (4xx, not 408) is none.
    refused = {
        send.inputs.get("request-id", "")
        for send, entry in zip(coordinator, coordinator_entries, strict=True)
        if send in dispatches and _refused(entry)
    }
    sent = [s for s in dispatches if s.inputs.get("request-id", "") not in refused]
    if sent:
        assert run.outputs["runner"] == sent[-1].inputs["runner"]
    for kid in kids:
        send = dispatches[request_ids.index(kid.request_id)]
        # runs-on as sent: a hosted candidate's or a team's has no group, a group alone no labels;
        # the child runs in the pool whose runners carry every label asked for
        asked = json.loads(send.inputs["runner"])
        key = pool_key(asked.get("group", ""), asked.get("labels", ()))
        assert kid.pool is not None
        assert kid.pool == key or serves(kid.pool, key)
    assert sum(1 for kid in kids if kid.workload_started_at is not None) <= 1
    if run.exit_code == 0 and guard:
        assert kids[-1].guard_passed is True
    if run.outputs.get("run-id"):
        assert "View worker job logs here" in run.summary
    _check_outcome(kids, run)

    # -- waits: a poll at most 4 minutes; longer only for a rate limit or an admission wait -----
    limited = sum(1 for e in world.ledger if rate_limited(e))
    admissions = run.log.count("::warning title=Waiting for API quota::")
    long_waits = [s for s in clock.sleeps if s > timing.QUEUE_POLL_FAR_SECONDS]
    assert all(0 <= s <= ADMISSION_WAIT_MAX for s in clock.sleeps), clock.sleeps
    # a spent quota is waited for once per refusal, or once when a reply said 0 were left
    assert len(long_waits) <= 2 * limited + admissions + len(dispatches), (long_waits, limited)
    odd = [s for s in clock.sleeps if s not in CADENCE]
    assert len(odd) <= 2 * limited + admissions + NEAR_DEADLINE_POLLS * len(dispatches) + 2, (
        odd,
        limited,
    )

    # -- the startup window: the first check waits 15 s ------------------------------------
    lost = {e.seq for e in world.ledger if e.fault == "lost_reply"}
    run_reads = [
        e for e in world.ledger if e.method == "GET" and e.client == _client_of(world, TOKEN)
    ]
    for kid in kids:
        reads = [e for e in run_reads if e.path.endswith(f"/actions/runs/{kid.run_id}")]
        interrupted = observed.interrupted_at is not None and observed.interrupted_at < (
            kid.dispatched_at + timing.STARTUP_FIRST_CHECK_SECONDS
        )
        if reads and not interrupted and not lost:
            assert reads[0].time >= kid.dispatched_at + timing.STARTUP_FIRST_CHECK_SECONDS - 1e-6

    # -- queue deadlines: never cancelled early, late only by the requests around it ---------
    main = observed.span("coordinate")
    assert main is not None
    failures = [e for e in world.ledger if e.client == _client_of(world, TOKEN) and retryable(e)]
    # Around a deadline: the poll that saw the state, its source/parent checks, the poll on the
    # deadline and its checks, the fresh read, the cancel: each request may take `latency`.
    quota_waits = RESET_WAIT_MAX if world.ledger and any(map(rate_limited, world.ledger)) else 0
    slack = wait_allowance(failures) + quota_waits + latency * 16 + observed.guard_seconds() + 1e-6
    cancels = [
        e
        for e in world.ledger
        if e.method == "POST"
        and e.path.endswith("/cancel")
        and e.client == _client_of(world, TOKEN)
    ]
    outcomes = json.loads(run.outputs.get("attempts-json", "[]"))
    for entry in outcomes:
        kid = world.history.get(entry["run-id"]) if entry["run-id"] else None
        if kid is None or (
            "queue timeout" not in entry["outcome"] and "race" not in entry["outcome"]
        ):
            continue
        deadline = entry["queue-timeout-minutes"] * 60
        first_cancel = min(e.time for e in cancels if e.path.endswith(f"/{kid.run_id}/cancel"))
        assert first_cancel >= kid.job_queued_at + deadline - 1e-6, "cancelled before the deadline"
        assert entry["queued-seconds"] >= round(deadline, 1) - 0.1
        assert entry["queued-seconds"] <= deadline + slack + 0.1, entry
        assert first_cancel <= kid.dispatched_at + timing.STARTUP_WINDOW_SECONDS + deadline + slack
        # The confirmation reads share one 2-minute window; none is sent after it.
        later = [k for k in kids if k.dispatched_at > kid.dispatched_at]
        if later:
            window_end = first_cancel + timing.CANCEL_WINDOW_SECONDS
            reads = [
                e
                for e in run_reads
                if f"/actions/runs/{kid.run_id}" in e.path
                and first_cancel <= e.time <= later[0].dispatched_at
            ]
            assert all(e.time <= window_end + 1e-6 for e in reads), "read after the window"

    # -- the startup window and the lost-dispatch search end 2 minutes after the dispatch -----
    window_closed = "2-minute startup window" in run.log or "appeared within 2 minutes" in run.log
    if window_closed and observed.interrupted_at is None:
        kid_send = dispatches[-1]
        # A spent quota pauses the window until its reset (issue 27): it then goes on.
        paused = quota_waits or (RESET_WAIT_MAX if QUOTA_PAUSE in run.log else 0.0)
        startup_end = kid_send.time + timing.STARTUP_WINDOW_SECONDS + paused + latency + 1e-6
        cleanup = observed.span("cleanup")
        post_start = cleanup[0] if cleanup else math.inf
        searches = [  # the post step has its own search window (checked below)
            e
            for e in run_reads
            if e.path.endswith("/runs")
            and "/workflows/" in e.path
            and kid_send.time <= e.time < post_start
        ]
        assert all(e.time <= startup_end for e in searches), "run-name search after the window"
        mine = [e.time for e in cancels if kid_send.time <= e.time < post_start]
        if mine:
            assert mine[0] <= startup_end + latency * 4 + slack

    # -- the execution timeout --------------------------------------------------------------
    if "did not finish within execution-timeout-minutes" in run.log:
        kid = kids[-1]
        assert kid.allocated_at is not None
        execution = settings.execution_timeout_minutes * 60
        mine = [e.time for e in cancels if e.path.endswith(f"/{kid.run_id}/cancel")]
        # Evidence is seen at most one poll after the allocation; a run or job that reports
        # completed at the deadline gets one cancellation window for the other report to settle.
        settle = timing.CANCEL_WINDOW_SECONDS if "lagging report" in run.log else 0.0
        # Queued polls are up to 4 minutes apart: a runner is seen at most that late (and
        # the execution deadline counts from GitHub's own allocation time).
        poll = max(timing.QUEUE_POLL_FAR_SECONDS, timing.EXECUTION_POLL_SECONDS)
        bound = kid.allocated_at + execution + poll + settle + slack
        if mine:
            assert mine[0] >= kid.allocated_at + execution - 1e-6
            assert mine[0] <= bound, (mine[0], bound)
        else:  # no cancel: the cleanup found it over (a report lagged past the settle window)
            assert kid.completed_at is not None
            assert kid.completed_at <= bound

    # -- the parent grace: the first dispatch comes within 2 minutes (plus its requests) ------
    if dispatches:
        preflight = [e for e in run_reads if e.time <= dispatches[0].time]
        bound = timing.PARENT_GRACE_SECONDS + latency * (len(preflight) + 1) + slack
        assert dispatches[0].time <= bound + admissions * ADMISSION_WAIT_MAX

    # -- the run ends within the timeout `plan` computes, plus what faults and latency add ----
    main_requests = [
        e for e in world.ledger if e.client == _client_of(world, TOKEN) and e.time <= main[1]
    ]
    main_failures = [e for e in main_requests if retryable(e)]
    margin = (
        wait_allowance(main_failures)
        + quota_waits
        + admissions * ADMISSION_WAIT_MAX
        + latency * len(main_requests)
        + observed.guard_seconds(*main)
        + 1e-6
    )
    assert main[1] - main[0] <= budget_seconds + margin, (
        f"the main step took {main[1] - main[0]:g}s; plan allows {budget_seconds:g}s "
        f"+ {margin:g}s of retry waits, latency and guard time"
    )
    post = observed.span("cleanup")
    if post is not None:
        # The post step ends within its 4-minute limit, whatever the quota (a request in flight
        # at the limit may add its latency).
        post_requests = [e for e in world.ledger if post[0] <= e.time <= post[1]]
        post_margin = latency * (len(post_requests) + 1) + 1e-6
        assert post[1] - post[0] <= timing.POST_STEP_LIMIT_SECONDS + post_margin


# ------------------------------------------------------------------------ what really happened
#
# The fake GitHub knows the truth of every child (`RunHistory`: when its job was queued, when a
# runner took it, when the cancel was requested, when it really ended) and of every request (the
# ledger). These checks hold the coordinator's decisions against that truth (issue 22).

#: How late a queue deadline may be acted on: one 5 s poll (the spec's cadence near a window).
DEADLINE_LATENESS = timing.CANCEL_POLL_SECONDS
RACE_OUTCOME = "runner acquired during cancellation (race)"
QUEUE_TIMEOUT_OUTCOME = "cancelled before a runner (queue timeout)"


def check_truth(  # one list of the truths a run must agree with
    world: FakeGitHub,
    run: SimulationRun,
    observed: Observed,
    *,
    latency: float,
) -> None:
    """A race only after the cancel; no fallback on a late reply; deadlines on time; rounds."""
    kids = children(world)
    mine = _client_of(world, TOKEN)
    outcomes = json.loads(run.outputs.get("attempts-json", "[]"))
    by_run = {entry["run-id"]: entry for entry in outcomes if entry.get("run-id")}
    cancels = [
        e
        for e in world.ledger
        if e.method == "POST" and e.path.endswith("/cancel") and e.client == mine
    ]
    for kid in kids:
        entry = by_run.get(kid.run_id)
        outcome = entry["outcome"] if entry else ""
        # A race error only when a runner was really acquired after the last read of the child
        # the cancel acted on (GitHub has no atomic cancel-only-if-queued: one that came between
        # that read and the cancel request is the same race).
        if outcome == RACE_OUTCOME:
            assert kid.allocated_at is not None, f"race reported for {kid.run_id}, no runner"
            assert kid.cancel_requested_at is not None
            acted_on = [
                e.time
                for e in world.ledger
                if e.client == mine
                and e.method == "GET"
                and e.status in {200, 304}
                and f"/actions/runs/{kid.run_id}" in e.path
                and e.time <= kid.cancel_requested_at
            ]
            seen_queued = acted_on[-1] if acted_on else kid.cancel_requested_at
            assert kid.allocated_at >= seen_queued - 1e-6, (
                f"child {kid.run_id} had its runner before the read the cancel acted on: not a race"
            )
        # A fallback after this child: the reply that proved it over arrived inside the window.
        later = [k for k in kids if k.dispatched_at > kid.dispatched_at]
        if later and outcome == QUEUE_TIMEOUT_OUTCOME:
            mine_cancels = [e.time for e in cancels if e.path.endswith(f"/{kid.run_id}/cancel")]
            window_end = min(mine_cancels) + timing.CANCEL_WINDOW_SECONDS
            reads = [
                e
                for e in world.ledger
                if e.client == mine
                and e.method == "GET"
                and f"/actions/runs/{kid.run_id}" in e.path
                and e.status in {200, 304}
                and min(mine_cancels) <= e.time <= later[0].dispatched_at
            ]
            assert reads, f"child {kid.run_id} replaced without a read after its cancel"
            proof = reads[-1]
            assert proof.time + latency <= window_end + 1e-6, (
                f"the fallback from {kid.run_id} rests on a reply from after its window"
            )
            assert kid.completed_at is not None
            assert kid.completed_at <= proof.time + 1e-6, "fallback before the child really ended"
            assert kid.allocated_at is None
    # A result is accepted only from a child whose identity was read: at least one read of the
    # run itself (where identity is checked) before the verdict.
    if run.exit_code == 0:
        last = kids[-1]
        reads = [
            e
            for e in world.ledger
            if e.client == mine and e.method == "GET" and e.path.endswith(f"/runs/{last.run_id}")
        ]
        assert reads, "a result accepted without reading the run's identity"
    _check_deadlines_on_time(world, run, observed, outcomes, latency=latency)
    _check_rounds(run, outcomes)


def _check_deadlines_on_time(
    world: FakeGitHub,
    run: SimulationRun,
    observed: Observed,
    outcomes: list[dict[str, object]],
    *,
    latency: float,
) -> None:
    """No queue deadline acted on more than 5 s late, barring a quota wait or a failed request."""
    mine = _client_of(world, TOKEN)
    disturbed = (
        any(
            e.client == mine and (rate_limited(e) or retryable(e) or e.fault is not None)
            for e in world.ledger
        )
        or "Waiting for API quota" in run.log
    )
    if disturbed or observed.interrupted_at is not None:
        return
    for entry in outcomes:
        if entry["outcome"] not in {QUEUE_TIMEOUT_OUTCOME, RACE_OUTCOME}:
            continue
        kid = world.history.get(int(str(entry["run-id"])))
        assert kid is not None
        # The queue clock starts at the first read that showed the job queued.
        seen = [
            e.time
            for e in world.ledger
            if e.client == mine
            and e.method == "GET"
            and e.path.endswith("/jobs")
            and f"/runs/{kid.run_id}/" in e.path
            and e.time >= kid.job_queued_at
        ]
        if not seen:
            continue
        deadline = seen[0] + latency + float(str(entry["queue-timeout-minutes"])) * 60
        first_cancel = min(
            e.time
            for e in world.ledger
            if e.method == "POST" and e.path.endswith(f"/{kid.run_id}/cancel")
        )
        allowance = DEADLINE_LATENESS + latency * 8 + observed.guard_seconds() + 1e-6
        assert first_cancel <= deadline + allowance, (
            f"queue deadline of {kid.run_id} acted on {first_cancel - deadline:g}s late"
        )


def _check_rounds(run: SimulationRun, outcomes: list[dict[str, object]]) -> None:
    """The waiting rounds the spec asks to log: numbered from 1 per wait, none skipped."""
    numbers = [int(n) for n in re.findall(r"[Rr]ound (\d+)", run.log)]
    waits = 0
    for previous, number in itertools.pairwise([0, *numbers]):
        if number == 1:
            waits += 1
        else:
            assert number == previous + 1, f"round {number} follows round {previous}"
    timed_out = sum(1 for e in outcomes if e["outcome"] == QUEUE_TIMEOUT_OUTCOME)
    late = run.log.count(LATE_QUEUE_CLOCK)  # a deadline that passed during a quota pause
    assert waits >= timed_out - late, "a queue wait without its waiting rounds in the log"


# ------------------------------------------------------------------ what a user loses (issue 27)
#
# Invariant 11: no started workload is cancelled by its coordinator except for a reason the
# specification gives; each cancel is judged from the fake's record of it (`bench/losses.py`).
# Invariant 8: no child is left non-terminal at the coordinator's exit for want of API quota;
# only the loss of its runner, or its job's own timeout in a quota wait it warned of (naming the
# child), may break that.

#: Faults that are API errors (spec: "API/contract errors stop the sequence and clean up the
#: active child"): not the rate limits, which are waited out once a child exists.
API_ERROR_FAULTS = (RETRYABLE_FAULTS - RATE_LIMIT_FAULTS) | {"unauthorized", "forbidden"}


def api_error(entry: LedgerEntry) -> bool:
    """An injected API error (a lost dispatch reply is none: the run-name search finds the run)."""
    lost_dispatch = entry.fault == "lost_reply" and entry.path.endswith("/dispatches")
    return entry.fault in API_ERROR_FAULTS and not lost_dispatch


def api_error_at(world: FakeGitHub, client: int | None) -> float | None:
    """When the client first met an API error."""
    return min((e.time for e in world.ledger if e.client == client and api_error(e)), default=None)


def check_started_workloads(
    world: FakeGitHub,
    run: SimulationRun,
    observed: Observed,
    *,
    execution_minutes: float,
    source_policy: str,
    latency: float,
    job_deadline: float | None = None,
    listing_delay: float = 0.0,
) -> list[StartedCancel]:
    """Invariant 11: every started workload the coordinator cancelled had a reason the spec gives.

    `observed.interrupted_at` is a signal that is not the job's own timeout; `job_deadline`, the
    job's own timeout (a cancel from then on is allowed only in a quota wait warned of).
    """
    mine = _client_of(world, TOKEN)
    context = CancelContext(
        client=mine,
        execution_seconds=execution_minutes * 60,
        source_policy=source_policy,
        signalled_at=observed.interrupted_at,
        api_error_at=api_error_at(world, mine),
        job_deadline=job_deadline,
        latency=latency,
        log=run.log,
        listing_delay=listing_delay,
    )
    cancels = started_cancels(children(world), world.ledger, context)
    lost = [c for c in cancels if c.loss]
    assert not lost, (
        "started workload cancelled by its coordinator for no reason the specification gives: "
        + "; ".join(f"child {c.run_id} at {c.at:g}s (job timeout: {c.job_timeout})" for c in lost)
    )
    return cancels


def children_left_at_exit(world: FakeGitHub, observed: Observed) -> list[int]:
    """Children not over when the coordinator's job ended (its post step, else its main step)."""
    span = observed.span("cleanup") or observed.span("coordinate")
    end = math.inf if span is None else span[1]
    return [
        kid.run_id
        for kid in children(world)
        if kid.completed_at is None or kid.completed_at > end + 1e-6
    ]


def check_no_child_left_for_quota(
    world: FakeGitHub, run: SimulationRun, observed: Observed, *, other_trouble: bool
) -> None:
    """Invariant 8: a child non-terminal at exit has a cause besides the quota.

    `other_trouble`: the world had one (an API fault, GitHub never completing a cancel or never
    showing a run, odd rate-limit headers, a signal: the signal path and the post step keep
    their limits whatever the quota). Otherwise the only allowed cause is the job's own timeout
    in a quota wait warned of beforehand, naming the child.
    """
    if other_trouble:
        return
    names = {kid.run_id: kid.request_id for kid in children(world)}
    left = [
        run_id
        for run_id in children_left_at_exit(world, observed)
        if not warned_of_job_end(run.log, run_id, names[run_id])
    ]
    assert not left, f"children {left} left non-terminal at exit with only the quota in the way"
