"""The phases of the fallback sequence, one module each; `action/coordinator.py` runs them.

Each phase reads `state` and yields the facts it finds (`facts`); it returns a `PhaseResult`
naming the next phase. The coordinator applies the facts (`action/ledger.py`).

- `state`: what every phase reads (inputs, client, clock, reporter, the active child).
- `facts`: what a phase finds and returns; `quota_pause`: the one wait for a spent quota.
- `admission`, `job_time`, `child_workflow`: before a dispatch (quota, the job's end, the child).
- `dispatch`: before dispatch (source ref, workflow definition) and the one dispatch POST;
  `run_name`: a run found by its run-name (an older server, a lost reply).
- `startup`: the 2-minute startup window, where identity and the worker job become visible.
- `queue`: queued; polls that land one on the deadline, then the fresh read.
- `cancellation`: cancel after a queue timeout and prove that nothing ran.
- `execution`: a runner was seen; wait for the result within the execution timeout.
"""
