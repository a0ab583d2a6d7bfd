"""The GitHub REST API as the action uses it: one client, typed replies, the retry policy.

Import from the modules (`github.client`, `github.models`, `github.versions`): this package file
imports nothing, so the light modules (`versions`, which the input rules read) stay light.
"""
