"""Rules for the coordinator step: its inputs, its job's permissions and timeout, and trust.

Long (the coordinator step's rules) because one rule per function for the coordinator step, and the
timeout rules that replay `plan`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import yaml

from runner_queue_fallback.core import timing
from runner_queue_fallback.core.actions_io import COORDINATOR_OUTPUTS
from runner_queue_fallback.core.input_names import SECRET_INPUTS, closest
from runner_queue_fallback.core.input_table import COORDINATOR
from runner_queue_fallback.core.inputs import (
    COORDINATOR_INPUTS,
    CoordinatorInputs,
    InputErrors,
    env_name,
    read_coordinator_inputs,
    read_pool_settings,
)
from runner_queue_fallback.core.machine import parse_label
from runner_queue_fallback.core.outcome import OUTCOMES
from runner_queue_fallback.core.profiles import Profile
from runner_queue_fallback.tools.lint.runners_token import note_runners_token
from runner_queue_fallback.workflow.child import pin_warning
from runner_queue_fallback.workflow.coordinator_steps import CoordinatorStep
from runner_queue_fallback.workflow.model import (
    Findings,
    Node,
    events_of,
    has_secret,
    is_checkout,
    is_expression,
    is_false,
    permissions_of,
    whole_minutes,
)
from runner_queue_fallback.workflow.plan import Plan, make_plan
from runner_queue_fallback.workflow.runners_value import note_runners_expressions

__all__ = ["execution_minutes", "lint_coordinator"]

_REQUIRED = ("runner-type", "workflow", "workflow-ref", "source-ref", "source-sha")
_POOL_INPUTS = (
    "runner-type",
    "queue-policy",
    "queue-timeout-minutes",
    "execution-timeout-minutes",
    "runners",
    "hosted-last-resort",
)
# Stand-ins for values that are missing (reported by RQF201) or expressions (unknown until the
# run), so that the action's own validation still checks every literal input.
_STAND_INS = {n: i.stand_in for n, i in COORDINATOR.items() if i.stand_in is not None}
# Values a pull request's author controls.
# Ref: https://securitylab.github.com/resources/github-actions-untrusted-input/
_PR_CONTROLLED = re.compile(
    r"github\.head_ref|github\.event\.(pull_request\.(head|title|body|merge_commit_sha)"
    r"|issue|comment|review|review_comment|discussion|head_commit|commits|pages|workflow_run)\b",
    re.IGNORECASE,
)
_PR_EVENTS = ("pull_request", "pull_request_target")
# The run's own ref and SHA (not github.ref_name): what they are on a PR is in _RUN_REF_MEANS.
_RUN_REF = {
    "source-ref": re.compile(r"\bgithub\.ref\b", re.IGNORECASE),
    "source-sha": re.compile(r"\bgithub\.sha\b", re.IGNORECASE),
}
# GitHub ends any job on a GitHub-hosted runner after six hours, whatever timeout-minutes says.
_HOSTED_JOB_MINUTES = timing.HOSTED_JOB_LIMIT_MINUTES
# Why RQF216 is a warning on `pull_request` (lint cannot see every gate) and what it means on each.
_RUN_REF_MEANS = {
    "pull_request": "on `pull_request` it is the PR's merge commit, written by its author, so "
    "every push to a same-repository PR branch is dispatched unreviewed (fork PRs cannot "
    "dispatch: their token is read-only); a warning, since an approval on this job, such as an "
    "environment review, may still gate it",
    "pull_request_target": "on `pull_request_target` it is the base branch, not the PR, so the "
    "worker tests other code than the check reports on",
}
_HOSTED_LABEL = re.compile(r"^(ubuntu|windows|macos)-", re.IGNORECASE)
#: The inputs a secret may fill (RQF209): the credentials, and the App's ID (kept as a secret by
#: many; it is sent nowhere but to GitHub as the JWT's issuer).
_MAY_HOLD_SECRETS = frozenset({*SECRET_INPUTS, "app-id"})


def _input_fix(name: str) -> str:
    """RQF211's fix: the input a typo meant, else every input."""
    near = closest(name, COORDINATOR_INPUTS)
    if near is not None:
        return f"did you mean `{near}`? (the inputs: {', '.join(COORDINATOR_INPUTS)})"
    return f"use one of: {', '.join(COORDINATOR_INPUTS)}"


