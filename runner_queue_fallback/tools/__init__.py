"""The subcommands beside the action's steps: `lint`, `preflight`, `simulate` and `stats`.

Only `simulate` and `preflight`, which run the action's own steps, import `action/`; what a tool
shares with the action about a workflow file is `workflow/`'s.
"""
