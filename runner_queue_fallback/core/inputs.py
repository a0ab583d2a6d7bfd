"""The action inputs, read the way a container action receives them, with every rule of the spec.

Long (every input rule) because each rule of the specification, with its error text and
suggestions, is validated in one model so errors are collected per input.

A Docker action gets each input as `INPUT_<NAME>` with the name upper-cased and hyphens kept
(`INPUT_SOURCE-REF`); a blank value means the input was omitted. Every error names the input as
spelled in action.yml, shows what was given (never the token) and what is allowed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, SecretStr

from runner_queue_fallback.core import timing
from runner_queue_fallback.core.api_versions import API_VERSION_CHOICES, AUTO, ApiVersionSetting
from runner_queue_fallback.core.errors import InputError, InputErrors
from runner_queue_fallback.core.hosted import hosted_candidate, hosted_problem
from runner_queue_fallback.core.input_names import (
    COORDINATOR_INPUTS,
    GUARD_INPUTS,
    TOKEN_VARIABLES,
    closest,
)
from runner_queue_fallback.core.input_table import COORDINATOR, GUARD, Input
from runner_queue_fallback.core.overrides import parse_json, resolve_runners
from runner_queue_fallback.core.profiles import Candidate, Profile

__all__ = [
    "CHILD_INPUTS",
    "COORDINATOR_INPUTS",
    "FULL_SHA",
    "GUARD_INPUTS",
    "OTHER_RULES",
    "RULES",
    "TOKEN_VARIABLES",
    "CoordinatorInputs",
    "GuardInputs",
    "InputErrors",
    "PoolSettings",
    "RunContext",
    "closest",
    "env_name",
    "guard_quota_wait_minutes",
    "how_to_supply",
    "read_coordinator_inputs",
    "read_guard_inputs",
    "read_pool_settings",
    "read_run_context",
    "valid_ref_name",
    "whole_number",
]

#: The inputs the coordinator dispatches, in the order the child workflow declares them.
CHILD_INPUTS = (
    "request-id",
    "parent-run-id",
    "parent-run-attempt",
    "source-ref",
    "source-sha",
    "runner",
    "workload",
)

QueuePolicy = Literal["standard", "extended"]
SourcePolicy = Literal["current", "pinned-after-start"]

FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
_SOURCE_REF = re.compile(r"^refs/(heads/\S+|tags/\S+|pull/\d+/(merge|head))$")
_WORKFLOW_FILE = re.compile(r"^[A-Za-z0-9_.-]+\.ya?ml$")
#: float() alone also takes '1_0', full-width digits and 'inf'
_DECIMAL = re.compile(r"^[0-9]{1,4}(\.[0-9]{1,6})?$")

#: The dispatch inputs payload is limited to 65,535 characters; leave room for the other six.
_WORKLOAD_MAX_CHARS = 60_000

T = TypeVar("T")
S = TypeVar("S", bound=str)
#: A rule: the input's name and its given value in; the value as the program uses it out, or an
#: InputError naming the input.
Rule = Callable[[str, str], object]


def env_name(name: str) -> str:
    """The environment variable the runner sets for input `name` (hyphens kept)."""
    return "INPUT_" + name.replace(" ", "_").upper()


def _raw(environ: Mapping[str, str], name: str) -> str | None:
    """The input's value, or None when omitted or blank (the underscore spelling is a fallback)."""
    for key in (env_name(name), env_name(name).replace("-", "_")):
        value = environ.get(key)
        if value is not None and value.strip():
            return value.strip()
    return None