def execution_minutes(step: CoordinatorStep, profiles: Mapping[str, Profile]) -> int | None:
    """The execution budget the coordinator allows, read as the action reads it.

    None when `execution-timeout-minutes` is an expression or invalid (RQF204 reports the latter).
    """
    value = step.text("execution-timeout-minutes")
    if is_expression(value) or "cpu" not in profiles:
        return None
    # runner-type is a stand-in: only the execution budget is read back.
    environ = {env_name("runner-type"): "cpu", env_name("execution-timeout-minutes"): value}
    try:
        return read_pool_settings(environ, profiles).execution_timeout_minutes
    except InputErrors:
        return None


def lint_coordinator(
    step: CoordinatorStep, report: Findings, profiles: Mapping[str, Profile]
) -> None:
    """Report every coordinator rule broken by `step`."""
    path = step.workflow.path
    for name in _REQUIRED:
        if not step.text(name):
            report.add(
                path,
                step.uses_line,
                "RQF201",
                f"the coordinator step does not set `{name}`; the action fails before dispatching",
                f"set `{name}` under the step's `with:`",
            )
    for name, node in step.inputs.items():
        if name not in COORDINATOR_INPUTS:
            report.add(
                path,
                node.line,
                "RQF211",
                f"`{name}` is not an input of the coordinator action; it is ignored",
                _input_fix(name),
            )
    note_runners_expressions(path, step.line("runners"), step.text("runners"), report)
    note_runners_token(path, step.inputs.get("runners-token"), report)
    _token_beside_app(step, report)
    inputs = _validate(step, report, profiles)
    hosted = _hosted_label(step.job)
    need = _timeout(step, inputs, hosted, report) if inputs is not None else None
    if inputs is not None:
        _short_deadlines(step, inputs, report)
        _other_os(step, inputs, report)
    _hosted_timeout(step, hosted, need, report)
    _permissions(step, report)
    _trust(step, report)
    _pull_request(step, report)
    _no_workload(step, report)
    _concurrency(step, report)
    _matrix(step, report)
    _outputs(step, report)
    pin_warning(step.workflow, step.ref, step.uses_line, report)


#: `steps.<id>.outputs.<name>` in an expression, and a literal compared with `.outcome`.
_STEP_OUTPUT = re.compile(r"\bsteps\.(?P<id>[\w-]+)\.outputs\.(?P<name>[\w-]+)")
_OUTCOME_COMPARED = re.compile(
    r"\bsteps\.(?P<id>[\w-]+)\.outputs\.outcome\s*[!=]=\s*'(?P<value>[^']*)'"
    r"|'(?P<before>[^']*)'\s*[!=]=\s*steps\.(?P<id2>[\w-]+)\.outputs\.outcome\b"
)


def _outputs(step: CoordinatorStep, report: Findings) -> None:
    """RQF219: what the job reads of the coordinator step exists: its outputs, its outcomes.

    An output the action does not set is empty, and `outcome` compared with a word it never takes
    is never equal, so a gate built on either never fires (`actionlint` cannot know our outputs).
    """
    step_id = step.step.text_of("id")
    if not step_id:
        return
    for line, text in _scalars(step.job):
        for found in _STEP_OUTPUT.finditer(text):
            if found["id"] == step_id and found["name"] not in COORDINATOR_OUTPUTS:
                report.add(
                    step.workflow.path,
                    line + text.count("\n", 0, found.start()),
                    "RQF219",
                    f"`{found.group()}`: the coordinator action sets no output "
                    f"`{found['name']}`, so it is always empty",
                    f"use one of: {', '.join(COORDINATOR_OUTPUTS)}",
                )
        for found in _OUTCOME_COMPARED.finditer(text):
            value = found["value"] if found["id"] is not None else found["before"]
            if (found["id"] or found["id2"]) == step_id and value not in OUTCOMES:
                report.add(
                    step.workflow.path,
                    line + text.count("\n", 0, found.start()),
                    "RQF219",
                    f"`steps.{step_id}.outputs.outcome` is compared with '{value}', a word it "
                    "never takes, so the comparison never holds",
                    f"compare with one of: {', '.join(OUTCOMES)}",
                )


