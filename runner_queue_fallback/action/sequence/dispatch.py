"""Before and at dispatch: the checks that gate it, the one POST, and a lost reply's recovery.

"The workflow-definition SHA is checked for each dispatch." "Dispatch POSTs are never retried; ...
an ambiguous response is recovered by the unique run-name for cancellation, never by dispatching a
duplicate." A dispatch refused by a rate limit created nothing: after admission's wait it is sent
again, with its request id, once every check before it has passed again (a departure).
"""

from __future__ import annotations

from runner_queue_fallback.action.attempts import Attempt, AttemptState
from runner_queue_fallback.action.cleanup import RunNameSearch
from runner_queue_fallback.action.observe import Expected
from runner_queue_fallback.action.sequence import admission, run_name
from runner_queue_fallback.action.sequence.child_workflow import read_definition
from runner_queue_fallback.action.sequence.facts import (
    Became,
    ChildFound,
    CopyFound,
    DefinitionRead,
    DispatchRefused,
    DispatchSent,
    Next,
    Phase,
    PhaseResult,
    RunUnseen,
)
from runner_queue_fallback.action.sequence.quota_pause import through_quota
from runner_queue_fallback.action.sequence.state import SequenceState
from runner_queue_fallback.core import hand_off, timing
from runner_queue_fallback.core.errors import (
    AppTokenUnavailable,
    DeadlineExceeded,
    DispatchAmbiguous,
    GitHubAPIError,
    GitHubError,
    QuotaSpent,
    SequenceError,
)
from runner_queue_fallback.github.models import WorkflowRun

__all__ = ["dispatch", "find_interrupted_dispatch", "preflight"]


def preflight(seq: SequenceState, attempt: Attempt) -> Phase[None]:
    """Source still at source-sha; workflow definition unchanged since the first dispatch."""
    if attempt.number > 1:
        seq.check_parent_still_active()
    seq.check_source()
    commit, blob = read_definition(seq)  # before the first dispatch: the child's rules too
    yield DefinitionRead(commit, blob)  # the first blob read is the one every later must match
    if blob != seq.definition_sha:
        raise SequenceError(
            f"workflow definition {seq.expected_path} at {seq.inputs.workflow_ref!r} changed "
            f"during the sequence: expected blob {seq.definition_sha}, observed {blob}. Keep "
            "workflow-ref stable (a protected tag avoids this)"
        )


def dispatch(seq: SequenceState, attempt: Attempt) -> Phase[PhaseResult]:
    """Send the one dispatch POST of this candidate; its run becomes the active child."""
    # The child must run the very commit whose definition the preflight just compared.
    expected = Expected(attempt.request_id, seq.expected_path, seq.commit)
    inputs = {
        "request-id": attempt.request_id,
        "parent-run-id": str(seq.ctx.run_id),
        "parent-run-attempt": str(seq.ctx.run_attempt),
        "source-ref": seq.inputs.source_ref,
        "source-sha": seq.inputs.source_sha,
        "runner": attempt.candidate.runner_json(),
        "workload": seq.inputs.workload,
    }
    again = attempt.state is AttemptState.REFUSED  # by a rate limit: its refusal is over
    hand_off.save_dispatch(
        seq.report, attempt.request_id, seq.clock.now(), seq.client.version, again=again
    )
    yield DispatchSent(expected, seq.clock.monotonic(), seq.client.stats.quota_waited)
    try:
        reply = seq.client.dispatch_workflow(seq.inputs.workflow, seq.inputs.workflow_ref, inputs)
    except DispatchAmbiguous as exc:
        yield Became(AttemptState.REPLY_LOST)
        seq.report.warning(str(exc), title="Ambiguous dispatch")
        return (yield from _recover_lost_dispatch(seq, attempt))
    except (GitHubAPIError, AppTokenUnavailable) as exc:
        # A definite refusal (4xx, never 408: that one is ambiguous), or no token to send it
        # with: no run was created, so neither this step nor the post step has anything to look
        # for or clean up. A rate limit is admission's: wait, then check and dispatch again.
        yield DispatchRefused()
        hand_off.save_refused(seq.report, attempt.request_id)
        limit = admission.rate_limit_behind(exc)
        if limit is None:
            raise
        seq.report.log(
            f"Dispatch of child {attempt.request_id} refused by a rate limit, so no run was "
            f"created; it goes again, with the same request id, after admission's wait: {exc}"
        )
        yield from admission.wait_out_limit(seq, attempt, limit)
        return PhaseResult(Next.ADMISSION)
    if reply is None:  # the older contract: accepted, run unknown (run_name.py)
        hand_off.save_api_version(seq.report, seq.client.version)  # a 204 may have moved it
        found = yield from run_name.find_dispatched_run(seq, attempt)
        if found is not None:
            return found
        assert attempt.run_url is not None  # noqa: S101  # found, or the search ended the sequence
        url = attempt.run_url
    else:
        yield ChildFound(reply.workflow_run_id, reply.html_url)
        url = reply.html_url
    yield Became(AttemptState.DISPATCHED)
    seq.report.notice(
        f"Child {attempt.request_id} dispatched to {attempt.candidate.pool_text}: {url}",
        title=f"Candidate {attempt.number}",
    )
    return PhaseResult(Next.STARTUP)


