"""Rules for the child workflow: one guarded, read-only `worker` job started only by dispatch.

Long (the child workflow's rules) because one rule per function, each with its message and fix; the
rule table is workflow/model.py's.

`lint` reports them, and the coordinator checks its child file with them (and with the inputs it
sends, RQF302) before its first dispatch.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner_queue_fallback.core import timing
from runner_queue_fallback.core.errors import InputError
from runner_queue_fallback.core.input_table import GUARD
from runner_queue_fallback.core.inputs import CHILD_INPUTS as DISPATCHED
from runner_queue_fallback.core.inputs import GUARD_INPUTS, guard_quota_wait_minutes
from runner_queue_fallback.workflow.model import (
    CHILD_INPUTS,
    ActionRef,
    Findings,
    Node,
    Workflow,
    events_of,
    has_secret,
    is_checkout,
    is_expression,
    is_false,
    is_true,
    parse_uses,
    permissions_of,
    whole_minutes,
    wired_to,
)

__all__ = [
    "QUOTA_WAIT",
    "Guard",
    "dispatch_inputs",
    "find_guard",
    "guard_longest_minutes",
    "guard_quota_wait",
    "lint_child",
    "pin_warning",
    "worker_job",
]

#: The guard input that bounds its wait for a spent quota's reset.
QUOTA_WAIT = "guard-quota-wait-minutes"

_JOB_KEYS_FORBIDDEN = {
    "strategy": (
        "RQF107",
        "a matrix allocates several workers for one request, and the coordinator watches one",
        "remove `strategy`; run a matrix of coordinators instead (see Parallel workers)",
    ),
    "needs": (
        "RQF108",
        "the worker must start as soon as a runner is free, with nothing to wait for",
        "remove `needs`; prepare upstream artifacts before the coordinator runs",
    ),
    "environment": (
        "RQF109",
        "an approval wait looks like a queued job and would trigger a fallback",
        "remove `environment`; gate the coordinator instead",
    ),
    "if": (
        "RQF110",
        "a skipped worker can never produce the result the coordinator waits for",
        "remove the job-level `if`; decide before dispatching",
    ),
    "concurrency": (
        "RQF111",
        "a concurrency queue holds the job without a runner and can cancel other runs",
        "remove `concurrency` from the worker job; keep concurrency in the coordinator",
    ),
}


def lint_child(child: Workflow, report: Findings) -> None:
    """Report every child rule broken by `child`."""
    _trigger(child, report)
    _run_name(child, report)
    top = child.root.get("concurrency")
    if top is not None:
        report.add(
            child.path,
            top.line,
            "RQF111",
            "the child sets workflow-level `concurrency`: a concurrency queue holds the worker "
            "without a runner and can cancel unrelated runs",
            "remove `concurrency` from the child; keep it in the coordinator",
        )
    job = _worker_job(child, report)
    if job is None:
        return
    _job_shape(child, job, report)
    _permissions(child, job, report)
    _steps(child, job, report)


def dispatch_inputs(child: Workflow) -> Node | None:
    """The `workflow_dispatch` trigger node, if the child has one."""
    on = child.root.get("on")
    if on is None:
        return None
    if on.text == "workflow_dispatch" or any(i.text == "workflow_dispatch" for i in on.seq()):
        return on
    return on.get("workflow_dispatch")


def worker_job(child: Workflow) -> tuple[str, Node] | None:
    """The `worker` job, or the only job, or None."""
    jobs = child.jobs()
    named = [(job_id, job) for job_id, job in jobs if job_id == "worker"]
    return next(iter(named or jobs), None)


def _trigger(child: Workflow, report: Findings) -> None:
    on = child.root.get("on")
    fix = "use `on: workflow_dispatch:` with the seven inputs, and no other trigger"
    why = "only the coordinator may start a worker"
    if on is None:
        report.add(child.path, 1, "RQF101", f"the child has no `on:` trigger; {why}", fix)
        return
    events = events_of(on)
    if "workflow_dispatch" not in {name for name, _ in events}:
        report.add(
            child.path, on.line, "RQF101", f"the child is not `workflow_dispatch`; {why}", fix
        )
    for event, line in events:
        if event != "workflow_dispatch":
            report.add(
                child.path,
                line,
                "RQF101",
                f"the child also runs on `{event}`; {why}, never an event",
                f"remove the `{event}` trigger",
            )
    trigger = dispatch_inputs(child)
    inputs = trigger.get("inputs") if trigger is not None else None
    for name, spec in inputs.items() if inputs is not None else ():
        if name in CHILD_INPUTS:
            _input_shape(child, name, spec, report)


def _input_shape(child: Workflow, name: str, spec: Node, report: Findings) -> None:
    kind, required = spec.get("type"), spec.get("required")
    if kind is not None and kind.text == "string" and is_true(required):
        return
    where = (kind if kind is not None and kind.text != "string" else required) or spec
    report.add(
        child.path,
        where.line,
        "RQF102",
        f"input `{name}` must be `type: string` and `required: true`; the coordinator always "
        "sends it as a string",
        f"declare `{name}:` with `required: true` and `type: string`",
    )


def _run_name(child: Workflow, report: Findings) -> None:
    node = child.root.get("run-name")
    if node is not None and wired_to(node.text, "request-id"):
        return
    report.add(
        child.path,
        node.line if node is not None else 1,
        "RQF103",
        "`run-name` must be `${{ inputs.request-id }}`: the coordinator finds its child by this "
        "unique name when a dispatch reply is lost",
        "set `run-name: ${{ inputs.request-id }}`",
    )


def _worker_job(child: Workflow, report: Findings) -> Node | None:
    jobs, jobs_node = child.jobs(), child.root.get("jobs")
    line = jobs_node.line if jobs_node is not None else 1
    if len(jobs) != 1:
        report.add(
            child.path,
            line,
            "RQF104",
            f"the child has {len(jobs)} jobs; it must have exactly one, so one dispatch is one "
            "worker allocation",
            "keep a single job `worker` and move other work elsewhere",
        )
    found = worker_job(child)
    if found is None:
        return None
    job_id, job = found
    if job_id != "worker":
        report.add(
            child.path,
            job.line,
            "RQF105",
            f"the job id is `{job_id}`; the coordinator looks for the job `worker`",
            "rename the job to `worker`",
        )
    name = job.get("name")
    if name is not None and name.text != "worker":
        report.add(
            child.path,
            name.line,
            "RQF105",
            f"the job is named `{name.text or ''}`; the coordinator looks for the job `worker`",
            "set `name: worker` or remove `name`",
        )
    return job


def _job_shape(child: Workflow, job: Node, report: Findings) -> None:
    runs_on = job.get("runs-on")
    if runs_on is None or not _from_json_runner(runs_on.text):
        report.add(
            child.path,
            runs_on.line if runs_on is not None else job.line,
            "RQF106",
            "`runs-on` must come from the dispatched `runner` input, or fallback never changes pool",
            "set `runs-on: ${{ fromJSON(inputs.runner) }}`",
        )
    for key, (rule, why, fix) in _JOB_KEYS_FORBIDDEN.items():
        node = job.get(key)
        if node is not None:
            report.add(child.path, node.line, rule, f"the worker job sets `{key}`: {why}", fix)
    _timeout(child, job, report)
    cont = job.get("continue-on-error")
    if cont is not None and not is_false(cont):
        report.add(
            child.path,
            cont.line,
            "RQF119",
            "`continue-on-error` on the worker job turns a failed required test into a "
            "successful worker, and so a successful coordinator",
            "remove `continue-on-error` from the worker job",
        )


def _from_json_runner(text: str | None) -> bool:
    if text is None:
        return False
    squashed = "".join(text.split()).lower()
    return squashed in {"${{fromjson(inputs.runner)}}", "${{fromjson(github.event.inputs.runner)}}"}


def _timeout(child: Workflow, job: Node, report: Findings) -> None:
    node = job.get("timeout-minutes")
    text = node.text if node is not None else None
    if text is not None and (text.strip().isdigit() or is_expression(text)):
        return
    report.add(
        child.path,
        node.line if node is not None else job.line,
        "RQF116",
        "the worker job has no numeric `timeout-minutes`; if the coordinator is lost, the "
        "worker's own timeout is what stops it",
        "set `timeout-minutes` on the worker job to at least execution-timeout-minutes",
    )


def _permissions(child: Workflow, job: Node, report: Findings) -> None:
    levels = [permissions_of(child.root.get("permissions")), permissions_of(job.get("permissions"))]
    if levels == [None, None]:
        report.add(
            child.path,
            job.line,
            "RQF117",
            "the child declares no `permissions`; the repository default may give the worker a "
            "token that can write",
            "add `permissions: {contents: read, actions: read}`",
        )
        return
    for node in (child.root.get("permissions"), job.get("permissions")):
        _no_write(child, node, report)
    effective = levels[1] if levels[1] is not None else levels[0]
    if isinstance(effective, dict):
        missing = [
            scope
            for scope in ("actions", "contents")
            if effective.get(scope, ("none", 0))[0] not in {"read", "write"}
        ]
        if missing:
            perms = job.get("permissions") or child.root.get("permissions") or job
            report.add(
                child.path,
                perms.line,
                "RQF118",
                f"permissions lack {' and '.join(f'`{s}: read`' for s in missing)}; the "
                "guard reads the parent run and the source ref before any workload runs",
                "grant `actions: read` and `contents: read`",
            )


def _no_write(child: Workflow, node: Node | None, report: Findings) -> None:
    value = permissions_of(node)
    if node is None or value is None:
        return
    fix = "use read-only permissions: `contents: read` and `actions: read`"
    if value == "write-all":
        report.add(child.path, node.line, "RQF117", _WRITE_MSG.format("`write-all`"), fix)
    elif isinstance(value, dict):
        for scope, (level, line) in value.items():
            if level == "write":
                report.add(child.path, line, "RQF117", _WRITE_MSG.format(f"`{scope}: write`"), fix)


_WRITE_MSG = "the child grants {}; workload code must run with read access only"


@dataclass(frozen=True)
class Guard:
    """The guard step of the worker job and where it sits."""

    index: int
    step: Node
    ref: ActionRef
    uses_line: int


def find_guard(job: Node) -> Guard | None:
    """The first step that uses the guard action."""
    steps = job.get("steps")
    for index, step in enumerate(steps.seq() if steps is not None else []):
        uses = step.get("uses")
        ref = parse_uses(uses.text if uses is not None else None)
        if uses is not None and ref is not None and ref.kind == "guard":
            return Guard(index, step, ref, uses.line)
    return None


def _steps(child: Workflow, job: Node, report: Findings) -> None:
    guard = find_guard(job)
    steps_node = job.get("steps")
    steps = steps_node.seq() if steps_node is not None else []
    if guard is None:
        report.add(
            child.path,
            steps_node.line if steps_node is not None else job.line,
            "RQF112",
            "no step uses the guard action; without it a stale or replayed dispatch runs workload "
            "code",
            "add `uses: <owner>/runner-queue-fallback/guard@<ref>` as the first step "
            "(or `.../guard/docker@<ref>`, the Docker form)",
        )
    else:
        _guard(child, guard, report)
        _container(child, job, guard, report)
        _quota_wait_room(child, job, guard, report)
    for index, step in enumerate(steps):
        _continue_on_error(child, step, report, guard=guard is not None and index == guard.index)
        if is_checkout(step.text_of("uses")):
            _checkout(child, step, report)


def _continue_on_error(child: Workflow, step: Node, report: Findings, *, guard: bool) -> None:
    cont = step.get("continue-on-error")
    if cont is None or is_false(cont):
        return
    if guard:
        report.add(
            child.path,
            cont.line,
            "RQF119",
            "`continue-on-error` on the guard lets workload code run after the guard rejected a "
            "stale source, a finished parent or a rerun",
            "remove `continue-on-error` from the guard step",
        )
        return
    report.add(
        child.path,
        cont.line,
        "RQF119",
        "`continue-on-error` on a step: if it runs a required test, its failure becomes a "
        "success (acceptable only for optional steps such as uploading logs)",
        "remove `continue-on-error` unless the step is optional",
        level="warning",
    )


def _guard(child: Workflow, guard: Guard, report: Findings) -> None:
    if guard.index > 0:
        report.add(
            child.path,
            guard.step.line,
            "RQF112",
            f"the guard is step {guard.index + 1}; anything before it runs before identity and "
            "source are checked",
            "move the guard step to the top of `steps`",
        )
    condition = guard.step.get("if")
    if condition is not None:
        report.add(
            child.path,
            condition.line,
            "RQF112",
            "the guard step has an `if`; a skipped guard lets workload code run unchecked",
            "remove `if` from the guard step",
        )
    _guard_inputs(child, guard, report)
    pin_warning(child, guard.ref, guard.uses_line, report)


def _guard_inputs(child: Workflow, guard: Guard, report: Findings) -> None:
    with_ = guard.step.get("with")
    values = dict(with_.items()) if with_ is not None else {}
    for name, value in values.items():
        if has_secret(value.text, allow_github_token=True):
            report.add(
                child.path,
                value.line,
                "RQF120",
                f"the guard's `{name}` gets a secret; the worker job must hold no credentials "
                "beyond its read-only GITHUB_TOKEN",
                f"remove the secret from `{name}` (the guard uses the job's GITHUB_TOKEN)",
            )
    for name in GUARD_INPUTS:
        wired = values.get(name)
        if name in DISPATCHED and (wired is None or not wired_to(wired.text, name)):
            report.add(
                child.path,
                wired.line if wired is not None else guard.uses_line,
                "RQF113",
                f"guard input `{name}` must be `${{{{ inputs.{name} }}}}`; the guard checks what "
                "the coordinator dispatched",
                f"set `{name}: ${{{{ inputs.{name} }}}}` under the guard's `with:`",
            )
    _coordinator_ref(child, values, report)


def _coordinator_ref(child: Workflow, values: dict[str, Node], report: Findings) -> None:
    """RQF121: a guard that names its coordinator's workflow should name its ref too."""
    workflow = values.get("coordinator-workflow")
    if workflow is None or not (workflow.text or "").strip() or "coordinator-ref" in values:
        return
    report.add(
        child.path,
        workflow.line,
        "RQF121",
        "the guard sets `coordinator-workflow` but not `coordinator-ref`: a run of that workflow "
        "from any branch (one that changed the coordinator, too) passes as the parent",
        "set `coordinator-ref: refs/heads/main` (the protected branch the coordinator runs from) "
        "under the guard's `with:`, unless the coordinator runs on pull requests",
    )


