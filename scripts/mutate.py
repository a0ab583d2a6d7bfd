"""Mutation testing of the core: a small ast-based runner of our own (scripts/mutate runs it).

Long (a self-contained runner) because sites, self-check, map, fork, results and report run as one
script.

Why our own: mutmut 3 rewrites every function into a trampoline inside the package, which the
pydantic models and the architecture tests of this repository do not survive unchanged; this
runner never touches the working tree and is predictable on a shared 2-core machine.

How it works:
1. Mutants: comparison (`<` <-> `<=`, `>` <-> `>=`, `==` <-> `!=`, `in` <-> `not in`, `is` <->
   `is not`), boolean (`and` <-> `or`, `not x` -> `x`, `True` <-> `False`), arithmetic (`+` <->
   `-`, `*` <-> `/`, `//` -> `/`, and in `+=`/`-=`), constant (a number n -> n + 1) and
   statement deletion (an expression, assignment or `raise` replaced by `pass`). Docstrings,
   `assert` (type narrowing), imports, class bodies (fields) and strings are not mutated; a line
   ending in `# no mutate` is skipped.
2. Which tests cover which function: the tests of the core (`MAP_TESTS`) run once in-process with
   a profile hook that records, per test, every core function it called (`.mutate/map.json`,
   rebuilt when a core module or a test changes). A mutant inside a function runs the tests that
   called it; a mutant of a module-level constant runs the tests of every function that names it;
   code that runs only at import time (a class body, a default) runs its whole module's tests.
3. The runner checks itself before any mutant of a module runs: the module as it re-emits it
   (walked and unparsed, no mutant applied) must be the same program (an AST equal to the
   original's) and pass its tests in the copy; otherwise the module is refused, with no figures.
   Each mutant is written into a private copy of the repository (never the working tree), and a
   forked process imports the mutated module, then runs `pytest -x` on the selected tests (with a
   timeout). A mutant that does not compile or import is invalid: a defect of the runner, never
   counted as killed. Survivors then run the fuzz tests (`tests/test_fuzz_coordinator.py`, the CI
   volume) unless `--no-fuzz`.
4. Results are kept per module in `.mutate/results.json`: a module whose source changed, or any
   module after a change of this runner, starts again; after a change of the tests the killed stay
   killed and the survivors run again. An interrupted run resumes where it stopped, and runs on
   different modules may run side by side (saves merge under a lock). The copy keeps Python's
   bytecode cache; the mutated module's `.pyc` is dropped for each mutant (its stamp cannot tell
   two mutants of one second apart).
5. The report: per module, killed / total, the equivalent mutants (`tests/mutation/equivalent.txt`,
   reviewed, one line of reason each), every other survivor and the invalid mutants (out of the
   total). Exit status 1 when a survivor is not on the equivalent list, a mutant is invalid, a
   module was refused or is under `--min-score` (killed / (total - equivalent)).
"""

from __future__ import annotations