def _scalars(node: Node) -> list[tuple[int, str]]:
    """Every scalar under `node` with the line its text starts on (a block scalar: the next)."""
    found: list[tuple[int, str]] = []
    pending = [node.raw]
    while pending:
        raw = pending.pop()
        if isinstance(raw, yaml.ScalarNode):
            block = raw.style in ("|", ">")
            found.append((raw.start_mark.line + 1 + int(block), str(raw.value)))
        elif isinstance(raw, yaml.MappingNode):
            pending += [value for _, value in raw.value]
        elif isinstance(raw, yaml.SequenceNode):
            pending += list(raw.value)
    return found


def _plannable(step: CoordinatorStep) -> bool:
    return step.literal("runner-type") is not None and all(
        step.checkable(name) is not None for name in _POOL_INPUTS if step.text(name)
    )


def _validate(
    step: CoordinatorStep, report: Findings, profiles: Mapping[str, Profile]
) -> CoordinatorInputs | None:
    """Run the action's own input validation on the literal inputs; return them if all pass."""
    plannable = _plannable(step)
    environ = {env_name("runner-type"): "cpu"}
    for name in COORDINATOR_INPUTS:
        if name in _POOL_INPUTS and not plannable:
            continue
        value = step.checkable(name) if name not in SECRET_INPUTS else None
        stand_in = _STAND_INS.get(name) if COORDINATOR[name].needed or step.text(name) else None
        if value is not None or stand_in is not None:
            environ[env_name(name)] = value if value is not None else str(stand_in)
    try:
        inputs = read_coordinator_inputs(environ, profiles)
    except InputErrors as exc:
        for error in exc.errors:
            rule = "RQF205" if error.name == "workflow" else "RQF204"
            fix = f"give `{error.name}` a valid value ({error.allowed or 'see the action README'})"
            report.add(step.workflow.path, step.line(error.name), rule, str(error), fix)
        return None
    if not plannable and step.text("runner-type"):
        dynamic = [name for name in _POOL_INPUTS if step.text(name) and not step.checkable(name)]
        report.add(
            step.workflow.path,
            _job_timeout_line(step),
            "RQF203",
            f"timeout-minutes not checked: {', '.join(dynamic)} come from expressions",
            "run `runner-queue-fallback plan` for each value they take and set the largest result",
            level="notice",
        )
    return inputs if plannable else None


def _job_timeout_line(step: CoordinatorStep) -> int:
    node = step.job.get("timeout-minutes")
    return node.line if node is not None else step.job.line