class PoolSettings(BaseModel):
    """What decides where the child may run and for how long: the inputs `plan` needs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    runner_type: str
    profile: Profile
    queue_policy: QueuePolicy
    queue_timeout_minutes: float | None
    execution_timeout_minutes: int
    candidates: tuple[Candidate, ...]
    overridden: bool
    #: the total a sequence may wait for API quota before its dispatches (0: not at all)
    admission_timeout_minutes: int


class CoordinatorInputs(BaseModel):
    """Every coordinator input, validated."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workflow: str
    workflow_ref: str
    source_ref: str
    source_sha: str
    pools: PoolSettings
    workload: str
    source_policy: SourcePolicy
    token: SecretStr
    #: `auto` (detect on the first reply), `2026-03-10` or `2022-11-28`
    api_version: ApiVersionSetting = AUTO
    #: the optional read-only token for runner groups and runners (empty: not given); only read
    #: with, never used for a write, saved or sent to the child
    runners_token: SecretStr = SecretStr("")
    #: a GitHub App's ID or client ID (empty: no App; `token` is used)
    app_id: str = ""
    #: the App's private key (PEM; empty without an App): never printed, saved or sent on
    app_private_key: SecretStr = SecretStr("")
    #: the App's installation on this repository (None: looked up with the App's JWT)
    app_installation_id: int | None = None

    @property
    def app(self) -> bool:
        """Whether the coordinator's requests go out with the App's installation token."""
        return bool(self.app_id)


class GuardInputs(BaseModel):
    """Every guard input, validated."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    request_id: str
    parent_run_id: int
    parent_run_attempt: int
    source_ref: str
    source_sha: str
    #: the coordinator workflow file names the parent run may be a run of (empty: not checked)
    coordinator_workflows: tuple[str, ...] = ()
    #: the full ref the parent's workflow must run from, such as refs/heads/main (empty: not checked)
    coordinator_ref: str = ""
    token: SecretStr
    api_version: ApiVersionSetting = AUTO
    #: how near a spent quota's reset may be for the guard to wait for it (0: it never waits)
    quota_wait_minutes: int


class RunContext(BaseModel):
    """What the runner tells every step about the run it is in."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repository: str
    run_id: int
    run_attempt: int
    api_url: str
    server_url: str
    #: what tells the coordinator when its job ends (`action/sequence/job_time.py`); "" when not set.
    #: Never an input error: a value that cannot be used only means the job's end is unknown.
    #: GITHUB_WORKFLOW_REF: `owner/repo/.github/workflows/x.yml@ref`, the file of this run
    workflow_ref: str = ""
    #: GITHUB_WORKFLOW_SHA: the commit that file is read at (the ref may have moved since)
    workflow_sha: str = ""
    #: GITHUB_JOB: the job's key in that file (not its displayed name)
    job: str = ""
    #: RUNNER_NAME: tells this job from the others of the run attempt
    runner_name: str = ""


def how_to_supply(name: str, *, flags: bool) -> str:
    """How a missing input is given where its user is: a workflow's `with:`, and by hand.

    `flags`: the command takes input flags (`plan`, `preflight`, `coordinate`); the guard does not.
    No flag ever takes the token: it would land in shell history and process lists.
    """
    if name == "token":
        return (
            "in a workflow it defaults to the job's GITHUB_TOKEN (or set `token:` under the "
            "step's `with:`, from a secret); by hand, export it as "
            f"{' or '.join(TOKEN_VARIABLES)}, or name the variable that holds it with "
            "--token-env NAME (no flag takes the token itself)"
        )
    by_hand = f"--{name} VALUE or {env_name(name)}" if flags else env_name(name)
    return f"in a workflow, set `{name}:` under the step's `with:`; by hand, {by_hand}"


class _Reader:
    """Reads inputs one by one and collects every error instead of stopping at the first.

    Each input's rule, default and whether it is needed come from its row of `inputs` (a table).
    """

    def __init__(
        self, environ: Mapping[str, str], inputs: Mapping[str, Input], *, flags: bool = True
    ) -> None:
        self.environ = environ
        self.inputs = inputs
        self.flags = flags
        self.errors: list[InputError] = []

    def get(self, name: str, absent: T, rule: Rule | None = None) -> T:
        """The input checked by its rule; omitted, its default by the same rule, else `absent`.

        `rule` replaces the table's where the allowed values are known only now (the runner types).
        """
        item = self.inputs[name]
        check = rule or RULES[item.rule]
        if _raw(self.environ, name) is None and item.default is not None and not item.needed:
            return cast("T", check(name, item.default))
        return self._read(name, check, absent, required=item.needed)

    def check(self, name: str) -> None:
        """Check the input by its rule if it is given; omitted, it is no error here."""
        self._read(name, RULES[self.inputs[name].rule], None, required=False)

    def _read(self, name: str, rule: Rule, absent: T, *, required: bool) -> T:
        raw = _raw(self.environ, name)
        if raw is None:
            if required:
                how = how_to_supply(name, flags=self.flags)
                self.errors.append(InputError(name, f"is required and was not supplied: {how}"))
            return absent
        try:
            return cast("T", rule(name, raw))
        except InputError as error:
            self.errors.append(error)
            return absent

    def done(self) -> None:
        if self.errors:
            raise InputErrors(self.errors)