import argparse
import ast
import copy
import faulthandler
import fcntl
import hashlib
import importlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "runner_queue_fallback"
CORE = (
    "action/coordinator.py",
    "action/sequence/dispatch.py",
    "action/sequence/startup.py",
    "action/sequence/queue.py",
    "action/sequence/cancellation.py",
    "action/sequence/execution.py",
    "action/sequence/admission.py",
    "action/sequence/access.py",
    "action/sequence/child_workflow.py",
    "action/sequence/state.py",
    "action/sequence/facts.py",
    "action/sequence/quota_pause.py",
    "action/ledger.py",
    "action/attempts.py",
    "action/sequence/run_name.py",
    "action/sequence/job_time.py",
    "action/observe.py",
    "action/guard.py",
    "action/parent.py",
    "action/cleanup.py",
    "action/post_step.py",
    "github/retry.py",
    "core/timing.py",
    "core/hand_off.py",
)
FUZZ_TESTS = ("tests/test_fuzz_coordinator.py",)
#: The tests that exercise the core (the map is built from these); the others (`UNMAPPED_TESTS`)
#: would only make the map slow to build. The inputs and plan tests read `timing`'s limits
#: (deadlines, candidates, the hosted job limit); the stats tests read through the client's retries.
MAP_TESTS = (
    "tests/test_access.py",
    "tests/test_actions_io.py",
    "tests/test_api_contract.py",
    "tests/test_api_versions.py",
    "tests/test_attempts.py",
    "tests/test_bench.py",
    "tests/test_cancel_and_confirm.py",
    "tests/test_cli.py",
    "tests/test_cli_output.py",
    "tests/test_coordinator.py",
    "tests/test_copy_window.py",
    "tests/test_dispatch.py",
    "tests/test_execution.py",
    "tests/test_first_hour.py",
    "tests/test_github_client.py",
    "tests/test_guard.py",
    "tests/test_guard_parent_ref.py",
    "tests/test_guard_quota_wait.py",
    "tests/test_guard_runner.py",
    "tests/test_hand_off.py",
    "tests/test_hosted.py",
    "tests/test_input_rules.py",
    "tests/test_input_table.py",
    "tests/test_inputs.py",
    "tests/test_job_time.py",
    "tests/test_ledger.py",
    "tests/test_observe.py",
    "tests/test_older_server.py",
    "tests/test_outcome.py",
    "tests/test_outside_text.py",
    "tests/test_own_runners.py",
    "tests/test_parent.py",
    "tests/test_plan.py",
    "tests/test_platform.py",
    "tests/test_pool_access.py",
    "tests/test_post_step.py",
    "tests/test_preflight.py",
    "tests/test_queue.py",
    "tests/test_quota.py",
    "tests/test_quota_pauses.py",
    "tests/test_request_id.py",
    "tests/test_retry.py",
    "tests/test_rules.py",
    "tests/test_run_name.py",
    "tests/test_runner_groups.py",
    "tests/test_sim_transport.py",
    "tests/test_simulate.py",
    "tests/test_simulate_story.py",
    "tests/test_startup_rules.py",
    "tests/test_stats_command.py",
    "tests/test_stats_history.py",
    "tests/test_stats_label_sets.py",
    "tests/test_stats_recommend.py",
    "tests/test_stats_survival.py",
    "tests/test_troubleshooting.py",
    "tests/test_user_facing.py",
    "tests/test_workflow_model.py",
)
#: The test files left out of the map: they call no core function (lint, packaging, the
#: simulator's own tests, the docs; measured with the map's profile hook), or they are the fuzz
#: stage (`FUZZ_TESTS`, and the input fuzzer, which reaches only `inputs`). `tests/test_mutate.py`
#: holds every test file to one of the two lists: a new file of rule tests cannot go unmapped.
UNMAPPED_TESTS = (
    "tests/test_app_credentials.py",
    "tests/test_app_token.py",
    "tests/test_architecture.py",
    "tests/test_clock.py",
    "tests/test_copyable_yaml.py",
    "tests/test_fuzz_coordinator.py",
    "tests/test_fuzz_cost.py",
    "tests/test_fuzz_inputs.py",
    "tests/test_github_models.py",
    "tests/test_guard_action.py",
    "tests/test_guard_isolation.py",
    "tests/test_labels.py",
    "tests/test_lint.py",
    "tests/test_machine.py",
    "tests/test_mutate.py",
    "tests/test_outside_linters.py",
    "tests/test_packaging.py",
    "tests/test_profiles.py",
    "tests/test_readme.py",
    "tests/test_sim_apps.py",
    "tests/test_sim_boundary.py",
    "tests/test_sim_dynamics.py",
    "tests/test_sim_faults.py",
    "tests/test_sim_fidelity.py",
    "tests/test_sim_limits.py",
    "tests/test_sim_runner_groups.py",
    "tests/test_sim_scenario.py",
    "tests/test_sim_schema.py",
    "tests/test_sim_support.py",
    "tests/test_sim_vclock.py",
    "tests/test_simulate_replay.py",
    "tests/test_timeline.py",
    "tests/test_try_it.py",
    "tests/test_yaml_errors.py",
)
STATE = ROOT / ".mutate"
EQUIVALENT = ROOT / "tests" / "mutation" / "equivalent.txt"
PRAGMA = "# no mutate"
#: Results are the runner's as much as the module's: a change of this file starts every module again.
RUNNER = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]

COMPARE_SWAP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
BINOP_SWAP: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
}


# ------------------------------------------------------------------------------ mutants


@dataclass(frozen=True)
class Mutant:
    """One change to one module: `key` names it stably (no line numbers) for the equivalent list."""

    module: str
    index: int  # the n-th mutation site of the module, in walk order
    function: str  # qualified name of the enclosing function, or <module>
    line: int
    kind: str
    before: str
    after: str
    key: str


def _short(node: ast.AST) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= 70 else text[:67] + "..."