def _timeout(
    step: CoordinatorStep, inputs: CoordinatorInputs, hosted: str | None, report: Findings
) -> int:
    """RQF203: the job's timeout covers what `plan` computes; return that figure."""
    plan = make_plan(inputs.pools)
    need = plan.timeout_minutes
    node = step.job.get("timeout-minutes")
    text = (node.text or "").strip() if node is not None else ""
    budget = (
        f"{plan.queue_minutes:g} min of queues, {plan.settings.execution_timeout_minutes} min of "
        f"execution, {plan.overhead_minutes:g} min of startup and cancellation; a short API "
        f"quota may add up to {plan.quota_extra_minutes:g} min more, not counted here"
    )
    if hosted is not None and need > _HOSTED_JOB_MINUTES:
        report.add(
            step.workflow.path,
            _job_timeout_line(step),
            "RQF203",
            f"these inputs need at least {need} minutes ({budget}), but GitHub ends a job on a "
            f"GitHub-hosted runner (`{hosted}`) after {_HOSTED_JOB_MINUTES} minutes whatever "
            "`timeout-minutes` says; the coordinator would be killed before it cleans up its child",
            f"run job `{step.job_id}` on a self-hosted runner outside the managed pools, or "
            f"shorten the queues/execution timeout until `plan` says {_HOSTED_JOB_MINUTES} or less",
        )
        return need
    if is_expression(text):
        report.add(
            step.workflow.path,
            _job_timeout_line(step),
            "RQF203",
            f"timeout-minutes not checked: it is an expression; these inputs need at least {need}",
            f"make sure it evaluates to {need} or more",
            level="notice",
        )
        return need
    have = whole_minutes(text)
    if have is not None and have >= need:
        _quota_extra(step, plan, have if hosted is None else min(have, _HOSTED_JOB_MINUTES), report)
        return need
    said = f"is {text}" if text else "is not set (360 by default)"
    report.add(
        step.workflow.path,
        _job_timeout_line(step),
        "RQF203",
        f"job `{step.job_id}` timeout-minutes {said} but these inputs need at least {need} "
        f"({budget}); a coordinator that times out cannot clean up its child",
        f"set `timeout-minutes: {need}` or more on job `{step.job_id}`",
    )
    return need


def _quota_extra(step: CoordinatorStep, plan: Plan, have: int, report: Findings) -> None:
    """RQF203, a warning: the job's timeout also covers what a short API quota may add.

    Past the minimum, a wait for quota (admission, a reset) may leave the job too little: the
    coordinator then refuses a candidate it could not finish, or a wait with a child running
    reaches the job's end. A lower `admission-timeout-minutes` shrinks the extra; one reset stays.
    """
    full = _covering(plan)
    if have >= full:
        return
    settings = plan.settings
    message = (
        f"job `{step.job_id}` timeout-minutes {have} covers `plan`'s minimum "
        f"{plan.timeout_minutes} but not its possible extra of {plan.quota_extra_minutes:g} min "
        f"(admission-timeout-minutes {settings.admission_timeout_minutes} + spread, one quota "
        "reset of 60 min): when the repository's API quota runs short, the coordinator refuses a "
        "candidate that no longer fits in its job, and a wait with a child running may reach the "
        "job's end, which cancels the worker"
    )
    if full > _HOSTED_JOB_MINUTES:
        lower = _fitting_admission(plan, _HOSTED_JOB_MINUTES)
        message += (
            f"; minimum plus extra is {full} minutes, more than a GitHub-hosted coordinator may "
            f"run ({_HOSTED_JOB_MINUTES})"
        )
        fix = "shorten the queues or the execution timeout"
        if lower is not None:
            fix = (
                f"set `admission-timeout-minutes: '{lower}'` and `timeout-minutes: "
                f"{_covering(plan, lower)}`"
            )
        fix += f", or run job `{step.job_id}` on a self-hosted runner outside the pools"
    else:
        lower = _fitting_admission(plan, have)
        fix = f"set `timeout-minutes: {full}` or more on job `{step.job_id}`"
        if lower is not None:
            fix += f", or lower `admission-timeout-minutes` to '{lower}'"
    report.add(step.workflow.path, _job_timeout_line(step), "RQF203", message, fix, level="warning")


