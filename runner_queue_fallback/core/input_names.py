"""The names of the two actions' inputs, and the name a typo meant, in one light module.

The names come from the tables of `input_table`; `inputs` (with pydantic) validates the values,
and the composition root lists the names in `--help` without loading pydantic.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

from runner_queue_fallback.core.input_table import COORDINATOR, GUARD

__all__ = [
    "COORDINATOR_INPUTS",
    "GUARD_INPUTS",
    "RUNNERS_TOKEN_VARIABLE",
    "SECRET_INPUTS",
    "TOKEN_VARIABLES",
    "closest",
    "unknown_inputs",
]

#: Where a command run by hand finds the token, in this order, unless `--token-env` names one.
TOKEN_VARIABLES = ("INPUT_TOKEN", "GITHUB_TOKEN")

#: Every coordinator input, as spelled in action.yml.
COORDINATOR_INPUTS = tuple(COORDINATOR)
#: The inputs that hold a credential: no flag takes one, and none is ever printed or sent on.
SECRET_INPUTS = tuple(name for name, item in COORDINATOR.items() if item.secret)
#: Where `preflight` finds `runners-token` unless `--runners-token-env` names a variable.
RUNNERS_TOKEN_VARIABLE = "INPUT_RUNNERS-TOKEN"  # noqa: S105  # a variable name, not a secret
#: Every guard input, as spelled in guard/action.yml.
GUARD_INPUTS = tuple(GUARD)


def closest(given: str, options: Iterable[str]) -> str | None:
    """The option a typo most likely meant (`gpuu` -> `gpu`, `pinned` -> `pinned-after-start`)."""
    typed, choices = given.strip().lower(), list(options)
    started = [option for option in choices if typed and option.startswith(typed)]
    if len(started) == 1:
        return started[0]
    found = difflib.get_close_matches(typed, choices, n=1)
    return found[0] if found else None


def unknown_inputs(environ: Mapping[str, str], known: Iterable[str]) -> list[str]:
    """A warning for each `INPUT_*` variable that is no input, beside ones that are.

    A misspelt input (`INPUT_RUNNER-TYPES`) is otherwise ignored without a word. Alone (no known
    input set) they are someone else's variables, and say nothing.
    """
    names = {f"INPUT_{name.upper()}": name for name in known}
    names |= {key.replace("-", "_"): name for key, name in names.items()}
    given = [key for key in environ if key.startswith("INPUT_")]
    if not any(key in names for key in given):
        return []
    found = []
    for key in sorted(key for key in given if key not in names):
        spelled = key.removeprefix("INPUT_").lower().replace("_", "-")
        near = closest(spelled, names.values())
        meant = f"; did you mean {near} ({f'INPUT_{near.upper()}'})?" if near else ""
        found.append(f"{key} is not an input of this action and is ignored{meant}")
    return found
