"""One flag per coordinator input its table gives a flag, and `--token-env` (no flag takes a token).

Light (argparse and the input table): `coordinate --help` loads it for `--token-env`.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from runner_queue_fallback.core.actions_io import Reporter
from runner_queue_fallback.core.errors import InputError, InputErrors
from runner_queue_fallback.core.input_names import (
    RUNNERS_TOKEN_VARIABLE,
    TOKEN_VARIABLES,
    unknown_inputs,
)
from runner_queue_fallback.core.input_table import COORDINATOR

__all__ = ["INPUT_HELP", "add_input_flags", "input_flags"]

_PREFIX = "input:"

#: Each input flag's help: what it takes, the allowed values and the default, from the table.
INPUT_HELP = {name: item.flag_help for name, item in COORDINATOR.items() if item.flag is not None}


def input_help(name: str) -> str:
    """An input flag's help; `--runner-type` lists the runner types the profiles define."""
    text = INPUT_HELP[name]
    if "{runner_types}" not in text:
        return text
    # profiles load pydantic and TOML: only a command with input flags pays for them
    from runner_queue_fallback.core.profiles import describe_runner_types, load_profiles  # noqa: PLC0415

    return text.format(runner_types=describe_runner_types(load_profiles()))


def add_input_flags(parser: argparse.ArgumentParser, title: str) -> None:
    """Add `--workflow`, `--runner-type` and the other inputs as a group titled `title`."""
    group = parser.add_argument_group(title)
    for name in INPUT_HELP:
        group.add_argument(
            f"--{name}", dest=f"{_PREFIX}{name}", metavar="VALUE", help=input_help(name)
        )


def input_flags(args: argparse.Namespace) -> dict[str, str]:
    """The inputs given as flags, by input name (as spelled in action.yml)."""
    return {
        key.removeprefix(_PREFIX): value
        for key, value in vars(args).items()
        if key.startswith(_PREFIX) and value is not None
    }


def warn_unknown_inputs(
    environ: Mapping[str, str], known: tuple[str, ...], reporter: Reporter
) -> None:
    """A warning annotation for each `INPUT_*` variable that is no input, beside known ones."""
    for warning in unknown_inputs(environ, known):
        reporter.warning(warning, title="Unknown input")


def add_token_env_flag(parser: argparse.ArgumentParser) -> None:
    """`--token-env NAME`: the variable that holds the token."""
    parser.add_argument(
        "--token-env",
        metavar="NAME",
        help=(
            "the environment variable that holds the token (default: "
            f"{', then '.join(TOKEN_VARIABLES)}); no flag takes the token itself"
        ),
    )


def with_token(environ: Mapping[str, str], token_env: str | None) -> dict[str, str]:
    """`environ` with the `token` input from `--token-env`, else INPUT_TOKEN, else GITHUB_TOKEN.

    The one order every command that talks to GitHub reads the token in.
    """
    return _with_secret(environ, token_env, "token", "--token-env", TOKEN_VARIABLES)


def _with_secret(
    environ: Mapping[str, str],
    named: str | None,
    name: str,
    flag: str,
    defaults: tuple[str, ...],
) -> dict[str, str]:
    """`environ` with the secret input `name` from the variable `flag` names, else `defaults`.

    The first of `defaults` that is set wins; a named variable that is not set is an input error.
    """
    found = dict(environ)
    names = (named,) if named else defaults
    value = next((environ[n] for n in names if environ.get(n, "").strip()), None)
    if named and value is None:
        problem = (
            f"was to come from {named} ({flag}), which is not set or blank: export {named} "
            f"first, or name the variable that holds the {name}"
        )
        raise InputErrors([InputError(name, problem)])
    if value is not None:
        found[defaults[0]] = value  # the runner's variable for the input, INPUT_<NAME>
    return found


def add_runners_token_env_flag(parser: argparse.ArgumentParser) -> None:
    """`--runners-token-env NAME`: the variable that holds `runners-token`."""
    parser.add_argument(
        "--runners-token-env",
        metavar="NAME",
        help=(
            "the environment variable that holds the optional read-only runners-token (default: "
            f"{RUNNERS_TOKEN_VARIABLE}); no flag takes the token itself"
        ),
    )


def with_runners_token(environ: Mapping[str, str], token_env: str | None) -> dict[str, str]:
    """`environ` with the `runners-token` input from `--runners-token-env` when it names one."""
    return _with_secret(
        environ, token_env, "runners-token", "--runners-token-env", (RUNNERS_TOKEN_VARIABLE,)
    )