def guard_quota_wait(guard: Node) -> tuple[int | None, Node | None]:
    """The guard's `guard-quota-wait-minutes` (its default when not set) and the node that sets it.

    None for an expression (not known before the run) or a value the guard refuses (RQF123).
    """
    with_ = guard.get("with")
    node = with_.get(QUOTA_WAIT) if with_ is not None else None
    text = (node.text or "").strip() if node is not None else GUARD[QUOTA_WAIT].default or ""
    if is_expression(text):
        return None, node
    try:
        return guard_quota_wait_minutes(QUOTA_WAIT, text), node
    except InputError:
        return None, node


def guard_longest_minutes(wait: int) -> float:
    """The most a guard that waits takes before its workload starts: check, wait, every check."""
    return wait + 2 * timing.GUARD_CHECK_MINUTES


def _quota_wait_room(child: Workflow, job: Node, guard: Guard, report: Findings) -> None:
    """RQF123: the worker's `timeout-minutes` outlasts the guard's longest start (its wait in it).

    A literal value the guard refuses is an error: every child would fail closed before a request.
    """
    wait, node = guard_quota_wait(guard.step)
    text = (node.text or "").strip() if node is not None else ""
    if wait is None and node is not None and not is_expression(text):
        try:
            guard_quota_wait_minutes(QUOTA_WAIT, text)
        except InputError as error:
            report.add(
                child.path,
                node.line,
                "RQF123",
                f"the guard refuses every workload before its first request: {error}",
                f"set `{QUOTA_WAIT}` to a whole number of minutes from 0 to "
                f"{timing.GUARD_QUOTA_WAIT_MINUTES_MAX} (default {GUARD[QUOTA_WAIT].default}), "
                "or leave it out",
                level="error",
            )
        return
    timeout = job.get("timeout-minutes")
    have = whole_minutes(timeout.text if timeout is not None else None)
    if not wait or timeout is None or have is None or have > guard_longest_minutes(wait):
        return
    longest = guard_longest_minutes(wait)
    report.add(
        child.path,
        timeout.line,
        "RQF123",
        f"the worker stops after {have} minutes, and a guard that meets a spent API quota may "
        f"take {longest:g} before the workload starts (its 2-minute check, a wait of up to "
        f"{wait} minutes for the quota's reset, `{QUOTA_WAIT}`, and every check again): the wait "
        "counts against `timeout-minutes`, and leaves the workload no time",
        f"raise `timeout-minutes` above {longest:g} by the workload's own time, or lower the "
        f"guard's `{QUOTA_WAIT}` (0: it fails closed at once on a spent quota)",
    )