def _short_deadlines(step: CoordinatorStep, inputs: CoordinatorInputs, report: Findings) -> None:
    """RQF218: a queue deadline under 2 minutes is allowed, but GitHub may not be done by then.

    Reported at `queue-timeout-minutes` when that sets a short deadline, else at `runners`.
    """
    warning = make_plan(inputs.pools).short_deadline_warning
    if warning is None:
        return
    level = step.literal("queue-timeout-minutes")
    short = level is not None and _minutes(level) < timing.SHORT_QUEUE_MINUTES
    report.add(
        step.workflow.path,
        step.line("queue-timeout-minutes" if short else "runners"),
        "RQF218",
        warning,
        f"set `queue-timeout-minutes` (and any `queue-timeout-minutes` inside `runners`) to "
        f"{timing.SHORT_QUEUE_MINUTES} or more",
    )


def _other_os(step: CoordinatorStep, inputs: CoordinatorInputs, report: Findings) -> None:
    """RQF220: candidates on macOS or Windows, where only the untried composite guard can run."""
    for warning in make_plan(inputs.pools).os_warnings:
        report.add(
            step.workflow.path,
            step.line("runners"),
            "RQF220",
            warning,
            "use the composite guard (`.../guard@<sha>`) in the child, and try a refusal on one "
            "runner of the pool before you rely on it",
            level="warning",
        )


def _minutes(text: str) -> float:
    """A literal deadline as a number (validation already passed: it is one)."""
    try:
        return float(text)
    except ValueError:
        return math.inf


def _covering(plan: Plan, admission: int | None = None) -> int:
    """The timeout-minutes that covers `plan`'s minimum and its possible extra."""
    if admission is not None:
        changed = plan.settings.model_copy(update={"admission_timeout_minutes": admission})
        plan = make_plan(changed)
    return plan.timeout_minutes + math.ceil(plan.quota_extra_minutes)


def _fitting_admission(plan: Plan, limit: int) -> int | None:
    """The largest admission-timeout-minutes below the current one with which `limit` covers all."""
    for admission in range(plan.settings.admission_timeout_minutes - 1, -1, -1):
        if _covering(plan, admission) <= limit:
            return admission
    return None


def _runs_on(job: Node) -> tuple[list[str], Node | None]:
    """The literal labels of a job's `runs-on` (string, list or `{group, labels}`), and its node."""
    node = job.get("runs-on")
    if node is None:
        return [], None
    labels = node.get("labels") if node.text is None and node.seq() == [] else node
    if labels is None:
        return [], node
    texts = [labels.text] if labels.text is not None else [item.text or "" for item in labels.seq()]
    return [t.strip() for t in texts if t.strip() and not is_expression(t)], node


def _hosted_label(job: Node) -> str | None:
    """The GitHub-hosted label (`ubuntu-*`, `windows-*`, `macos-*`) the job runs on, if it does."""
    labels, node = _runs_on(job)
    if node is None or node.get("group") is not None or len(labels) != 1:
        return None
    return labels[0] if _HOSTED_LABEL.match(labels[0]) else None


def _hosted_timeout(
    step: CoordinatorStep, hosted: str | None, need: int | None, report: Findings
) -> None:
    node = step.job.get("timeout-minutes")
    have = whole_minutes(node.text if node is not None else None)
    if hosted is None or node is None or have is None or have <= _HOSTED_JOB_MINUTES:
        return
    if need is not None and need > _HOSTED_JOB_MINUTES:
        return  # RQF203 already says the plan cannot fit on this runner
    report.add(
        step.workflow.path,
        node.line,
        "RQF217",
        f"`timeout-minutes: {have}` on a GitHub-hosted runner (`{hosted}`): GitHub ends the job "
        f"after {_HOSTED_JOB_MINUTES} minutes anyway",
        f"set `timeout-minutes` to {_HOSTED_JOB_MINUTES} or less (and at least what `plan` says)",
    )


