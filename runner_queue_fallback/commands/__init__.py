"""The subcommands behind the composition root (`cli.py`): one module each, imported only when used.

Each module defines `run(args, ctx) -> int` and, when the subcommand takes flags,
`add_arguments(parser)`. A subcommand builds its adapters (HTTP session, clock) from the factories
in `Context` and reads the environment from `ctx.environ`, never from the process: only `cli.main`
chooses between the real ones and those a test or the simulator passes in. This package stays
light, because `--help` of every subcommand loads it.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from runner_queue_fallback.core.actions_io import Reporter

if TYPE_CHECKING:
    import argparse

    import requests

    from runner_queue_fallback.core.clock import Clock
    from runner_queue_fallback.core.inputs import CoordinatorInputs, RunContext
    from runner_queue_fallback.core.main import Main
    from runner_queue_fallback.github.client import GitHubClient
    from runner_queue_fallback.github.tokens import TokenSource

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_OK", "AppInputs", "Command", "Context"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


@dataclass
class Context:
    """What a subcommand may use: the environment, time, HTTP, the root itself and where to write."""

    environ: Mapping[str, str]
    clock_factory: Callable[[], Clock]
    session_factory: Callable[[], requests.Session]
    #: the composition root, for a subcommand that runs others (`simulate` runs the action's steps)
    main: Main
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    #: the random source of admission waits (seeded by the run in a simulation)
    rng: random.Random = field(default_factory=random.Random)

    def reporter(self) -> Reporter:
        """A Reporter writing to stdout and to the runner's files named in the environment."""
        return Reporter(
            self.stdout,
            output_path=_path(self.environ.get("GITHUB_OUTPUT")),
            state_path=_path(self.environ.get("GITHUB_STATE")),
            summary_path=_path(self.environ.get("GITHUB_STEP_SUMMARY")),
            server_url=self.environ.get("GITHUB_SERVER_URL", "").strip().rstrip("/")
            or "https://github.com",
        )

    def client(
        self,
        run: RunContext,
        token: str | TokenSource,
        clock: Clock,
        reporter: Reporter,
        api_version: str,
    ) -> GitHubClient:
        """The GitHub client of a step: this context's HTTP session, logging to its reporter.

        `token`: one token for every request, or a source asked before each (`app_tokens`).
        """
        from runner_queue_fallback.github.client import GitHubClient  # noqa: PLC0415  # --help stays light

        return GitHubClient(
            self.session_factory(),
            run.api_url,
            run.repository,
            token,
            clock,
            log=reporter.log,
            api_version=api_version,
        )

    def runners_client(
        self, run: RunContext, inputs: CoordinatorInputs, clock: Clock, reporter: Reporter
    ) -> GitHubClient | None:
        """The client of `runners-token`, for the runner-group reads only; None when blank.

        Its own client (its own quota, its own API version negotiation), never the one of
        `token`; its patience stays the spec's, so a spent quota is an error at once, not a wait.
        """
        token = inputs.runners_token.get_secret_value()
        return self.client(run, token, clock, reporter, inputs.api_version) if token else None

    def app_tokens(
        self,
        run: RunContext,
        app: AppInputs,
        clock: Clock,
        reporter: Reporter,
        api_version: str,
    ) -> TokenSource:
        """The GitHub App's installation tokens for this repository, minted as they are needed.

        The key (and each of its lines) is masked before it is read; every token minted is
        masked before it is used, and no step saves either.

        Raises:
            InputErrors: an App input is malformed (the key's value is never repeated).

        """
        # App credentials load PyJWT and cryptography: only a step given them pays for that.
        from runner_queue_fallback.github.app_token import AppCredentials, AppTokenSource  # noqa: PLC0415

        reporter.mask(app.private_key)  # before it is read: then each line of it (`secrets`)
        from runner_queue_fallback.core.errors import InputError, InputErrors  # noqa: PLC0415

        try:
            credentials = AppCredentials.read(app.app_id, app.private_key, app.installation_id)
        except InputError as exc:  # a bad input, said as every other one is (exit 2)
            raise InputErrors([exc]) from None
        for secret in credentials.secrets():
            reporter.mask(secret)
        return AppTokenSource(
            self.session_factory(),
            run.api_url,
            run.repository,
            credentials,
            clock,
            api_version=api_version,
            on_token=reporter.mask,
            log=reporter.log,
        )


@dataclass(frozen=True)
class AppInputs:
    """A GitHub App's inputs as given (`app-id`, `app-private-key`, `app-installation-id`)."""

    app_id: str
    private_key: str = field(repr=False)
    installation_id: str = ""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> AppInputs | None:
        """The App's inputs from the step's environment (the post step's too); None: no App."""
        from runner_queue_fallback.core.inputs import env_name  # noqa: PLC0415  # --help stays light

        app_id, key, installation = (
            environ.get(env_name(name), "").strip()
            for name in ("app-id", "app-private-key", "app-installation-id")
        )
        return cls(app_id, key, installation) if app_id and key else None


#: What each subcommand module defines as `run`.
Command = Callable[["argparse.Namespace", Context], int]


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None