#: The comment that states a job container's image has python3 >= 3.11 on PATH (RQF122), written
#: on the `container:` line or on its `image:` line.
PYTHON_IMAGE_MARKER = "rqf: python3.11+"


def _container(child: Workflow, job: Node, guard: Guard, report: Findings) -> None:
    """RQF122: in a `container:` job the composite guard runs on the image's Python, if any.

    Its `run:` steps execute inside the job's image, where actions/setup-python's build need not
    run, so without python3 >= 3.11 there it fails closed; the Docker guard brings its own Python,
    and a container job's runner has Docker.
    """
    container = job.get("container")
    path = (guard.step.text_of("uses") or "").strip().partition("@")[0].rstrip("/")
    if container is None or path.endswith("guard/docker"):
        return
    image = container.get("image")
    lines = {container.line, image.line if image is not None else container.line}
    if any(_marked(child.line_text(line)) for line in lines):
        return
    report.add(
        child.path,
        guard.uses_line,
        "RQF122",
        "the composite guard in a `container:` job runs inside the job's image: without "
        "python3 >= 3.11 there (a CUDA image often has none) it fails closed before any workload",
        "use the Docker form, `<owner>/runner-queue-fallback/guard/docker@<same ref>`, or, if the "
        f"image has python3 >= 3.11 on PATH, say so with `# {PYTHON_IMAGE_MARKER}` on its "
        "`image:` line",
    )