def _choice(options: tuple[S, ...]) -> Callable[[str, str], S]:
    def parse(name: str, raw: str) -> S:
        for option in options:
            if raw == option:
                return option
        raise InputError(
            name,
            "is not one of the allowed values",
            given=raw,
            allowed=", ".join(options),
            suggestion=closest(raw, options),
        )

    return parse


def _out_of_range(name: str, raw: str, value: float, allowed: str, unit: str) -> InputError:
    """A number outside its range says the range; anything else says what a value must be."""
    if math.isnan(value):
        return InputError(name, f"must be {unit}", given=raw, allowed=allowed)
    return InputError(name, "is out of range", given=raw, allowed=allowed)


def _minutes(name: str, raw: str) -> float:
    """A queue deadline in minutes: a number from 1 to 60 (plain ASCII, like '10' or '2.5')."""
    value = float(raw) if _DECIMAL.match(raw) else math.nan
    if not (timing.QUEUE_MINUTES_MIN <= value <= timing.QUEUE_MINUTES_MAX):
        raise _out_of_range(name, raw, value, "1 to 60", "a number of minutes")
    return value


def whole_number(raw: str, max_digits: int) -> int | None:
    """A plain ASCII whole number (`str.isdigit` alone also accepts digits like '²'), else None."""
    if raw.isascii() and raw.isdigit() and len(raw) <= max_digits:
        return int(raw)
    return None


def _signed_whole(raw: str) -> float:
    """A plain ASCII whole number that may be negative, else NaN.

    `-5` is a whole number out of range, not a value of the wrong kind.
    """
    digits = raw.removeprefix("-")
    return -float(digits) if raw != digits and whole_number(digits, 6) is not None else math.nan


def _execution_minutes(name: str, raw: str) -> int:
    value = whole_number(raw, 6)
    if value is None or not (1 <= value <= timing.EXECUTION_MINUTES_MAX):
        seen = _signed_whole(raw) if value is None else value
        allowed = f"1 to {timing.EXECUTION_MINUTES_MAX}"
        raise _out_of_range(name, raw, seen, allowed, "a whole number of minutes")
    return value


def _admission_minutes(name: str, raw: str) -> int:
    value = whole_number(raw, 6)
    if value is None or value > timing.ADMISSION_MINUTES_MAX:
        seen = _signed_whole(raw) if value is None else value
        allowed = f"0 (do not wait) to {timing.ADMISSION_MINUTES_MAX}"
        raise _out_of_range(name, raw, seen, allowed, "a whole number of minutes")
    return value


def guard_quota_wait_minutes(name: str, raw: str) -> int:
    """`guard-quota-wait-minutes`: a whole number of minutes from 0 (never wait) to 60."""
    value = whole_number(raw, 6)
    if value is None or value > timing.GUARD_QUOTA_WAIT_MINUTES_MAX:
        seen = _signed_whole(raw) if value is None else value
        allowed = f"0 (fail closed at once) to {timing.GUARD_QUOTA_WAIT_MINUTES_MAX}"
        raise _out_of_range(name, raw, seen, allowed, "a whole number of minutes")
    return value


def _positive_int(name: str, raw: str) -> int:
    value = whole_number(raw, 19)
    if value is None or value < 1:
        raise InputError(name, "must be a positive whole number", given=raw, allowed="1, 2, 3, ...")
    return value


