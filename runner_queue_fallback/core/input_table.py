"""Each input of the two actions, described once: name, manifest text, rule, default and help.

Long (two tables of data) because each input of both actions is one row, its manifest text word for
word.

`COORDINATOR` holds action.yml's inputs, `GUARD` those of guard/action.yml and
guard/docker/action.yml. The rest reads an input from here or is checked against it:
`core/inputs.py` takes each input's rule, default and whether it is needed; `commands/flags.py`
builds the flags and their help; `lint` takes its stand-ins. The manifests stay hand-written
(GitHub reads them): tests/test_input_table.py compares each with its table, and the README's
tables are made from the manifests. Light (no pydantic), so `--help` lists inputs cheaply.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from types import MappingProxyType
from typing import Final

__all__ = ["COORDINATOR", "GUARD", "Input", "table"]


@dataclass(frozen=True)
class Input:
    """One input: what its manifest says, how its value is checked, and how it is given by hand."""

    #: as spelled in the manifest (and in `INPUT_<NAME>`, and `--<name>`)
    name: str
    _: KW_ONLY
    #: the manifest's description, word for word (the README's tables show it)
    description: str
    #: which rule of `core/inputs.py` (its `RULES`) checks a given value
    rule: str
    #: the manifest's `required:`
    required: bool = False
    #: the manifest's default, as the runner passes it; omitted by hand, it is read by the same
    #: rule. A `${{ }}` default is the runner's to fill in, so the program needs the value.
    default: str | None = None
    #: read with the pool settings (what `plan` needs); the other inputs are only checked there
    pool: bool = False
    #: a credential: no flag takes it, and it is never printed or sent on
    secret: bool = False
    #: the `--<name>` flag's help, before its default (None: no flag)
    flag: str | None = None
    #: the help's parenthesis for an input without a default: what omitting it means
    omitted: str = "default: none"
    #: what `lint` validates in place of a missing value or an expression (of an input that is
    #: not needed: only when the step sets it)
    stand_in: str | None = None

    @property
    def needed(self) -> bool:
        """Whether the program refuses to run without it: required, or defaulted by the runner."""
        return self.required or self.runner_default

    @property
    def runner_default(self) -> bool:
        """Whether the default is an expression the runner evaluates (`${{ github.token }}`)."""
        return self.default is not None and self.default.startswith("${{")

    @property
    def flag_help(self) -> str:
        """The flag's help: what it takes, then its default as the manifest gives it."""
        if self.default is not None and not self.runner_default:
            return f"{self.flag} (default: {self.default})"
        return f"{self.flag} ({self.omitted})"


def table(*inputs: Input) -> Mapping[str, Input]:
    """The inputs by name, in the manifest's order; a name given twice is a mistake."""
    found = {item.name: item for item in inputs}
    if len(found) != len(inputs):
        raise ValueError(f"an input is listed twice: {[item.name for item in inputs]}")
    return MappingProxyType(found)


_NEEDED = "preflight needs it; default: none"

