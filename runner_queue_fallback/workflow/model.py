"""A workflow as lint and the coordinator read it: rule table, findings, YAML nodes, `uses` refs.

Long (the rule table) because every rule's id, level and summary is data read as one list.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import yaml

from runner_queue_fallback.core.inputs import CHILD_INPUTS, FULL_SHA, whole_number
from runner_queue_fallback.core.yaml_errors import explain as explain_yaml_error

__all__ = [
    "CHILD_INPUTS",
    "RULES",
    "ActionRef",
    "Finding",
    "Findings",
    "Level",
    "Node",
    "Rule",
    "Workflow",
    "events_of",
    "has_secret",
    "is_checkout",
    "is_expression",
    "is_false",
    "is_true",
    "load_workflow",
    "parse_uses",
    "parse_workflow",
    "permissions_of",
    "whole_minutes",
    "wired_to",
]

Level = Literal["error", "warning", "notice"]


@dataclass(frozen=True)
class Rule:
    """One lint rule: a stable id, how bad breaking it is, and what it checks."""

    id: str
    level: Level
    checks: str


_RULES = (
    Rule("RQF000", "error", "the file is readable YAML with a mapping at the top"),
    Rule("RQF101", "error", "child: `on:` is `workflow_dispatch` and nothing else"),
    Rule(
        "RQF102", "error", "child: each of the seven inputs is `type: string` and `required: true`"
    ),
    Rule("RQF103", "error", "child: `run-name: ${{ inputs.request-id }}`"),
    Rule("RQF104", "error", "child: exactly one job"),
    Rule("RQF105", "error", "child: the job id is `worker`, and `name`, if set, is `worker`"),
    Rule("RQF106", "error", "child: `runs-on: ${{ fromJSON(inputs.runner) }}`"),
    Rule("RQF107", "error", "child: no `strategy` (matrix) on the worker job"),
    Rule("RQF108", "error", "child: no `needs` on the worker job"),
    Rule("RQF109", "error", "child: no `environment` on the worker job"),
    Rule("RQF110", "error", "child: no job-level `if` on the worker job"),
    Rule("RQF111", "error", "child: no `concurrency`, at workflow or job level"),
    Rule("RQF112", "error", "child: the guard is the first step and has no `if`"),
    Rule(
        "RQF113", "error", "child: the guard's five inputs are wired to the matching child inputs"
    ),
    Rule("RQF114", "error", "child: a checkout of the source uses `ref: ${{ inputs.source-sha }}`"),
    Rule("RQF115", "error", "child: every checkout sets `persist-credentials: false`"),
    Rule("RQF116", "error", "child: the worker job sets a numeric `timeout-minutes`"),
    Rule(
        "RQF117",
        "error",
        "child: permissions are declared and read-only (no `write`, no `write-all`)",
    ),
    Rule(
        "RQF118", "error", "child: permissions grant the guard `actions: read` and `contents: read`"
    ),
    Rule(
        "RQF119",
        "error",
        "child: no `continue-on-error` on the worker job or the guard (a warning on other steps)",
    ),
    Rule(
        "RQF120",
        "error",
        "child: no `${{ secrets.* }}` in the guard's `with:` (GITHUB_TOKEN aside)",
    ),
    Rule(
        "RQF121",
        "notice",
        "child: a guard that sets `coordinator-workflow` also sets `coordinator-ref`",
    ),
    Rule(
        "RQF122",
        "warning",
        "child: a `container:` worker uses guard/docker, or its image is marked `# rqf: python3.11+`",
    ),
    Rule(
        "RQF123",
        "warning",
        "child: the worker's `timeout-minutes` leaves room for the guard's quota wait (a bad "
        "`guard-quota-wait-minutes` is an error)",
    ),
    Rule("RQF200", "error", "coordinator: the file has a step that uses the coordinator action"),
    Rule(
        "RQF201",
        "error",
        "coordinator: runner-type, workflow, workflow-ref, source-ref, source-sha set",
    ),
    Rule(
        "RQF202",
        "error",
        "coordinator: job permissions include `actions: write` and `contents: read` (without an "
        "App's credentials)",
    ),
    Rule(
        "RQF203",
        "error",
        "coordinator: job `timeout-minutes` >= what `plan` computes (<= 360 on a hosted runner)",
    ),
    Rule("RQF204", "error", "coordinator: literal inputs pass the action's own validation"),
    Rule(
        "RQF205", "error", "coordinator: `workflow` is the child's file name (and the child given)"
    ),
    Rule("RQF206", "error", "coordinator: `source-policy` is a literal, never an expression"),
    Rule(
        "RQF207", "error", "coordinator: `pinned-after-start` runs with `cancel-in-progress: false`"
    ),
    Rule(
        "RQF208",
        "error",
        "coordinator: source-ref, source-sha, workflow-ref not from PR-controlled values",
    ),
    Rule(
        "RQF209",
        "error",
        "coordinator: no `${{ secrets.* }}` in any input but the credentials and `app-id`",
    ),
    Rule("RQF210", "warning", "coordinator: a matrix of coordinators sets `strategy.max-parallel`"),
    Rule("RQF211", "warning", "coordinator: every `with:` key is an input of the action"),
    Rule(
        "RQF212",
        "error",
        "coordinator: the job holds no pool runner (`self-hosted` alone, an NVIDIA label, a group)",
    ),
    Rule("RQF213", "error", "coordinator: the job does not check out the source repository"),
    Rule("RQF214", "warning", "coordinator: the job has no `run:` steps (workload code)"),
    Rule(
        "RQF215",
        "error",
        "coordinator: no `source-policy: pinned-after-start` on `pull_request(_target)`",
    ),
    Rule(
        "RQF216",
        "warning",
        "coordinator: on `pull_request(_target)`, source-ref/sha are not `github.ref`/`github.sha`",
    ),
    Rule(
        "RQF217",
        "warning",
        "coordinator: on a GitHub-hosted runner, job `timeout-minutes` is at most 360",
    ),
    Rule(
        "RQF218",
        "warning",
        "coordinator: every queue deadline is at least 2 minutes (GitHub's broker and re-queue)",
    ),
    Rule(
        "RQF219",
        "error",
        "coordinator: `steps.<id>.outputs` of the coordinator step name its outputs and outcomes",
    ),
    Rule(
        "RQF220",
        "warning",
        "coordinator: candidates on macOS or Windows (only the composite guard, not tried there)",
    ),
    Rule(
        "RQF221",
        "notice",
        "coordinator: `runners` with expressions is checked with stand-ins, or said unchecked",
    ),
    Rule(
        "RQF222",
        "notice",
        "coordinator: `runners-token` comes from a secret or a step's output, not `GITHUB_TOKEN`",
    ),
    Rule(
        "RQF223",
        "warning",
        "coordinator: not both `token` and the GitHub App's credentials (the App's token wins)",
    ),
    Rule("RQF301", "error", "pair: the child workflow file named by `workflow` exists"),
    Rule(
        "RQF302",
        "error",
        "pair: the child declares the seven inputs the coordinator sends, and no other required one",
    ),
    Rule("RQF303", "error", "pair: coordinator and guard come from the same repository and ref"),
    Rule(
        "RQF304",
        "warning",
        "pair: coordinator and guard are pinned to a full SHA or a tag, not a branch",
    ),
    Rule(
        "RQF305",
        "warning",
        "pair: child `timeout-minutes` >= coordinator `execution-timeout-minutes`",
    ),
    Rule(
        "RQF306",
        "warning",
        "pair: the child's guard sets `coordinator-workflow` to the coordinator's file name",
    ),
    Rule(
        "RQF307",
        "warning",
        "pair: with a GitHub-hosted candidate, billed and off the private network, the child's "
        "steps without an `if:` on the runner listed; guard first and execution <= 360 min "
        "(errors); not checked for expressions (notice)",
    ),
    Rule(
        "RQF308",
        "warning",
        "pair: the coordinator's execution timeout leaves room for the child guard's quota wait",
    ),
)
#: Every rule, by id.
RULES: Final = {rule.id: rule for rule in _RULES}


@dataclass(frozen=True, order=True)
class Finding:
    """One problem at one line: what is wrong and why, and how to fix it."""

    path: str
    line: int
    rule: str
    level: Level
    message: str
    fix: str

    def text(self) -> str:
        """`file:line: RQF123 error: message (fix: ...)`."""
        return (
            f"{self.path}:{self.line}: {self.rule} {self.level}: {self.message} (fix: {self.fix})"
        )


class Findings:
    """Collects findings once each (a child shared by two coordinators is reported once)."""

    def __init__(self) -> None:
        """Start empty."""
        self._found: dict[Finding, None] = {}

    def add(
        self,
        path: Path,
        line: int,
        rule: str,
        message: str,
        fix: str,
        *,
        level: Level | None = None,
    ) -> None:
        """Record a finding of `rule` at its default level unless `level` is given."""
        found = Finding(str(path), line, rule, level or RULES[rule].level, message, fix)
        self._found[found] = None

    @property
    def findings(self) -> list[Finding]:
        """Every finding, by file, line and rule."""
        return sorted(self._found)


class Node:
    """A composed YAML node with the line (1-based) of the key that holds it.

    Built on `yaml.compose`, which keeps each scalar's text as written: the `on:` key stays the
    string "on" here, where `yaml.safe_load` would turn it into the boolean True (YAML 1.1).
    """

    __slots__ = ("line", "raw")

    def __init__(self, raw: yaml.Node, line: int | None = None) -> None:
        """Wrap `raw`; `line` is the key's line, by default where the node starts."""
        self.raw = raw
        self.line = line if line is not None else raw.start_mark.line + 1

    def items(self) -> Iterator[tuple[str, Node]]:
        """A mapping's scalar keys and their values (nothing for other nodes)."""
        if isinstance(self.raw, yaml.MappingNode):
            for key, value in self.raw.value:
                if isinstance(key, yaml.ScalarNode):
                    yield key.value, Node(value, key.start_mark.line + 1)

    def get(self, key: str) -> Node | None:
        """The value under `key` in a mapping, or None."""
        return next((value for name, value in self.items() if name == key), None)

    def keys(self) -> list[str]:
        """A mapping's keys."""
        return [name for name, _ in self.items()]

    def seq(self) -> list[Node]:
        """A sequence's items (nothing for other nodes)."""
        if isinstance(self.raw, yaml.SequenceNode):
            return [Node(item) for item in self.raw.value]
        return []

    @property
    def text(self) -> str | None:
        """A scalar's text as written (quotes removed), or None for a mapping or sequence."""
        return str(self.raw.value) if isinstance(self.raw, yaml.ScalarNode) else None

    def text_of(self, key: str) -> str | None:
        """The scalar text under `key`, or None."""
        value = self.get(key)
        return value.text if value is not None else None