def _no_workload(step: CoordinatorStep, report: Findings) -> None:
    """RQF212-RQF214: the coordinator job holds no pool runner and runs no workload code."""
    _runner(step, report)
    path = step.workflow.path
    steps = step.job.get("steps")
    for item in steps.seq() if steps is not None else []:
        uses = item.get("uses")
        if uses is not None and is_checkout(uses.text) and _checks_out_source(item):
            report.add(
                path,
                uses.line,
                "RQF213",
                f"job `{step.job_id}` checks out the source; the coordinator must not check out or "
                "run workload code (on a pull request it is the author's code, next to a token "
                "with `actions: write`)",
                "remove the checkout; the child checks out the approved SHA after its guard",
            )
        run = item.get("run")
        if run is not None:
            report.add(
                path,
                run.line,
                "RQF214",
                f"job `{step.job_id}` runs a script next to the coordinator; the coordinator job "
                "must not execute workload code (keep any such step to trusted bookkeeping)",
                "move workload steps to the child, and preparation to a job before the coordinator",
            )


def _checks_out_source(step: Node) -> bool:
    with_ = step.get("with")
    repository = (with_.text_of("repository") if with_ is not None else None) or ""
    return "".join(repository.split()).lower() in {"", "${{github.repository}}"}


def _runner(step: CoordinatorStep, report: Findings) -> None:
    labels, node = _runs_on(step.job)
    if node is None:
        return
    why = (
        "the coordinator waits for hours and must not hold a managed pool runner, which its own "
        "child (or other work) may be queued for"
    )
    fix = "run the coordinator on a GitHub-hosted runner such as `ubuntu-latest`"
    group = node.get("group")
    pool = [label for label in labels if parse_label(label) is not None]
    lowered = [label.lower() for label in labels]
    problem = ""
    if group is not None:
        problem = f"`runs-on` names the runner group `{group.text or ''}`"
    elif pool:
        problem = f"`runs-on` names the NVIDIA pool label `{pool[0]}`"
    elif lowered == ["self-hosted"]:
        problem = "`runs-on: self-hosted` may take any self-hosted runner, pool runners included"
    if problem:
        report.add(step.workflow.path, node.line, "RQF212", f"{problem}; {why}", fix)
    elif "self-hosted" in lowered:
        # A dedicated self-hosted label may be a machine outside the pools: lint cannot tell.
        report.add(
            step.workflow.path,
            node.line,
            "RQF212",
            f"job `{step.job_id}` runs on a self-hosted runner ({', '.join(labels)}); make sure it "
            f"is not a managed pool runner: {why}",
            f"{fix}, or keep a dedicated label outside the managed pools",
            level="warning",
        )


def _permissions(step: CoordinatorStep, report: Findings) -> None:
    """RQF202; with App credentials the App's token does the coordinator's work, not the job's."""
    if step.text("app-id"):
        return
    job_level = step.job.get("permissions")
    node = job_level if job_level is not None else step.workflow.root.get("permissions")
    value = permissions_of(node)
    if value == "write-all":
        return
    scopes = value if isinstance(value, dict) else {}
    missing = []
    if scopes.get("actions", ("",))[0] != "write":
        missing.append("actions: write")
    if scopes.get("contents", ("",))[0] not in {"read", "write"}:
        missing.append("contents: read")
    if missing:
        report.add(
            step.workflow.path,
            node.line if node is not None else step.job.line,
            "RQF202",
            f"the coordinator's token lacks {' and '.join(f'`{m}`' for m in missing)}; "
            "dispatching and cancelling the child need `actions: write`, reading the source ref "
            "needs `contents: read`",
            f"add `permissions: {{actions: write, contents: read}}` to job `{step.job_id}`",
        )