def _sha(name: str, raw: str) -> str:
    if not FULL_SHA.match(raw.lower()):
        raise InputError(
            name, "must be a full commit SHA", given=raw, allowed="40 hexadecimal characters"
        )
    return raw.lower()


def valid_ref_name(ref: str) -> bool:
    r"""Whether `ref` is a valid full ref name by `git check-ref-format`'s rules.

    No component may start with `.` or end with `.lock`; no `..`, `//`, `@{`, ASCII control
    character, space or any of `~^:?*[\`; the name neither starts nor ends with `/`, nor ends
    with `.`, and is not `@`. Ref: https://git-scm.com/docs/git-check-ref-format
    """
    if ref == "@" or ref.startswith("/") or ref.endswith(("/", ".")):
        return False
    if any(bad in ref for bad in ("..", "//", "@{")):
        return False
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F or ch in " ~^:?*[\\" for ch in ref):
        return False
    return all(
        part and not part.startswith(".") and not part.endswith(".lock") for part in ref.split("/")
    )


def _source_ref(name: str, raw: str) -> str:
    if not (_SOURCE_REF.match(raw) and valid_ref_name(raw)):
        raise InputError(
            name,
            "must be a full ref",
            given=raw,
            allowed="refs/heads/<branch>, refs/tags/<tag>, refs/pull/<n>/merge or refs/pull/<n>/head",
        )
    return raw


def _branch_or_tag_ref(name: str, raw: str) -> str:
    """A full branch or tag ref (what a workflow run's ref looks like), by git's rules."""
    if not (raw.startswith(("refs/heads/", "refs/tags/")) and valid_ref_name(raw)):
        raise InputError(
            name,
            "must be a full branch or tag ref",
            given=raw,
            allowed="refs/heads/<branch> or refs/tags/<tag>, such as refs/heads/main",
        )
    return raw


def _workflow(name: str, raw: str) -> str:
    file = raw.removeprefix(".github/workflows/")
    if not _WORKFLOW_FILE.match(file):
        raise InputError(
            name,
            "must be the child workflow's file name",
            given=raw,
            allowed="a file name like runner-worker.yml",
        )
    return file


def _workflow_ref(name: str, raw: str) -> str:
    """A branch or tag name: the dispatch API takes nothing else (not a SHA, not a pull ref)."""
    short = raw.removeprefix("refs/heads/").removeprefix("refs/tags/")
    if (
        any(ch.isspace() for ch in raw)
        or short.startswith("refs/")
        or FULL_SHA.match(short.lower())
        or not valid_ref_name(f"refs/heads/{short}")
    ):
        raise InputError(
            name,
            "must be a trusted branch or tag name",
            given=raw,
            allowed="a branch or tag such as main or v1",
        )
    return short


def _workflow_files(name: str, raw: str) -> tuple[str, ...]:
    """One or more workflow file names, separated by spaces or commas."""
    files = tuple(_workflow(name, item) for item in re.split(r"[\s,]+", raw) if item)
    if not files:
        raise InputError(name, "must name a workflow file", given=raw)
    return files


def _workload(name: str, raw: str) -> str:
    if len(raw) > _WORKLOAD_MAX_CHARS:
        raise InputError(
            name,
            f"is {len(raw)} characters long; GitHub refuses dispatch inputs over 65,535 characters",
            allowed=f"a JSON object of at most {_WORKLOAD_MAX_CHARS} characters (pass references, not data)",
        )
    value = parse_json(name, raw, "a JSON object")
    if not isinstance(value, dict):
        raise InputError(
            name, "must be a JSON object", given=raw, allowed='a JSON object such as {"shard": 1}'
        )
    return raw


def _text(name: str, raw: str) -> str:
    if any(ch in raw for ch in "\r\n"):
        raise InputError(name, "must be a single line", given=raw)
    return raw


#: A GitHub App's numeric ID, or its client ID (`Iv` and letters, digits, `.` or `_`).
APP_ID = re.compile(r"[1-9][0-9]{0,19}|Iv[0-9A-Za-z._]{1,60}")


