"""A workflow file as the action and the tools both read it: below `action/` and `tools/`.

The model of a workflow file (`model`: YAML nodes with lines, `uses` refs, findings and the rule
table), the child-file rules the coordinator checks before its first dispatch and `lint` reports
(`child`), the steps that use the coordinator (`coordinator_steps`, with the `runners` value read
past its expressions in `runners_value`), and the timeout arithmetic that `plan`, `lint` and the
coordinator's own job-end check share (`plan`).
"""
