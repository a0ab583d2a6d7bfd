"""Every timing and retry number of the specification, named, in one place.

Each constant cites the line of the specification ("Behavior and limits") that it implements.
"""

from typing import Final

# "allows up to two minutes for the parent's initial queued/requested/pending state or HTTP 404
#  to become visible as active, polling every five seconds"
PARENT_GRACE_SECONDS: Final = 120.0
PARENT_POLL_SECONDS: Final = 5.0

# "A newly dispatched child gets a two-minute startup window ... The first check waits fifteen
#  seconds, counted within that window; pending metadata is then checked every five seconds."
STARTUP_WINDOW_SECONDS: Final = 120.0
STARTUP_FIRST_CHECK_SECONDS: Final = 15.0
STARTUP_POLL_SECONDS: Final = 5.0

# "Poll once per minute while queued or executing" (executing; queued departs, see below)
EXECUTION_POLL_SECONDS: Final = 60.0

# "Run and job metadata are checked together every five seconds within one two-minute
#  cancellation confirmation window"
CANCEL_WINDOW_SECONDS: Final = 120.0
CANCEL_POLL_SECONDS: Final = 5.0

# "Override from 1 to 60 minutes" (the policies' own deadlines are in profiles/*.toml)
QUEUE_MINUTES_MIN: Final = 1
QUEUE_MINUTES_MAX: Final = 60
# Not in the spec: `lint` and `plan` warn below this deadline, which stays allowed.
# GitHub's broker offers a queued job to idle self-hosted runners after about 60 s, and re-queues
# a job whose assigned runner does not pick it up within 60 s (reference/github-api.md, 12).
SHORT_QUEUE_MINUTES: Final = 2
BROKER_DELAY_SECONDS: Final = 60.0
REQUEUE_SECONDS: Final = 60.0

# "Defaults allow 180 minutes of execution": the default is in core/input_table.py
EXECUTION_MINUTES_MAX: Final = 4320  # 3 days; a job on a self-hosted runner may run up to 5

# GitHub ends a job on a GitHub-hosted runner after 6 hours: a coordinator there must fit in it.
HOSTED_JOB_LIMIT_MINUTES: Final = 360

# "One to seven candidates"
MAX_CANDIDATES: Final = 7

# "Reads and cancellation honor rate-limit reset/Retry-After headers with at most two retries of
#  at most one minute each. Network/timeouts, malformed JSON, HTTP 408 and HTTP 5xx responses also
#  get at most two retries for reads/cancellation, normally after 5s and 10s."
MAX_RETRIES: Final = 2
TRANSIENT_BACKOFF_SECONDS: Final = (5.0, 10.0)
RATE_LIMIT_WAIT_CAP_SECONDS: Final = 60.0

# Not in the spec: how long one HTTP request may take before it counts as a timeout.
# GitHub itself ends a request after 10 s of processing.
REQUEST_TIMEOUT_SECONDS: Final = 15.0

# "SIGINT ... If it has not exited after 7500 ms, the runner sends SIGTERM" (actions/runner).
# Cleanup after a signal must fit in the grace; we keep a margin for the container's exit.
SIGNAL_CLEANUP_BUDGET_SECONDS: Final = 6.0

# Timeout budget the caller's job needs: "Set the parent timeout above all queue budgets, one
# execution budget and cleanup time." Per candidate: startup window + cancellation window.
PER_CANDIDATE_OVERHEAD_MINUTES: Final = (STARTUP_WINDOW_SECONDS + CANCEL_WINDOW_SECONDS) / 60
PARENT_GRACE_MINUTES: Final = PARENT_GRACE_SECONDS / 60

# -- the shared API quota (departures from the spec are listed in the README) ---------------------

# GitHub's primary quota is an hourly window: no reset is ever more than an hour away. A wait for
# a reset is bounded by this (plus a margin for the clocks), whatever header asked for more.
QUOTA_WINDOW_SECONDS: Final = 3600.0
RESET_WAIT_MAX_SECONDS: Final = QUOTA_WINDOW_SECONDS + 60.0

# Secondary limit without `retry-after` and with quota left: "wait for at least one minute before
# retrying ... increase the time between retries exponentially" (GitHub, best practices).
SECONDARY_BACKOFF_FIRST_SECONDS: Final = 60.0
# Once a child exists, how many rate-limit waits one call may take (each a reset, a retry-after
# or a back-off step) before the error is reported: the waits are long, the count is small.
PATIENT_RATE_LIMIT_WAITS: Final = 4

# Admission before a dispatch: when the quota is short, the wait until the reset gets a random
# extra of up to this much, so coordinators that waited together do not all wake together.
ADMISSION_SPREAD_SECONDS: Final = 300.0
# A secondary limit before any child: GitHub's wait gets a random extra of up to this much, so
# coordinators refused in the same minute (a fleet that started together) come back apart.
SECONDARY_SPREAD_SECONDS: Final = 120.0
# `admission-timeout-minutes`: the most a sequence may wait for admission in all (its default is
# in core/input_table.py).
ADMISSION_MINUTES_MAX: Final = HOSTED_JOB_LIMIT_MINUTES

# The post step may wait this long in all after a cancellation: GitHub ends a post step 5 minutes
# after the job is cancelled; a minute is left for the container and the summary.
POST_STEP_GRACE_SECONDS: Final = 300.0
POST_STEP_LIMIT_SECONDS: Final = POST_STEP_GRACE_SECONDS - 60.0

# -- the coordinator's own job (no wait of ours outlives it) ------------------------------------

# GitHub's `timeout-minutes` of a job (and of a step) that sets none.
DEFAULT_JOB_TIMEOUT_MINUTES: Final = 360
# When the coordinator's job is not found among its run's jobs, it is taken to have started this
# long before the coordinator's step: the runner's job set-up and the action's image build.
JOB_SETUP_SECONDS: Final = 300.0
# After an added wait, a dispatch needs the candidate's whole time (startup window, queue deadline,
# cancellation window, execution timeout) plus this for the post step, left in the job.
POST_STEP_JOB_SECONDS: Final = POST_STEP_GRACE_SECONDS

# Queued (not the spec's "poll once per minute"; a departure listed in the README): far from the
# deadline the child is read every QUEUE_POLL_FAR_SECONDS; nearer than QUEUE_NEAR_FACTOR times
# that, the interval shrinks to a third of the time left, never below QUEUE_POLL_NEAR_SECONDS;
# one poll always lands on the deadline.
QUEUE_POLL_FAR_SECONDS: Final = 240.0
QUEUE_POLL_NEAR_SECONDS: Final = 60.0
QUEUE_NEAR_FACTOR: Final = 3.0
# While queued and nothing moves, the source ref and the parent run are read this often (the
# guard still checks both when the child starts; the preflight checks them before a fallback).
QUEUE_CHECKS_SECONDS: Final = 900.0

# -- the guard's wait for a spent quota (a departure: docs/departures.md) -----------------------

# `guard-quota-wait-minutes` (its default is in core/input_table.py): a guard refused for a spent
# primary quota whose reset is at most this far away waits for it and runs every check again (0:
# it fails closed at once, as the spec's two-minute initial check does). No reset is more than an
# hour away: 60 is the most.
GUARD_QUOTA_WAIT_MINUTES_MAX: Final = 60
# The longest a guard that waits can take before its workload starts, in minutes: its initial
# check (up to 2 minutes), the wait, and every check again (up to 2 minutes).
GUARD_CHECK_MINUTES: Final = PARENT_GRACE_SECONDS / 60
