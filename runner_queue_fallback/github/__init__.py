"""The GitHub REST API as the action uses it: one client, typed replies, the retry policy.

`client.GitHubClient` composes the concerns, one module each: `transport` (send, parse, map
errors, redact), `versions` (API-version negotiation), `quota` (the quota's state and waits),
`calls` (attempts under `retry`), and the endpoints `runs`, `listing` and `refs`; `models` holds
the typed replies. Import from the modules: this package file imports nothing, so the light
modules (`versions`, which the input rules read) stay light.
"""