@dataclass(frozen=True)
class Workflow:
    """A parsed workflow file, and its text (for the comments YAML drops, such as RQF122's marker)."""

    path: Path
    root: Node
    text: str = ""

    def line_text(self, line: int) -> str:
        """The file's line `line` (1-based) as written, comment included; "" past the end."""
        lines = self.text.splitlines()
        return lines[line - 1] if 0 < line <= len(lines) else ""

    def jobs(self) -> list[tuple[str, Node]]:
        """Each job id and its mapping."""
        jobs = self.root.get("jobs")
        return list(jobs.items()) if jobs is not None else []


#: libyaml's loader when installed: ten times faster, and the coordinator parses its child each run.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_workflow(path: Path, report: Findings) -> Workflow | None:
    """Parse `path`, or report RQF000 and return None."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        report.add(path, 1, "RQF000", f"cannot be read ({exc})", "check the path and encoding")
        return None
    return parse_workflow(path, text, report)


def parse_workflow(path: Path, text: str, report: Findings) -> Workflow | None:
    """Parse `text` (the file `path`, which is not read), or report RQF000 and return None."""
    try:
        root = yaml.compose(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        problem = explain_yaml_error(exc, text)
        report.add(path, problem.line, "RQF000", problem.message, problem.fix)
        return None
    except RecursionError:  # PyYAML's own loader recurses per level; libyaml stops at 1000
        report.add(
            path,
            1,
            "RQF000",
            "not readable YAML: its nesting is deeper than can be read",
            "a workflow needs no more than a few levels of nesting; fix the file",
        )
        return None
    if not isinstance(root, yaml.MappingNode):
        report.add(
            path,
            1,
            "RQF000",
            "is not a workflow: the top level must be a mapping",
            "start the file with `name:`, `on:` and `jobs:` keys",
        )
        return None
    return Workflow(path, Node(root), text)


def whole_minutes(text: str | None) -> int | None:
    """A literal whole number of minutes such as `timeout-minutes: 135`, else None."""
    return whole_number((text or "").strip(), 9)


def is_false(node: Node | None) -> bool:
    """True for a YAML boolean false in any of its spellings (`false`, `False`, `FALSE`)."""
    return node is not None and (node.text or "").strip().lower() == "false"


def is_true(node: Node | None) -> bool:
    """True for a YAML boolean true in any of its spellings (`true`, `True`, `TRUE`)."""
    return node is not None and (node.text or "").strip().lower() == "true"


def events_of(on: Node | None) -> list[tuple[str, int]]:
    """The events of an `on:` in any of its three forms (name, list, mapping), each with its line."""
    if on is None:
        return []
    if on.text is not None:
        return [(on.text, on.line)]
    if on.seq():
        return [(item.text or "", item.line) for item in on.seq()]
    return [(name, value.line) for name, value in on.items()]


def is_checkout(uses: str | None) -> bool:
    """True for a checkout action (`actions/checkout@v4`, `<org>/<repo>/checkout@ref`)."""
    return (uses or "").strip().rpartition("@")[0].rstrip("/").endswith("checkout")


def is_expression(text: str) -> bool:
    """True if the value contains a `${{ ... }}` expression."""
    return "${{" in text


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text).lower()


def wired_to(text: str | None, name: str) -> bool:
    """True if the value is exactly `${{ inputs.<name> }}` (or `github.event.inputs.<name>`)."""
    if text is None:
        return False
    value = _squash(text)
    return value in {f"${{{{inputs.{name}}}}}", f"${{{{github.event.inputs.{name}}}}}"}


_SECRET = re.compile(r"\$\{\{[^}]*\bsecrets\s*(\.\s*(?P<name>[A-Za-z_][\w-]*)|\[)")


def has_secret(text: str | None, *, allow_github_token: bool = False) -> bool:
    """True if an expression in the value reads a secret."""
    for match in _SECRET.finditer(text or ""):
        if not (allow_github_token and (match["name"] or "").upper() == "GITHUB_TOKEN"):
            return True
    return False


def permissions_of(node: Node | None) -> str | dict[str, tuple[str, int]] | None:
    """A `permissions:` value: None if absent, `read-all`/`write-all`, or scope -> (level, line)."""
    if node is None:
        return None
    if node.text is not None:
        return node.text.strip() or {}
    return {scope: (value.text or "", value.line) for scope, value in node.items()}


_TAG = re.compile(r"^v?\d+(\.\d+){0,3}([-+.][0-9A-Za-z][0-9A-Za-z.-]*)?$")
_LOCAL_COORDINATOR = {".", "./", "./."}
#: Both guard forms: the composite at guard/ (the default) and the Docker action at guard/docker.
_GUARD_PATHS = ("guard", "guard/docker")
_LOCAL_GUARD = {f"./{path}{end}" for path in _GUARD_PATHS for end in ("", "/")}


@dataclass(frozen=True)
class ActionRef:
    """Where a `uses:` of our actions comes from: a repository at a ref, or this checkout."""

    kind: Literal["coordinator", "guard"]
    repo: str | None
    ref: str | None

    @property
    def source(self) -> str:
        """`owner/repo@ref`, or "the local checkout" for `./`."""
        return f"{self.repo}@{self.ref}" if self.repo else "the local checkout (./)"

    @property
    def pinned(self) -> bool:
        """True for a local path, a full commit SHA or a tag-like ref such as v1 or v1.2.3."""
        return self.ref is None or bool(FULL_SHA.match(self.ref) or _TAG.match(self.ref))


def parse_uses(text: str | None) -> ActionRef | None:
    """Recognise the coordinator (`.../runner-queue-fallback@ref`, `./`) or either guard form.

    The guard is `.../runner-queue-fallback/guard@ref` (composite, no Docker) or
    `.../runner-queue-fallback/guard/docker@ref` (Docker container action), or their `./` forms.
    """
    value = (text or "").strip()
    if value in _LOCAL_COORDINATOR:
        return ActionRef("coordinator", None, None)
    if value in _LOCAL_GUARD:
        return ActionRef("guard", None, None)
    path, at, ref = value.rpartition("@")
    if not at or not ref:
        return None
    repo = "/".join(path.split("/")[:2])
    if path.endswith("/runner-queue-fallback"):
        return ActionRef("coordinator", repo, ref)
    if any(path.endswith(f"/runner-queue-fallback/{guard}") for guard in _GUARD_PATHS):
        return ActionRef("guard", repo, ref)
    return None
