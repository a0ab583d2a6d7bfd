"""Queue insight: measure each pool's real queue waits from past children; tune the fallback.

`history` reads the children through the client, `survival` estimates wait distributions
(Kaplan-Meier, timed-out children censored), `recommend` compares orders and deadlines, `report`
prints them, `replay` checks a configuration with the real coordinator on sampled waits, `plot`
draws them (optional extra), `command` is the CLI.
"""