def _app_id(name: str, raw: str) -> str:
    if not APP_ID.fullmatch(raw):
        raise InputError(
            name,
            "is not a GitHub App's ID or client ID",
            given=raw,
            allowed="the App's numeric ID (its settings page, 'App ID') or its client ID (Iv...)",
        )
    return raw


def _private_key(name: str, raw: str) -> SecretStr:
    """A PEM key spans lines; `github.app_token.AppCredentials.read` reads it as a key."""
    if "-----BEGIN" not in raw:
        raise InputError(
            name,
            "is not a PEM private key (its value is not shown)",
            allowed="the App's private key as GitHub downloads it (-----BEGIN RSA PRIVATE KEY-----"
            "), passed from a secret",
        )
    return SecretStr(raw)


def _token(name: str, raw: str) -> SecretStr:
    if any(ch.isspace() for ch in raw):
        raise InputError(name, "must be a token without spaces (its value is not shown)")
    return SecretStr(raw)


#: Every rule the tables name but two: `runner-type` and `runners` are checked against the
#: profiles, in `_read_pools`.
RULES: Mapping[str, Rule] = {
    "workflow-file": _workflow,
    "workflow-files": _workflow_files,
    "branch-or-tag-name": _workflow_ref,
    "branch-or-tag-ref": _branch_or_tag_ref,
    "source-ref": _source_ref,
    "full-sha": _sha,
    "queue-policy": _choice(("standard", "extended")),
    "queue-minutes": _minutes,
    "execution-minutes": _execution_minutes,
    "admission-minutes": _admission_minutes,
    "guard-quota-minutes": guard_quota_wait_minutes,
    "single-line": _text,
    "positive-whole-number": _positive_int,
    "json-object": _workload,
    "source-policy": _choice(("current", "pinned-after-start")),
    "api-version": _choice(API_VERSION_CHOICES),
    "token": _token,
    "app-id": _app_id,
    "app-private-key": _private_key,
}
#: The rules checked against the profiles rather than by `RULES`.
PROFILE_RULES = ("runner-type", "runners")
#: The rule of every coordinator input outside the pool settings. `coordinate` and `preflight`
#: require them; `plan` and `simulate` check each one that is given by the same rule.
OTHER_RULES: Mapping[str, Rule] = {
    name: RULES[item.rule] for name, item in COORDINATOR.items() if not item.pool
}


def read_pool_settings(environ: Mapping[str, str], profiles: Mapping[str, Profile]) -> PoolSettings:
    """Read runner-type, queue-policy, the deadlines and runners; resolve the candidate list.

    Every other coordinator input that is given is checked by its own rule too (not required):
    a command that needs only the pools accepts nothing that `coordinate` would refuse.
    """
    reader = _Reader(environ, COORDINATOR)
    settings = _read_pools(reader, profiles)
    for name in OTHER_RULES:
        reader.check(name)
    reader.done()
    assert settings is not None  # noqa: S101  # done() raised if anything was missing
    return settings


def _read_pools(reader: _Reader, profiles: Mapping[str, Profile]) -> PoolSettings | None:
    types = tuple(sorted(profiles))
    runner_type: str | None = reader.get("runner-type", None, _choice(types))
    policy: QueuePolicy = reader.get("queue-policy", "standard")
    minutes: float | None = reader.get("queue-timeout-minutes", None)
    execution = reader.get("execution-timeout-minutes", 0)
    admission = reader.get("admission-timeout-minutes", 0)
    raw_runners = _raw(reader.environ, "runners")
    hosted: str | None = reader.get("hosted-last-resort", None)
    if runner_type is None:
        return None
    profile = profiles[runner_type]
    try:
        if raw_runners is None:
            _has_pools(profile)
            deadline = minutes if minutes is not None else profile.default_queue_minutes(policy)
            candidates = _with_hosted(
                profile.candidates(policy, minutes), hosted, profile, deadline
            )
        else:
            _no_opt_in_beside(hosted)
            candidates = resolve_runners(raw_runners, profile, policy, minutes)
    except InputError as error:
        reader.errors.append(error)
        return None
    return PoolSettings(
        runner_type=profile.runner_type,
        profile=profile,
        queue_policy=policy,
        queue_timeout_minutes=minutes,
        execution_timeout_minutes=execution,
        candidates=candidates,
        overridden=raw_runners is not None,
        admission_timeout_minutes=admission,
    )