def _marked(line: str) -> bool:
    """True if the line's comment carries the RQF122 marker (any case)."""
    _, hash_, comment = line.partition("#")
    return bool(hash_) and PYTHON_IMAGE_MARKER in comment.lower()


def _checkout(child: Workflow, step: Node, report: Findings) -> None:
    with_ = step.get("with")
    line = with_.line if with_ is not None else step.line
    repository = with_.get("repository") if with_ is not None else None
    ref = with_.get("ref") if with_ is not None else None
    if repository is None and not wired_to(ref.text if ref is not None else None, "source-sha"):
        report.add(
            child.path,
            ref.line if ref is not None else line,
            "RQF114",
            "the checkout does not use the dispatched SHA; the worker would test another revision "
            "than the one the guard approved",
            "set `ref: ${{ inputs.source-sha }}` on the checkout",
        )
    persist = with_.get("persist-credentials") if with_ is not None else None
    if not is_false(persist):
        report.add(
            child.path,
            persist.line if persist is not None else line,
            "RQF115",
            "the checkout keeps the token in .git/config, where workload code can read it",
            "set `persist-credentials: false` on the checkout",
        )


def pin_warning(workflow: Workflow, ref: ActionRef, line: int, report: Findings) -> None:
    """RQF304: warn when our action is used at a branch (or a short SHA), which can move."""
    if ref.pinned:
        return
    report.add(
        workflow.path,
        line,
        "RQF304",
        f"the {ref.kind} action is used at `{ref.ref}`, which can move under a running sequence",
        "pin both the coordinator and the guard to the same full commit SHA or release tag",
    )