#: Every coordinator input, in action.yml's order.
COORDINATOR: Final = table(
    Input(
        "workflow",
        rule="workflow-file",
        required=True,
        flag="child workflow file name, e.g. runner-worker.yml",
        omitted=_NEEDED,
        stand_in="runner-worker.yml",
        description=(
            "File name of the child workflow to dispatch, such as runner-worker.yml. It must "
            "contain exactly one job named worker."
        ),
    ),
    Input(
        "workflow-ref",
        rule="branch-or-tag-name",
        required=True,
        flag="branch or tag holding the child workflow, e.g. main",
        omitted=_NEEDED,
        stand_in="main",
        description=(
            "Trusted branch or tag holding the child workflow definition, such as main or a "
            "protected tag. Keep it stable during a sequence."
        ),
    ),
    Input(
        "source-ref",
        rule="source-ref",
        required=True,
        flag="full ref: refs/heads/..., refs/tags/..., refs/pull/N/merge",
        omitted=_NEEDED,
        stand_in="refs/heads/main",
        description=(
            "The source ref the caller approved, written out in full (refs/pull/123/merge, "
            "refs/heads/main)."
        ),
    ),
    Input(
        "source-sha",
        rule="full-sha",
        required=True,
        flag="full 40-hex SHA that source-ref must point at",
        omitted=_NEEDED,
        stand_in="0" * 40,
        description=(
            "Full 40-character SHA that source-ref must point at; the child checks out this SHA."
        ),
    ),
    Input(
        "runner-type",
        rule="runner-type",
        required=True,
        pool=True,
        flag="{runner_types}",
        omitted="required; no default",
        description=(
            "Runner type: cpu (cpu-amd64), cpu-arm64, gpu (gpu-amd64), gpu-arm64; gpu-amd64-<N>gpu"
            " and gpu-arm64-<N>gpu for N GPUs on one worker, N from 2 to 8. Required, even with "
            "runners; every candidate must be its family, architecture and GPU count."
        ),
    ),
    Input(
        "queue-policy",
        rule="queue-policy",
        default="standard",
        pool=True,
        flag="standard or extended",
        description=(
            "standard: the profile's order, 10-minute queue deadlines. extended: CPU 10 / GPU 15 "
            "minutes, then a final 60-minute re-wait where the profile has one."
        ),
    ),
    Input(
        "queue-timeout-minutes",
        rule="queue-minutes",
        pool=True,
        flag="1 to 60: the queue deadline of every candidate without its own",
        omitted="default: the policy's",
        description=(
            "Queue deadline in minutes (1 to 60) for every candidate without its own, except the "
            "extended policy's 60-minute final re-wait; blank takes the policy's default."
        ),
    ),
    Input(
        "execution-timeout-minutes",
        rule="execution-minutes",
        # "Defaults allow 180 minutes of execution" (the specification)
        default="180",
        pool=True,
        flag="whole minutes, 1 to 4320",
        description=(
            "Minutes the worker may run once a runner is allocated; the child job's "
            "timeout-minutes must be at least this."
        ),
    ),
    Input(
        "admission-timeout-minutes",
        rule="admission-minutes",
        default="60",
        pool=True,
        flag="0 to 360; 0 fails at once on a low API quota",
        description=(
            "Minutes (0 to 360) the whole sequence may wait, before its dispatches, for the "
            "repository's shared API quota to cover one more candidate, or for GitHub's secondary "
            "rate limit to let its requests through; past it the job fails with no child "
            "dispatched. 0 fails at once."
        ),
    ),
    Input(
        "runners",
        rule="runners",
        pool=True,
        flag=(
            'JSON array of 1 to 7 {"group", "labels", "queue-timeout-minutes", "os", "arch", '
            '"gpus"} objects (group, labels or both) replacing the profile\'s list, optionally '
            'ending with one {"hosted": "ubuntu-24.04"}'
        ),
        omitted="default: the profile",
        description=(
            'Optional JSON array replacing the whole candidate list: [{"group": "...", "labels": '
            '["..."], "queue-timeout-minutes": 1-60, "os": "linux", "arch": "amd64", "gpus": 0-8}]'
            " (group, labels or both, as runs-on takes them; os, arch and gpus say what the "
            "machine is when its labels do not), optionally ending with one GitHub-hosted runner "
            'for a CPU type, {"hosted": "ubuntu-24.04", "queue-timeout-minutes": 1-60}. Blank '
            "selects the profile defaults; required for the 3 to 8 GPU types."
        ),
    ),
    Input(
        "hosted-last-resort",
        rule="single-line",
        pool=True,
        flag=(
            "a GitHub-hosted Linux label tried after every profile pool, CPU types only, not with "
            "--runners"
        ),
        omitted="default: none",
        description=(
            "A GitHub-hosted Linux runner label (ubuntu-24.04 for cpu-amd64, ubuntu-24.04-arm for "
            "cpu-arm64, or a larger runner's name) tried after every profile pool, with the "
            "action-level queue deadline. Billed, outside the runner groups. CPU runner types "
            'only; not with runners (put {"hosted": ...} last there). Blank: none.'
        ),
    ),
    Input(
        "workload",
        rule="json-object",
        default="{}",
        flag="JSON object forwarded to the child, never secrets",
        stand_in="{}",
        description=(
            "JSON object forwarded unchanged to the child's workload input (a shard id, an "
            "artifact run id, an image digest). Never secrets."
        ),
    ),
    Input(
        "source-policy",
        rule="source-policy",
        default="current",
        flag="current or pinned-after-start",
        stand_in="current",
        description=(
            "current: stop when source-ref moves away from source-sha. pinned-after-start: let an "
            "allocated worker finish its original SHA (trusted cache preparation only)."
        ),
    ),
    Input(
        "api-version",
        rule="api-version",
        default="auto",
        flag="auto, 2026-03-10 or 2022-11-28",
        description=(
            "GitHub REST API version: auto (detect: the first request tells whether the server has"
            " 2026-03-10, whose dispatch reply names the run; older GitHub Enterprise Server "
            "releases get 2022-11-28, where the run is found by its unique run-name), 2026-03-10 "
            "or 2022-11-28."
        ),
    ),
    Input(
        "token",
        rule="token",
        default="${{ github.token }}",
        secret=True,
        stand_in="stand-in",
        description=(
            "Token for the GitHub API; the job's GITHUB_TOKEN needs actions write and contents "
            "read."
        ),
    ),
    Input(
        "runners-token",
        rule="token",
        secret=True,
        description=(
            "Optional second token, only read with: preflight uses it to read the organisation's "
            "runner groups, their runners and its self-hosted-runner policy; the coordinator "
            "reads each candidate's group and the policy once per run and skips a pool proven "
            "unable to serve this workflow. Never used for a write, never saved or sent to the "
            "child. Give a "
            "read-only token from a secret: a fine-grained or GitHub App token with organisation "
            "Self-hosted runners (read) and Actions policies (read), never a classic admin:org "
            "token. Blank: those reads are not made."
        ),
    ),
    Input(
        "app-id",
        rule="app-id",
        flag="a GitHub App's ID or client ID; its key comes from INPUT_APP-PRIVATE-KEY",
        omitted="default: none, token is used",
        stand_in="1",
        description=(
            "Optional GitHub App ID (or client ID). With app-private-key, the coordinator mints "
            "the App's installation token for this repository only (Actions read and write, "
            "Contents read) and uses it for every request in place of token, minting a fresh one "
            "before each expires: the installation has its own API quota, apart from the "
            "repository's GITHUB_TOKEN. The post step mints its own. Blank: token is used."
        ),
    ),
    Input(
        "app-private-key",
        rule="app-private-key",
        secret=True,
        stand_in="-----BEGIN RSA PRIVATE KEY----- (stand-in)",
        description=(
            "The GitHub App's private key (PEM), passed from a secret such as "
            "secrets.APP_PRIVATE_KEY. Needed with app-id. Never printed, saved or sent to the "
            "child."
        ),
    ),
    Input(
        "app-installation-id",
        rule="positive-whole-number",
        flag="the App's installation ID",
        omitted="default: looked up for this repository",
        stand_in="1",
        description=(
            "Optional ID of the App's installation that reaches this repository. Blank: looked "
            "up with the App's JWT (GET /repos/{owner}/{repo}/installation)."
        ),
    ),
)