_HOSTED_ALLOWED = (
    "blank (no hosted runner), or one GitHub-hosted Linux runner label of the runner type's "
    "architecture: ubuntu-24.04 for cpu-amd64, ubuntu-24.04-arm for cpu-arm64, or a larger "
    "runner's name"
)


def _with_hosted(
    candidates: tuple[Candidate, ...], label: str | None, profile: Profile, deadline: float
) -> tuple[Candidate, ...]:
    """`hosted-last-resort` (a departure): the profile's list, then the hosted label, last.

    It has no deadline of its own: the action-level `queue-timeout-minutes`, else the policy's.
    """
    if label is None:
        return candidates
    problem = hosted_problem(label, profile)
    if problem is not None:
        raise InputError("hosted-last-resort", problem, given=label, allowed=_HOSTED_ALLOWED)
    if len(candidates) >= timing.MAX_CANDIDATES:
        raise InputError(
            "hosted-last-resort",
            f"would make {len(candidates) + 1} candidates; at most {timing.MAX_CANDIDATES} are "
            f"allowed and runner-type {profile.runner_type!r} already has {len(candidates)}",
            given=label,
            allowed=_HOSTED_ALLOWED,
        )
    return (*candidates, hosted_candidate(label, deadline))


def _has_pools(profile: Profile) -> None:
    """A runner type without default pools (3 to 8 GPUs) runs only on the pools `runners` names."""
    if not profile.pools:
        raise InputError(
            "runners",
            f"is required for runner-type {profile.runner_type!r}, which has no default pools "
            f"(no catalogue names machines with {profile.gpus} GPUs); list your own",
            allowed=(
                f'[{{"group": "...", "labels": [...], "gpus": {profile.gpus}}}, ...]: '
                "see Your own pools in the README"
            ),
        )


def _no_opt_in_beside(label: str | None) -> None:
    """`hosted-last-resort` appends to the profile's list: an explicit `runners` has none."""
    if label is not None:
        raise InputError(
            "hosted-last-resort",
            "cannot be combined with an explicit `runners` list, which replaces the profile's "
            f'list; put {{"hosted": "{label}"}} last in `runners` instead',
            given=label,
            allowed="blank when `runners` is set",
        )


def read_coordinator_inputs(
    environ: Mapping[str, str], profiles: Mapping[str, Profile]
) -> CoordinatorInputs:
    """Read and validate every coordinator input; raise InputErrors listing every problem."""
    reader = _Reader(environ, COORDINATOR)
    workflow = reader.get("workflow", "")
    workflow_ref = reader.get("workflow-ref", "")
    source_ref = reader.get("source-ref", "")
    source_sha = reader.get("source-sha", "")
    pools = _read_pools(reader, profiles)
    workload = reader.get("workload", "")
    source_policy: SourcePolicy = reader.get("source-policy", "current")
    token = reader.get("token", SecretStr(""))
    runners_token = reader.get("runners-token", SecretStr(""))
    api_version: ApiVersionSetting = reader.get("api-version", AUTO)
    app_id: str = reader.get("app-id", "")
    app_key = reader.get("app-private-key", SecretStr(""))
    installation: int | None = reader.get("app-installation-id", None)
    _app_inputs_together(reader)
    reader.done()
    assert pools is not None  # noqa: S101  # done() raised if runner-type was missing
    return CoordinatorInputs(
        workflow=workflow,
        workflow_ref=workflow_ref,
        source_ref=source_ref,
        source_sha=source_sha,
        pools=pools,
        workload=workload,
        source_policy=source_policy,
        token=token,
        api_version=api_version,
        runners_token=runners_token,
        app_id=app_id,
        app_private_key=app_key,
        app_installation_id=installation,
    )