def check_dispatch_inputs(child: Workflow, trigger: Node, report: Findings, *, sender: str) -> None:
    """RQF302: the child declares the seven inputs the coordinator (`sender`) sends, no other."""
    inputs = trigger.get("inputs")
    declared = dict(inputs.items()) if inputs is not None else {}
    missing = [name for name in CHILD_INPUTS if name not in declared]
    if missing:
        report.add(
            child.path,
            (inputs or trigger).line,
            "RQF302",
            f"the child does not declare {', '.join(f'`{n}`' for n in missing)}, which the "
            f"coordinator ({sender}) sends; GitHub rejects the dispatch",
            "declare each under `on.workflow_dispatch.inputs` with `required: true` and "
            "`type: string`",
        )
    for name, node in declared.items():
        if name in CHILD_INPUTS:
            continue
        fix = f"remove `{name}` and pass extra data in the `workload` JSON object"
        if is_true(node.get("required")) and node.get("default") is None:
            report.add(
                child.path,
                node.line,
                "RQF302",
                f"the child requires `{name}`, which the coordinator never sends; GitHub rejects "
                "every dispatch",
                fix,
            )
        else:
            report.add(
                child.path,
                node.line,
                "RQF302",
                f"the child declares `{name}`, which the coordinator never sends; it always takes "
                "its default (or is empty)",
                fix,
                level="warning",
            )