def _trust(step: CoordinatorStep, report: Findings) -> None:
    path = step.workflow.path
    policy = step.text("source-policy")
    if is_expression(policy):
        report.add(
            path,
            step.line("source-policy"),
            "RQF206",
            "`source-policy` comes from an expression; whoever controls it could let a worker "
            "keep running stale source",
            "write `source-policy` as a literal (`current`, or `pinned-after-start` for trusted "
            "cache preparation)",
        )
    for name in ("source-ref", "source-sha", "workflow-ref"):
        if _PR_CONTROLLED.search("".join(step.text(name).split())):
            report.add(
                path,
                step.line(name),
                "RQF208",
                f"`{name}` comes from a value the pull request's author controls; the child would "
                "run unapproved source or an untrusted workflow definition",
                f"take `{name}` from an approval gate (a dispatch input or a trusted job output)",
            )
    for name, node in step.inputs.items():
        if name not in _MAY_HOLD_SECRETS and has_secret(node.text):
            report.add(
                path,
                node.line,
                "RQF209",
                f"`{name}` contains a secret; dispatch inputs are visible to anyone who can read "
                "the child run",
                "keep secrets out of the coordinator's inputs; the child must not need them",
            )


def _token_beside_app(step: CoordinatorStep, report: Findings) -> None:
    """RQF223: `token` set explicitly beside the App's credentials is never used.

    `token` defaults to the job's GITHUB_TOKEN, so only a `token:` the workflow writes is flagged.
    """
    node = step.inputs.get("token")
    if node is None or not (node.text or "").strip() or not step.text("app-id"):
        return
    report.add(
        step.workflow.path,
        node.line,
        "RQF223",
        "`token` is set, but with `app-id` and `app-private-key` the coordinator sends every "
        "request with the App's installation token: `token` is never used",
        "remove `token:` (the App's token is used), or the App inputs (to spend `token`'s quota)",
    )


def _pull_request(step: CoordinatorStep, report: Findings) -> None:
    """RQF215 and RQF216: what a pull-request trigger must not be combined with."""
    events = {name for name, _ in events_of(step.workflow.root.get("on"))}
    triggers = [name for name in _PR_EVENTS if name in events]
    if not triggers:
        return
    on = " and ".join(f"`{name}`" for name in triggers)
    path = step.workflow.path
    if step.literal("source-policy") == "pinned-after-start":
        report.add(
            path,
            step.line("source-policy"),
            "RQF215",
            f"`source-policy: pinned-after-start` in a workflow run on {on}; PR validation must "
            "stop a worker whose pull request moved on (the policy is for trusted cache "
            "preparation only)",
            "keep the default `source-policy: current` here; set `pinned-after-start` only in a "
            "separate trusted coordinator (a push to the default branch, say)",
        )
    for name, pattern in _RUN_REF.items():
        value = step.text(name)
        if not pattern.search("".join(value.split())):
            continue
        report.add(
            path,
            step.line(name),
            "RQF216",
            f"`{name}: {value}` skips the full-SHA approval gate: "
            + "; ".join(_RUN_REF_MEANS[trigger] for trigger in triggers),
            f"take `{name}` from an approval gate that names the full SHA (a dispatch input or a "
            "trusted job output), as the example coordinator does",
        )


def _concurrency(step: CoordinatorStep, report: Findings) -> None:
    if step.literal("source-policy") != "pinned-after-start":
        return
    for owner in (step.workflow.root, step.job):
        concurrency = owner.get("concurrency")
        cancel = concurrency.get("cancel-in-progress") if concurrency is not None else None
        if cancel is not None and not is_false(cancel):
            report.add(
                step.workflow.path,
                cancel.line,
                "RQF207",
                "`source-policy: pinned-after-start` with `cancel-in-progress` not false; a newer "
                "push would cancel the useful work this policy lets finish",
                "set `cancel-in-progress: false`",
            )


def _matrix(step: CoordinatorStep, report: Findings) -> None:
    strategy = step.job.get("strategy")
    if (
        strategy is None
        or strategy.get("matrix") is None
        or strategy.get("max-parallel") is not None
    ):
        return
    report.add(
        step.workflow.path,
        strategy.line,
        "RQF210",
        "a matrix of coordinators without `max-parallel` may dispatch every worker at once and "
        "share the repository's API quota",
        "set `strategy.max-parallel` to a small number such as 2",
    )