def find_interrupted_dispatch(seq: SequenceState, deadline: float) -> Phase[None]:
    """A signal came while a dispatch was in flight: find its runs by run-name before `deadline`.

    The POST may have created the run; without its id nothing would cancel it. Once a listing
    shows runs bearing the request id, what is left of the grace cancels and confirms every one
    of them. The post step, which follows every signal, lists again for 2 minutes: a listing
    that lags cannot hide the real child behind a copy.
    """
    attempt = seq.in_flight
    if attempt is None:
        return
    search = run_name.named_search(seq, attempt)
    while True:
        try:
            new = _look(seq, attempt, search, deadline, cancel_now=False)  # the cleanup is next
        except DeadlineExceeded as exc:  # a quota or a rate limit asks for more than the grace:
            seq.report.log(f"Looking for run-name {attempt.request_id}: {exc}")
            break  # the signal's grace keeps its limit, and a refused listing is not re-sent
        yield from _take(seq, attempt, search, new)
        if search.found:
            break
        # The grace is short: wait half of what is left, so one more look and its reply fit.
        wait = min(timing.STARTUP_POLL_SECONDS, (deadline - seq.clock.monotonic()) / 2)
        if wait < 1.0:
            break
        seq.clock.sleep(wait)
    if search.found:
        seq.report.log(f"The step was cancelled during the dispatch: {_named(search)}")
        return
    seq.report.warning(
        f"the step was cancelled while child {attempt.request_id} was being dispatched, and "
        f"no run with run-name {attempt.request_id} appeared within the signal grace; if one "
        "appears later, cancel it",
        title="Child run not found",
    )


def _look(
    seq: SequenceState,
    attempt: Attempt,
    search: RunNameSearch,
    deadline: float,
    *,
    cancel_now: bool,
) -> list[WorkflowRun]:
    """One listing by run-name: the runs new to it (each cancelled at once, if `cancel_now`).

    A listing that fails is logged, and lists nothing new.
    """
    try:
        new = search.look(deadline)
    except QuotaSpent:
        raise  # the caller decides whether to pause for the reset
    except GitHubError as exc:
        if isinstance(exc, DeadlineExceeded) and not cancel_now:
            raise  # the signal's grace: a wait beyond what is left of it ends the search
        seq.report.log(f"Looking for run-name {attempt.request_id}: {exc}")
        return []
    if cancel_now:
        search.cancel(new, deadline, seq.report.log)
    return new


def _take(
    seq: SequenceState, attempt: Attempt, search: RunNameSearch, new: list[WorkflowRun]
) -> Phase[None]:
    """Each new run is handed to the cleanup.

    The run created first becomes the active child; every other one is cancelled and confirmed
    with it (a run bearing our request id that we did not dispatch is a copy).
    """
    if not new:
        return
    first, *rest = search.ordered
    if first.id != seq.active:
        later = seq.active  # an earlier run was listed late: the one held so far is a copy
        yield ChildFound(first.id, first.html_url, by_name=True)
        if later is not None:
            yield CopyFound(later)
    for run in rest:
        yield CopyFound(run.id)
    if rest:
        seq.report.warning(
            f"{len(search.found)} runs bear run-name {attempt.request_id}: "
            f"{', '.join(str(run.id) for run in search.ordered)}; every one but the run created "
            "first was dispatched by someone else. All are cancelled",
            title="Run-name not unique",
        )


def _named(search: RunNameSearch) -> str:
    """Which runs bearing the request id were found (and are cancelled)."""
    runs = search.ordered
    if len(runs) == 1:
        return f"run {runs[0].id} with run-name {search.run_name} was found and is cancelled"
    ids = ", ".join(str(run.id) for run in runs)
    return (
        f"runs {ids} bear run-name {search.run_name} (run {runs[0].id} was created first; any "
        "other is a copy someone else dispatched): all were found and are cancelled"
    )


def _recover_lost_dispatch(seq: SequenceState, attempt: Attempt) -> Phase[PhaseResult]:
    """Find every run by its unique run-name, cancel them, and stop: never re-dispatch.

    The listing goes on to the end of the startup window, each run cancelled as it is listed.
    A run may exist: a spent quota pauses the window (nothing is sent before the reset), which
    then goes on for the time it had left.
    """
    assert attempt.dispatched_at is not None  # noqa: S101  # set just before dispatch
    yield RunUnseen()  # a run may exist: never abandoned to the quota
    window = seq.startup_window(attempt)
    search = run_name.named_search(seq, attempt)
    while seq.clock.monotonic() + timing.STARTUP_POLL_SECONDS <= window():
        seq.clock.sleep(timing.STARTUP_POLL_SECONDS)
        # A listing the spent quota stopped is sent again at its reset.
        new = through_quota(
            seq,
            lambda: _look(seq, attempt, search, window(), cancel_now=True),
            lambda: run_name.search_paused(seq, attempt, window()),
        )
        yield from _take(seq, attempt, search, new)
    if search.found:
        error = SequenceError(
            f"the dispatch reply was lost; {_named(search)}; no other pool is tried"
        )
        return PhaseResult(Next.OVER, error=error)
    return PhaseResult(
        Next.OVER,
        error=SequenceError(
            f"the dispatch reply was lost and no run with run-name {attempt.request_id} appeared "
            "within 2 minutes; if one appears later, cancel it; no other pool is tried"
        ),
    )
