"""The one word a gate reads (the `outcome` output): how the coordinator's step ended.

Branch protection and later jobs see only a red step; this word tells "never got a runner" from
"the worker failed". It is derived from the ledger and the type of the error that ended the
sequence, never from a message (`outcome_of` in `action/attempts.py`). The same word leads the
step summary's headline and the title of the error annotation, so the checks list reads
`no-runner: never got a runner`. Every word but `success` still fails the step. Here, in `core`,
because `lint` checks a gate's comparisons against the same words.
"""

from __future__ import annotations

from runner_queue_fallback.core.errors import Interrupted, RQFError

__all__ = [
    "CANCELLED",
    "ERROR",
    "FAILURE",
    "NO_POOL",
    "NO_RUNNER",
    "OUTCOMES",
    "PHRASES",
    "SUCCESS",
    "outcome_of_exception",
    "title",
]

SUCCESS = "success"
FAILURE = "failure"
NO_RUNNER = "no-runner"
#: every candidate proven unable to serve this workflow (`runners-token`): nothing dispatched
NO_POOL = "no-pool"
CANCELLED = "cancelled"
ERROR = "error"
#: Every value of the output, in the order the docs list them.
OUTCOMES = (SUCCESS, FAILURE, NO_RUNNER, NO_POOL, CANCELLED, ERROR)

#: What each word means to a person reading the checks list.
PHRASES = {
    SUCCESS: "the worker succeeded",
    FAILURE: "the worker ran and did not succeed",
    NO_RUNNER: "never got a runner",
    NO_POOL: "no pool can serve this workflow",
    CANCELLED: "the workflow run was cancelled",
    ERROR: "stopped by an error",
}


def outcome_of_exception(exc: BaseException) -> str:
    """The word for a step ended before the sequence could report: a signal, or an error."""
    return CANCELLED if isinstance(exc, Interrupted | KeyboardInterrupt) else ERROR


def title(word: str, error: RQFError | None = None) -> str:
    """The error annotation's title: the word, then its phrase (an error's own title for `error`)."""
    phrase = error.title if word == ERROR and error is not None else PHRASES[word]
    return f"{word}: {phrase}"
