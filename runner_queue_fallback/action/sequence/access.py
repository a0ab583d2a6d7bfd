"""Before a dispatch, with `runners-token`: a pool proven unable to serve the child is skipped.

A pool whose runner group cannot serve the child (absent, the repository not granted, the
workflow not admitted, the organisation's policy off) would hold its job queued until the
deadline: such a candidate is skipped at once, with no dispatch and no queue time, and the
sequence goes on to the next. Anything short of proof dispatches as without the token. The reads
are `PoolAccess`'s (`action/pool_access.py`), made with the runners token's own client, each at
most once per sequence; without the token nothing is read and nothing is said.
"""

from __future__ import annotations

from runner_queue_fallback.action.attempts import Attempt
from runner_queue_fallback.action.pool_access import NotProven, PoolAccess, Skip, Usable
from runner_queue_fallback.action.sequence.facts import Next, Phase, PhaseResult, Skipped
from runner_queue_fallback.action.sequence.state import SequenceState

__all__ = ["check_access"]


def check_access(seq: SequenceState, attempt: Attempt, access: PoolAccess) -> Phase[PhaseResult]:
    """Skip a candidate proven unusable (the next candidate, at once); else on to the dispatch."""
    verdict = access.verdict(attempt.candidate)
    where = seq.candidate_text(attempt)
    match verdict:
        case Skip():
            yield Skipped(verdict)
            seq.report.log(f"{where}: {verdict.line}")  # the detail is the organisation's text
            return PhaseResult(Next.NEXT_CANDIDATE)
        case NotProven(why) if access.enabled:
            seq.report.log(f"{where}: its pool is not proven unable to serve the child ({why})")
        case Usable(detail) if access.enabled:
            seq.report.log(f"{where}: {detail}")
    return PhaseResult(Next.DISPATCH)