#: The GitHub App's inputs: its ID and key come together, and the installation ID only with them.
_APP_INPUTS = ("app-id", "app-private-key", "app-installation-id")


def _app_inputs_together(reader: _Reader) -> None:
    """Any App input given needs `app-id` and `app-private-key` both; the error names what was set."""
    given = [name for name in _APP_INPUTS if _raw(reader.environ, name) is not None]
    missing = [name for name in _APP_INPUTS[:2] if name not in given]
    if not given or not missing:
        return
    for name in given if len(missing) == 2 else given[:1]:
        reader.errors.append(
            InputError(
                name,
                f"needs {' and '.join(missing)} beside it: give app-id and app-private-key "
                "together (the key from a secret), or no App input to use token",
            )
        )


def read_guard_inputs(environ: Mapping[str, str]) -> GuardInputs:
    """Read and validate the guard's inputs."""
    reader = _Reader(environ, GUARD, flags=False)
    request_id = reader.get("request-id", "")
    parent_run_id = reader.get("parent-run-id", 0)
    parent_run_attempt = reader.get("parent-run-attempt", 0)
    source_ref = reader.get("source-ref", "")
    source_sha = reader.get("source-sha", "")
    none: tuple[str, ...] = ()
    coordinators = reader.get("coordinator-workflow", none)
    coordinator_ref = reader.get("coordinator-ref", "")
    quota_wait = reader.get("guard-quota-wait-minutes", 0)
    token = reader.get("token", SecretStr(""))
    api_version: ApiVersionSetting = reader.get("api-version", AUTO)
    reader.done()
    return GuardInputs(
        request_id=request_id,
        parent_run_id=parent_run_id,
        parent_run_attempt=parent_run_attempt,
        source_ref=source_ref,
        source_sha=source_sha,
        coordinator_workflows=coordinators,
        coordinator_ref=coordinator_ref,
        token=token,
        api_version=api_version,
        quota_wait_minutes=quota_wait,
    )


def read_run_context(environ: Mapping[str, str], *, in_a_run: bool = True) -> RunContext:
    """Read the run the step is in from the runner's GITHUB_* variables.

    `in_a_run=False` (preflight from a terminal): without GITHUB_RUN_ID the run id and attempt are 0.
    """
    errors: list[InputError] = []
    if not in_a_run and not environ.get("GITHUB_RUN_ID", "").strip():
        environ = {**environ, "GITHUB_RUN_ID": "0", "GITHUB_RUN_ATTEMPT": "0"}

    def need(key: str, check: Callable[[str], bool], allowed: str) -> str:
        value = environ.get(key, "").strip()
        if not check(value):
            errors.append(
                InputError(
                    key, "is missing or invalid in the environment", given=value, allowed=allowed
                )
            )
        return value

    repository = need(
        "GITHUB_REPOSITORY", lambda v: bool(re.match(r"^[\w.-]+/[\w.-]+$", v)), "owner/name"
    )
    run_id = need(
        "GITHUB_RUN_ID", lambda v: whole_number(v, 19) is not None, "a run id (set by the runner)"
    )
    attempt = need(
        "GITHUB_RUN_ATTEMPT",
        lambda v: whole_number(v, 9) is not None,
        "a run attempt (set by the runner)",
    )
    if errors:
        raise InputErrors(errors)
    return RunContext(
        repository=repository,
        run_id=int(run_id),
        run_attempt=int(attempt),
        api_url=environ.get("GITHUB_API_URL", "").strip().rstrip("/") or "https://api.github.com",
        server_url=environ.get("GITHUB_SERVER_URL", "").strip().rstrip("/") or "https://github.com",
        workflow_ref=environ.get("GITHUB_WORKFLOW_REF", "").strip(),
        workflow_sha=environ.get("GITHUB_WORKFLOW_SHA", "").strip(),
        job=environ.get("GITHUB_JOB", "").strip(),
        runner_name=environ.get("RUNNER_NAME", "").strip(),
    )
