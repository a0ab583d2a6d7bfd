"""The phases of the fallback sequence, one module each; `action/coordinator.py` runs them in order.

- `context`: what every phase shares (inputs, client, clock, reporter, the active child).
- `dispatch`: before dispatch (source ref, workflow definition) and the one dispatch POST.
- `startup`: the 2-minute startup window, where identity and the worker job become visible.
- `queue`: queued; polls that land one on the deadline, then the fresh read.
- `cancellation`: cancel after a queue timeout and prove that nothing ran.
- `execution`: a runner was seen; wait for the result within the execution timeout.
"""