#: Every guard input, in the order of guard/action.yml and guard/docker/action.yml: five
#: dispatched values, the coordinator's workflow file name(s) and ref, how near a spent quota's
#: reset it waits for, the API version and the token.
GUARD: Final = table(
    Input(
        "request-id",
        rule="single-line",
        required=True,
        description="Request ID the coordinator dispatched this child with (also the run-name).",
    ),
    Input(
        "parent-run-id",
        rule="positive-whole-number",
        required=True,
        description="Run ID of the coordinator workflow run that dispatched this child.",
    ),
    Input(
        "parent-run-attempt",
        rule="positive-whole-number",
        required=True,
        description="Attempt number of the coordinator run; a rerun attempt makes the guard fail.",
    ),
    Input(
        "source-ref",
        rule="source-ref",
        required=True,
        description="Full source ref approved by the coordinator, such as refs/pull/123/merge.",
    ),
    Input(
        "source-sha",
        rule="full-sha",
        required=True,
        description="Full 40-character SHA that source-ref must still point at.",
    ),
    Input(
        "coordinator-workflow",
        rule="workflow-files",
        description=(
            "File name of the coordinator workflow, such as runner-check.yml (several separated by"
            " spaces when more than one coordinator dispatches this child). When set, the guard "
            "refuses a parent run of any other workflow, or of a file in another repository. "
            "Strongly recommended; see the README's trust model."
        ),
    ),
    Input(
        "coordinator-ref",
        rule="branch-or-tag-ref",
        description=(
            "Full ref the coordinator workflow must run from, such as refs/heads/main. When set, "
            "the guard refuses a parent whose workflow ran from any other ref (a branch, a pull "
            "request, a fork). Recommended with coordinator-workflow for a coordinator that runs "
            "on a protected branch; see the README's trust model."
        ),
    ),
    Input(
        "guard-quota-wait-minutes",
        rule="guard-quota-minutes",
        default="10",
        description=(
            "When a read is refused because the repository's API quota is spent and its reset is "
            "at most this many minutes away, the guard waits for the reset, then runs every check "
            "again from the start (0 to 60; 0 fails closed at once). The wait counts against the "
            "child job's timeout-minutes and the coordinator's execution-timeout-minutes; see "
            "docs/guard.md."
        ),
    ),
    Input(
        "api-version",
        rule="api-version",
        default="auto",
        description=(
            "GitHub REST API version: auto (detect on the first request; older GitHub Enterprise "
            "Server releases get 2022-11-28), 2026-03-10 or 2022-11-28. Set it as the "
            "coordinator's."
        ),
    ),
    Input(
        "token",
        rule="token",
        default="${{ github.token }}",
        secret=True,
        description=(
            "Token for the GitHub API; the child's GITHUB_TOKEN needs actions read and contents "
            "read."
        ),
    ),
)