class _Sites(ast.NodeTransformer):
    """Walks a module; lists its mutation sites, or applies the one numbered `target`."""

    def __init__(self, lines: list[str], target: int | None = None) -> None:
        self.lines = lines
        self.target = target
        self.count = 0
        self.stack: list[str] = []
        self.in_class_body = False
        self.found: list[tuple[int, str, int, str, str, str]] = []  # index, fn, line, kind, b, a
        self.depth_fstring = 0
        #: the name a module-level assignment binds: it names the mutant instead of `<module>`
        self.binding: str | None = None

    # -- bookkeeping

    def _function(self) -> str:
        return ".".join(self.stack) if self.stack else "<module>"

    def _skip(self, node: ast.AST) -> bool:
        line = getattr(node, "lineno", 0)
        return self.depth_fstring > 0 or (
            0 < line <= len(self.lines) and self.lines[line - 1].rstrip().endswith(PRAGMA)
        )

    def _site(self, node: ast.AST, kind: str, before: ast.AST, after: ast.AST) -> bool:
        """Register a site; True when it is the one to apply."""
        index = self.count
        self.count += 1
        function = self._function()
        if function == "<module>" and self.binding:
            function = f"<module>.{self.binding}"
        self.found.append(
            (
                index,
                function,
                getattr(node, "lineno", 0),
                kind,
                _short(before),
                _short(after),
            )
        )
        return index == self.target

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return self._scope(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        return self._scope(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        self.stack.append(node.name)
        outer, self.in_class_body = self.in_class_body, True
        node.body = self._body(node.body)
        self.in_class_body = outer
        self.stack.pop()
        return node

    def _scope(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        if self.stack and not self.in_class_body:
            self.stack.append("<locals>")
            self.stack.append(node.name)
            pops = 2
        else:
            self.stack.append(node.name)
            pops = 1
        outer, self.in_class_body = self.in_class_body, False
        node.args = self.visit(node.args)
        node.body = self._body(node.body)
        self.in_class_body = outer
        for _ in range(pops):
            self.stack.pop()
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        self.stack.append("<lambda>")
        self.generic_visit(node)
        self.stack.pop()
        return node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        return node  # log wording is not mutated (nor the numbers of its format specs)

    # -- statements

    def _body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for position, stmt in enumerate(body):
            if self._deletable(stmt, position):
                replacement = ast.copy_location(ast.Pass(), stmt)
                if self._site(stmt, "delete", stmt, replacement):
                    out.append(replacement)
                    continue
            out.append(self.visit(stmt))
        return out

    def _deletable(self, stmt: ast.stmt, position: int) -> bool:
        if self.in_class_body or self._skip(stmt):
            return False
        if isinstance(stmt, ast.Expr):
            is_doc = position == 0 and isinstance(stmt.value, ast.Constant)
            return not is_doc and not isinstance(stmt.value, ast.Constant)
        if isinstance(stmt, ast.Assign):
            names = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
            return "__all__" not in names and bool(self.stack)
        return isinstance(stmt, ast.AugAssign | ast.Raise) and bool(self.stack)

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for field, old in ast.iter_fields(node):
            if isinstance(old, list) and old and isinstance(old[0], ast.stmt):
                setattr(node, field, self._body(old))
            elif isinstance(old, list):
                # An element is kept as it is unless it is a node: `None` is part of the program in
                # a list field (a keyword-only parameter without default in `kw_defaults`, a
                # `**mapping` in a dict's `keys`). Our visitors never remove a node.
                setattr(node, field, [self.visit(v) if isinstance(v, ast.AST) else v for v in old])
            elif isinstance(old, ast.AST):
                setattr(node, field, self.visit(old))
        return node

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        return node

    def visit_Import(self, node: ast.Import) -> ast.AST:
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST:
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if node.value is not None:
            if not self.stack and isinstance(node.target, ast.Name):
                self.binding = node.target.id
            node.value = self.visit(node.value)
            self.binding = None
        return node  # the annotation (Final, types) is not code that runs

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        if not self.stack and isinstance(node.targets[0], ast.Name):
            self.binding = node.targets[0].id
        self.generic_visit(node)
        self.binding = None
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        return node

    # -- expressions

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if self._skip(node):
            return node
        for i, op in enumerate(node.ops):
            swap = COMPARE_SWAP.get(type(op))
            if swap is None:
                continue
            mutated = copy.deepcopy(node)
            mutated.ops[i] = swap()
            if self._site(node, "compare", node, mutated):
                return mutated
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        if self._skip(node):
            return node
        mutated = copy.deepcopy(node)
        mutated.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        return mutated if self._site(node, "boolean", node, mutated) else node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if self._skip(node) or not isinstance(node.op, ast.Not):
            return node
        return node.operand if self._site(node, "boolean", node, node.operand) else node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        swap = BINOP_SWAP.get(type(node.op))
        if self._skip(node) or swap is None or _is_text(node):
            return node
        mutated = copy.deepcopy(node)
        mutated.op = swap()
        return mutated if self._site(node, "arithmetic", node, mutated) else node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        swap = BINOP_SWAP.get(type(node.op))
        if self._skip(node) or swap is None or not isinstance(node.op, ast.Add | ast.Sub):
            return node
        mutated = copy.deepcopy(node)
        mutated.op = swap()
        return mutated if self._site(node, "arithmetic", node, mutated) else node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if self._skip(node):
            return node
        value = node.value
        if isinstance(value, bool):
            mutated = ast.copy_location(ast.Constant(not value), node)
            return mutated if self._site(node, "boolean", node, mutated) else node
        if isinstance(value, int | float):
            mutated = ast.copy_location(ast.Constant(value + 1), node)
            return mutated if self._site(node, "constant", node, mutated) else node
        return node


def _is_text(node: ast.BinOp) -> bool:
    """String concatenation or %-formatting: wording, not logic."""
    return any(
        isinstance(side, ast.JoinedStr)
        or (isinstance(side, ast.Constant) and isinstance(side.value, str))
        for side in (node.left, node.right)
    )


def module_path(module: str) -> Path:
    return ROOT / PACKAGE / module


def emit(source: str, target: int | None = None) -> str:
    """The module as the runner writes it: walked (mutant `target` applied, if any) and unparsed."""
    tree = _Sites(source.splitlines(), target=target).visit(ast.parse(source))
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


class SelfCheckFailed(Exception):
    """The runner cannot vouch for a module: its mutants would measure the runner, not the tests."""


def check_round_trip(module: str, source: str) -> None:
    """The module re-emitted without a mutant must be the same program (the same AST) as its source.

    Otherwise every mutant carries a second, unlisted change (the runner once dropped the `None`
    of a keyword-only parameter without default: every mutant of such a module "died").
    """
    original = ast.dump(ast.parse(source))
    try:
        emitted = ast.dump(ast.parse(emit(source)))
    except SyntaxError as exc:
        raise SelfCheckFailed(f"{module}: re-emitted unmutated, it does not parse ({exc})") from exc
    if emitted != original:
        line = _first_difference(ast.parse(source), ast.parse(emit(source)))
        raise SelfCheckFailed(
            f"{module}: re-emitted unmutated, it is not the same program (its AST differs from "
            f"the original's at line {line}: {source.splitlines()[line - 1].strip()!r})"
        )


def _first_difference(original: ast.AST, emitted: ast.AST) -> int:
    """The line of the first node (breadth first) whose fields differ between the two trees."""
    lines = {id(original): 1}
    for node in ast.walk(original):  # a node without a line (arguments) is at its parent's
        for child in ast.iter_child_nodes(node):
            lines[id(child)] = getattr(child, "lineno", lines[id(node)])
    for a, b in zip(ast.walk(original), ast.walk(emitted), strict=False):
        if type(a) is not type(b):
            return lines[id(a)]
        for (_, x), (_, y) in zip(ast.iter_fields(a), ast.iter_fields(b), strict=True):
            if isinstance(x, list) and isinstance(y, list):
                if [v if not isinstance(v, ast.AST) else type(v) for v in x] != [
                    v if not isinstance(v, ast.AST) else type(v) for v in y
                ]:
                    return lines[id(a)]
            elif not isinstance(x, ast.AST) and x != y:
                return lines[id(a)]
    return 1


def mutants_of(module: str) -> list[Mutant]:
    source = module_path(module).read_text()
    sites = _Sites(source.splitlines())
    sites.visit(ast.parse(source))
    seen: dict[str, int] = {}
    out = []
    for index, function, line, kind, before, after in sites.found:
        base = f"{module} :: {function} :: {kind} :: {before} => {after}"
        seen[base] = seen.get(base, 0) + 1
        key = base if seen[base] == 1 else f"{base} #{seen[base]}"
        out.append(Mutant(module, index, function, line, kind, before, after, key))
    return out


def mutated_source(mutant: Mutant) -> str:
    return emit(module_path(mutant.module).read_text(), mutant.index)


def compiles(source: str, module: str) -> bool:
    """False for a mutant that is no Python at all: an invalid mutant, never a killed one."""
    try:
        compile(source, module, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


# ------------------------------------------------------------------------- test mapping


def _digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(str(path.relative_to(ROOT)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _tests_digest() -> str:
    """The map's: the tests, the package, and which tests are mapped (a file added to the map)."""
    files = _digest([*ROOT.glob("tests/**/*.py"), *ROOT.glob(f"{PACKAGE}/**/*.py")])
    return hashlib.sha256(f"{files} {' '.join(MAP_TESTS)}".encode()).hexdigest()[:16]


class _Recorder:
    """A pytest plugin that records, per test, the package functions it called."""

    def __init__(self) -> None:
        self.current: str | None = None
        self.calls: dict[str, set[str]] = {}
        self.durations: dict[str, float] = {}
        self.package = str(ROOT / PACKAGE) + os.sep
        #: tests during which Python dropped the hook: their calls are recorded only in part
        self.lost: set[str] = set()

    def profile(self, frame: FrameType, event: str, _arg: object) -> None:
        if event == "call" and self.current is not None:
            filename = frame.f_code.co_filename
            if filename.startswith(self.package):
                name = f"{filename[len(self.package) :]}:{frame.f_code.co_qualname}"
                self.calls.setdefault(name, set()).add(self.current)

    def pytest_runtest_setup(self, item: Any) -> None:
        self.current = item.nodeid
        # Python drops a profile hook that raises (a test of deep input overflows the stack
        # inside it), and every later test would then be mapped to nothing: install it per test.
        sys.setprofile(self.profile)

    def pytest_runtest_teardown(self, item: Any) -> None:
        if sys.getprofile() != self.profile:
            self.lost.add(item.nodeid)
        self.current = None

    def pytest_runtest_logreport(self, report: Any) -> None:
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration


def build_map() -> dict[str, Any]:
    """Run the suite (fuzz tests excepted) once, in this process, recording calls per test."""
    import pytest  # noqa: PLC0415  # only the map and the workers need pytest

    print("scripts/mutate: mapping functions to tests (one run of the suite, fuzz excepted)")
    recorder = _Recorder()
    present = [t for t in MAP_TESTS if (ROOT / t).exists()]
    os.chdir(ROOT)
    sys.setprofile(recorder.profile)
    threading.setprofile(recorder.profile)
    try:
        code = pytest.main(
            ["-p", "no:cacheprovider", "-p", "no:xdist", "-q", "-o", "addopts=", *present],
            plugins=[recorder],
        )
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    if code != 0:
        sys.exit(f"scripts/mutate: the suite does not pass unmutated (pytest exit {code})")
    unmapped = sorted(set(recorder.durations) - {t for ts in recorder.calls.values() for t in ts})
    for nodeid in sorted(recorder.lost.union(unmapped)):
        why = "its calls are mapped only in part" if nodeid in recorder.lost else "no core call"
        print(f"scripts/mutate: map: {nodeid}: {why}")

    # the quickest tests first: with -x, most mutants are killed by the first that fails
    def order(tests: set[str]) -> list[str]:
        return sorted(tests, key=lambda t: (recorder.durations.get(t, 0.0), t))

    return {"digest": _tests_digest(), "calls": {k: order(v) for k, v in recorder.calls.items()}}


def load_map(*, rebuild: bool) -> dict[str, Any]:
    path = STATE / "map.json"
    if not rebuild and path.exists():
        data: dict[str, Any] = json.loads(path.read_text())
        if data.get("digest") == _tests_digest():
            return data
    # in a process of its own: this one must not import the package before it forks the runs
    subprocess.run([sys.executable, __file__, "--build-map"], check=True, cwd=ROOT)
    return json.loads(path.read_text())  # type: ignore[no-any-return]  # our own map file


def _names_used() -> dict[str, set[str]]:
    """For each package function (module:qualname), the names and attributes it reads.

    A function that reads a module-level constant defined from others (`LIMIT = GRACE - 60`)
    reads those too, so a mutant of `GRACE` runs the tests of `LIMIT`'s readers.
    """
    used: dict[str, set[str]] = {}
    derived: dict[str, set[str]] = {}
    for path in (ROOT / PACKAGE).rglob("*.py"):
        rel = str(path.relative_to(ROOT / PACKAGE))
        tree = ast.parse(path.read_text())
        for qual, fn in _functions(tree):
            used[f"{rel}:{qual}"] = _read_names(fn)
        for target, value in _module_constants(tree):
            derived.setdefault(target, set()).update(_read_names(value))
    for read in used.values():
        frontier = set(read)
        while frontier:
            frontier = set().union(*(derived.get(n, set()) for n in frontier)) - read
            read.update(frontier)
    return used


def _read_names(node: ast.AST) -> set[str]:
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    return names | {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def _module_constants(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """Each module-level `NAME = value` (or `NAME: T = value`) as (NAME, value)."""
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    yield target.id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            yield node.target.id, node.value


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.AST]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            qual = prefix + node.name
            yield qual, node
            yield from _functions(node, qual + ".<locals>.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")


def tests_for(mutant: Mutant, calls: dict[str, list[str]], used: dict[str, set[str]]) -> list[str]:
    """The tests that run the mutated code, quickest first."""
    readers: dict[str, None] = {}
    if not mutant.function.startswith("<module>"):
        function = mutant.function
        while True:  # a lambda or a nested def runs within its enclosing function's tests
            tests = calls.get(f"{mutant.module}:{function}")
            if tests or "." not in function:
                readers.update(dict.fromkeys(tests or []))
                break
            function = function.rsplit(".", 1)[0].removesuffix(".<locals>")
    else:  # a module-level constant: the tests of every function that reads a name on its line
        name = mutant.function.removeprefix("<module>").removeprefix(".")
        for function, names in used.items():
            if name in names:
                readers.update(dict.fromkeys(calls.get(function, [])))
    if not readers:  # run at import time (a class body, a default, a constant): the module's tests
        for function, tests in calls.items():
            if function.startswith(f"{mutant.module}:"):
                readers.update(dict.fromkeys(tests))
    return list(readers)


# ---------------------------------------------------------------------------------- runs


def _copy_tree(into: Path) -> Path:
    target = into / "repo"
    shutil.copytree(
        ROOT,
        target,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", ".mutate", "__pycache__", "*_cache", ".hypothesis"
        ),
    )
    return target


#: The exit status of a run whose module under test does not import (SyntaxError, ImportError).
INVALID_EXIT = 86


def dotted(module: str) -> str:
    """The import name of a core module (`action/sequence/context.py` -> `<package>.sequence.context`)."""
    return ".".join((PACKAGE, *Path(module).with_suffix("").parts))


def run_tests(tree: Path, tests: list[str], timeout: float, module: str | None = None) -> str:
    """Run pytest -x on `tests` in `tree`, in a forked process.

    'killed', 'survived', 'timeout', or 'invalid' when `module` (the module under test) does not
    import: a mutant that is not a program kills nothing.
    """
    # A watchdog armed at the fork (pytest's hang detector, when the runner runs under pytest)
    # is inherited without its thread: the child would wait forever to cancel it.
    faulthandler.cancel_dump_traceback_later()
    pid = os.fork()
    if pid == 0:  # the child: quiet, in the copy, importing the mutated package from it
        os._exit(_child(tree, tests, module))
    return _wait(pid, timeout)


def _child(tree: Path, tests: list[str], module: str | None) -> int:
    try:
        if not os.environ.get("RQF_MUTATE_VERBOSE"):  # set it to see the runs' output
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            sys.stdout = sys.stderr = os.fdopen(devnull, "w")  # a parent's capture, under pytest
        os.chdir(tree)
        sys.path.insert(0, str(tree))
        # Bytecode is cached in the copy (the tests and the unmutated modules compile once);
        # `_write` drops the mutated module's, whose stamp could not tell two mutants apart.
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        sys.dont_write_bytecode = False
        if module is not None:
            try:
                importlib.import_module(dotted(module))
            except (SyntaxError, ImportError):
                traceback.print_exc()
                return INVALID_EXIT
            except Exception:  # noqa: BLE001, S110  # raised by the mutant's code: the tests see it
                pass
        import pytest  # noqa: PLC0415

        args = ["-p", "no:cacheprovider", "-p", "no:xdist", "-x", "-q", "-o", "addopts="]
        return int(pytest.main([*args, "-o", "faulthandler_timeout=0", *tests]))
    except BaseException:  # noqa: BLE001  # a mutant that breaks collection is killed
        traceback.print_exc()
        return 1


def _wait(pid: int, timeout: float) -> str:
    """Wait for the run's end (its pidfd turns readable), up to `timeout` seconds."""
    pidfd = os.pidfd_open(pid)
    try:
        ended, _, _ = select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    if not ended:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return "timeout"
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return {0: "survived", INVALID_EXIT: "invalid"}.get(code, "killed")


def _preimport() -> None:
    """Import the third-party stack once, in the parent: every forked run starts warm."""
    # not hypothesis: it is a pytest plugin, and pytest must import it itself (assert rewriting)
    for name in ("pydantic", "requests", "tenacity", "yaml"):
        __import__(name)


def load_equivalent() -> dict[str, str]:
    out: dict[str, str] = {}
    if not EQUIVALENT.exists():
        return out
    for raw in EQUIVALENT.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, reason = line.partition(" -- ")
        if not reason.strip():
            sys.exit(f"scripts/mutate: {EQUIVALENT.name}: no reason given for {key!r}")
        out[key.strip()] = reason.strip()
    return out


def run_module(
    module: str,
    args: argparse.Namespace,
    mapping: dict[str, Any],
    tree: Path,
    results: dict[str, Any],
    used: dict[str, set[str]],
) -> dict[str, str]:
    """Run the module's pending mutants; raises SelfCheckFailed before any of them if need be."""
    stored = _stored(module, args, mapping, results)
    done: dict[str, str] = stored["mutants"]
    original = (tree / PACKAGE / module).read_text()
    mutants = mutants_of(module)
    pending = [
        m
        for m in mutants
        if m.key not in done or (args.retry_survivors and done[m.key] == "survived")
    ]
    print(f"== {module}: {len(mutants)} mutants ({len(mutants) - len(pending)} done before)")
    try:
        if pending and not stored.get("checked"):
            tests = args.tests or _union(tests_for(m, mapping["calls"], used) for m in mutants)
            self_check(module, original, tree, tests, args.timeout * 4)
            stored["checked"] = True
        for mutant in pending:
            status, stage, tests = _run_mutant(mutant, args, mapping, tree, used)
            done[mutant.key] = status
            if status in {"survived", "invalid"}:
                number = mutants.index(mutant) + 1
                print(
                    f"  [{number}/{len(mutants)}] {status.upper()} ({stage}, {len(tests)} tests) "
                    f"line {mutant.line}: {mutant.key}"
                )
            else:
                print({"killed": ".", "timeout": "t"}[status], end="", flush=True)
            _save(results, module)
    finally:
        _write(tree / PACKAGE / module, original)
        _save(results, module)
    print()
    keys = {m.key for m in mutants}
    return {k: v for k, v in done.items() if k in keys}


def _stored(
    module: str, args: argparse.Namespace, mapping: dict[str, Any], results: dict[str, Any]
) -> dict[str, Any]:
    """The module's stored results that still hold (same source, same runner), in `results`."""
    source_digest = _digest([module_path(module)])
    stored: dict[str, Any] = results.get(module, {})
    fresh = {"source": source_digest, "runner": RUNNER, "tests": mapping["digest"], "mutants": {}}
    if (stored.get("source"), stored.get("runner")) != (source_digest, RUNNER) or args.fresh:
        stored = fresh
    elif stored.get("tests") != mapping["digest"]:
        # New or changed tests can kill more, never fewer (a removed test is the one exception:
        # --fresh then): what was killed stays killed, survivors run again.
        kept = {k: s for k, s in stored["mutants"].items() if s in {"killed", "timeout"}}
        stored = {**fresh, "mutants": kept}
    results[module] = stored
    return stored


def _union(lists: Iterator[list[str]]) -> list[str]:
    return list(dict.fromkeys(t for tests in lists for t in tests))


def self_check(module: str, original: str, tree: Path, tests: list[str], timeout: float) -> None:
    """Before any mutant: the module, emitted unmutated, is the same program and passes its tests.

    Otherwise SelfCheckFailed, and the copy keeps the original.
    """
    check_round_trip(module, original)
    if not tests:
        return
    _write(tree / PACKAGE / module, emit(original))
    try:
        status = run_tests(tree, tests, timeout, module)
    finally:
        _write(tree / PACKAGE / module, original)
    if status != "survived":
        raise SelfCheckFailed(
            f"{module}: re-emitted unmutated, it does not pass its {len(tests)} tests ({status}; "
            f"RQF_MUTATE_VERBOSE=1 shows the run)"
        )


def _run_mutant(
    mutant: Mutant,
    args: argparse.Namespace,
    mapping: dict[str, Any],
    tree: Path,
    used: dict[str, set[str]],
) -> tuple[str, str, list[str]]:
    """(status, stage, tests): invalid when it does not compile or its module does not import."""
    source = mutated_source(mutant)
    tests = args.tests or tests_for(mutant, mapping["calls"], used)
    if not compiles(source, mutant.module):
        return "invalid", "compile", tests
    _write(tree / PACKAGE / mutant.module, source)
    status = run_tests(tree, tests, args.timeout, mutant.module) if tests else "survived"
    if status == "survived" and not args.no_fuzz:
        return run_tests(tree, list(FUZZ_TESTS), args.fuzz_timeout, mutant.module), "fuzz", tests
    return status, "import" if status == "invalid" else "quick", tests


def _write(path: Path, source: str) -> None:
    """Write a module's source in the copy and drop its bytecode (stamped to the second only)."""
    path.write_text(source)
    for cached in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        cached.unlink()


def _save(results: dict[str, Any], module: str) -> None:
    """Store `module`'s results, keeping what other runs (on other modules) stored meanwhile."""
    if results.get("_volatile"):
        return
    STATE.mkdir(exist_ok=True)
    with (STATE / "results.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = STATE / "results.json"
        merged = json.loads(path.read_text()) if path.exists() else {}
        merged[module] = results[module]
        tmp = STATE / "results.json.tmp"
        tmp.write_text(json.dumps(merged, indent=1, sort_keys=True))
        tmp.replace(path)


def report(outcomes: dict[str, dict[str, str]], min_score: float) -> int:
    """Print the table; 1 when a survivor is unexplained, a mutant invalid or a module too low."""
    equivalent = load_equivalent()
    columns = ("mutants", "killed", "equivalent", "other survivors", "invalid", "killed %")
    rows = [f"| module | {' | '.join(columns)} | of non-equivalent |", "| --- |" + " ---: |" * 7]
    failing = 0
    unexplained: list[str] = []
    invalid: list[str] = []
    for module, done in outcomes.items():
        bad = [k for k, s in done.items() if s == "invalid"]
        invalid += bad
        total = len(done) - len(bad)  # an invalid mutant is the runner's defect: not counted
        killed = sum(1 for s in done.values() if s in {"killed", "timeout"})
        eq = sum(1 for k, s in done.items() if s == "survived" and k in equivalent)
        other = [k for k, s in done.items() if s == "survived" and k not in equivalent]
        unexplained += other
        score = killed / max(1, total - eq)
        rows.append(
            f"| {module} | {total} | {killed} | {eq} | {len(other)} | {len(bad)} | "
            f"{100 * killed / max(1, total):.0f}% | {100 * score:.0f}% |"
        )
        failing += bool(other) or bool(bad) or score < min_score
    text = "\n".join(rows)
    print(text)
    if unexplained:
        print("\nSurvivors not on the equivalent list:")
        for key in unexplained:
            print(f"  {key}")
    if invalid:
        print("\nInvalid mutants (they do not compile or import: a defect of scripts/mutate.py):")
        for key in invalid:
            print(f"  {key}")
    stale = [
        k
        for done in outcomes.values()
        for k, s in done.items()
        if k in equivalent and s != "survived"
    ]
    if stale:
        print(f"\nOn the equivalent list but killed now (remove them from {EQUIVALENT.name}):")
        for key in stale:
            print(f"  {key}")
    current = {m.key for module in outcomes for m in mutants_of(module)}
    gone = [k for k in equivalent if k.split(" :: ")[0] in outcomes and k not in current]
    if gone:
        print(f"\nOn the equivalent list but no such mutant now (update {EQUIVALENT.name}):")
        for key in gone:
            print(f"  {key}")
    STATE.mkdir(exist_ok=True)
    (STATE / "report.md").write_text(text + "\n")
    return 1 if failing else 0


def _current(module: str, results: dict[str, Any]) -> dict[str, str]:
    """The stored results of `module` that this runner gave on its present source, else none."""
    stored = results.get(module, {})
    if (stored.get("source"), stored.get("runner")) != (_digest([module_path(module)]), RUNNER):
        print(f"({module}: no results of this runner on its present source)")
        return {}
    keys = {m.key for m in mutants_of(module)}
    return {k: s for k, s in stored.get("mutants", {}).items() if k in keys}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/mutate", description=__doc__.split("\n")[0])
    parser.add_argument("modules", nargs="*", help=f"core modules (under {PACKAGE}/); default all")
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument("--report", action="store_true", help="report the stored results only")
    parser.add_argument("--fresh", action="store_true", help="forget stored results")
    parser.add_argument("--retry-survivors", action="store_true", help="run stored survivors again")
    parser.add_argument("--remap", action="store_true", help="rebuild the function-to-test map")
    parser.add_argument("--no-fuzz", action="store_true", help="skip the fuzz stage for survivors")
    parser.add_argument("--timeout", type=float, default=60.0, help="per mutant, quick tests (s)")
    parser.add_argument("--fuzz-timeout", type=float, default=900.0, help="per mutant, fuzz (s)")
    parser.add_argument(
        "--tests",
        nargs="+",
        metavar="TEST",
        help="run these tests on every mutant instead of the mapped ones (results not kept)",
    )
    parser.add_argument("--min-score", type=float, default=0.9)
    parser.add_argument("--build-map", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.build_map:
        STATE.mkdir(exist_ok=True)
        (STATE / "map.json").write_text(json.dumps(build_map()))
        return 0
    modules = [m.removeprefix(f"{PACKAGE}/") for m in args.modules] or list(CORE)
    for module in modules:
        if not module_path(module).is_file():
            parser.error(f"no module {PACKAGE}/{module}")
    if args.list:
        for module in modules:
            for m in mutants_of(module):
                print(f"{m.line:4} {m.key}")
        return 0
    results_path = STATE / "results.json"
    results: dict[str, Any] = json.loads(results_path.read_text()) if results_path.exists() else {}
    if args.report:
        return report({m: _current(m, results) for m in modules}, args.min_score)
    if args.tests:  # an ad-hoc selection: its results are not the module's
        results = {"_volatile": True}
        mapping: dict[str, Any] = {"digest": "adhoc", "calls": {"": args.tests}}
    else:
        mapping = load_map(rebuild=args.remap)
    return run(modules, args, mapping, results)


def run(
    modules: list[str], args: argparse.Namespace, mapping: dict[str, Any], results: dict[str, Any]
) -> int:
    """Run `modules` in a private copy of the tree and report.

    A module the self-check refuses gets no figures, and the run fails.
    """
    used = _names_used()
    _preimport()
    outcomes = {}
    refused = []
    with tempfile.TemporaryDirectory(prefix="rqf-mutate-") as tmp:
        tree = _copy_tree(Path(tmp))
        # the runs must pass on the unmutated copy, or every mutant would count as killed
        sanity = sorted({t for ts in mapping["calls"].values() for t in ts})[:20]
        if run_tests(tree, sanity, args.timeout * 4) != "survived":
            sys.exit(
                "scripts/mutate: the selected tests fail on an unmutated copy (see "
                "RQF_MUTATE_VERBOSE=1 scripts/mutate ...)"
            )
        for module in modules:
            try:
                outcomes[module] = run_module(module, args, mapping, tree, results, used)
            except SelfCheckFailed as exc:
                print(f"\nscripts/mutate: no mutant run: {exc}")
                refused.append(module)
    code = report(outcomes, args.min_score)
    if refused:
        print(f"\nRefused by the self-check (nothing measured): {', '.join(refused)}")
    return 1 if refused else code


if __name__ == "__main__":
    sys.exit(main())
