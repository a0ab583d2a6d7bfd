"""Mutation testing of the core: a small ast-based runner of our own (scripts/mutate runs it).

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
3. Each mutant is written into a private copy of the repository (never the working tree), and a
   forked process runs `pytest -x` on the selected tests (with a timeout). Survivors then run the
   fuzz tests (`tests/test_fuzz_coordinator.py`, the CI volume) unless `--no-fuzz`.
4. Results are kept per module in `.mutate/results.json`: a module whose source changed starts
   again; after a change of the tests the killed stay killed and the survivors run again. An
   interrupted run resumes where it stopped, and runs on different modules may run side by side
   (saves merge under a lock). The copy keeps Python's bytecode cache; the mutated module's
   `.pyc` is dropped for each mutant (its stamp cannot tell two mutants of one second apart).
5. The report: per module, killed / total, the equivalent mutants (`tests/mutation/equivalent.txt`,
   reviewed, one line of reason each) and every other survivor. Exit status 1 when a survivor is
   not on the equivalent list or a module is under `--min-score` (killed / (total - equivalent)).
"""

from __future__ import annotations

import argparse
import ast
import copy
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "runner_queue_fallback"
CORE = (
    "coordinator.py",
    "sequence/dispatch.py",
    "sequence/startup.py",
    "sequence/queue.py",
    "sequence/cancellation.py",
    "sequence/execution.py",
    "sequence/quota.py",
    "sequence/preflight.py",
    "sequence/context.py",
    "observe.py",
    "guard.py",
    "parent.py",
    "cleanup.py",
    "github/retry.py",
    "timing.py",
)
FUZZ_TESTS = ("tests/test_fuzz_coordinator.py",)
#: The tests that exercise the core (the map is built from these): the lint, packaging,
#: simulator-only and stats tests never call it, and would only make the map slow to build. The
#: inputs and plan tests read `timing`'s limits (deadlines, candidates, the hosted job limit).
MAP_TESTS = (
    "tests/test_api_versions.py",
    "tests/test_cleanup.py",
    "tests/test_cli.py",
    "tests/test_coordinator.py",
    "tests/test_github_client.py",
    "tests/test_guard.py",
    "tests/test_input_rules.py",
    "tests/test_inputs.py",
    "tests/test_observe.py",
    "tests/test_older_server.py",
    "tests/test_plan.py",
    "tests/test_preflight.py",
    "tests/test_quota.py",
    "tests/test_request_id.py",
    "tests/test_regressions.py",
    "tests/test_report.py",
    "tests/test_rules.py",
    "tests/test_simulate.py",
    "tests/test_trust_boundaries.py",
)
STATE = ROOT / ".mutate"
EQUIVALENT = ROOT / "tests" / "mutation" / "equivalent.txt"
PRAGMA = "# no mutate"

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
                new = [self.visit(v) if isinstance(v, ast.AST) else v for v in old]
                setattr(node, field, [v for v in new if v is not None])
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
    source = module_path(mutant.module).read_text()
    sites = _Sites(source.splitlines(), target=mutant.index)
    tree = sites.visit(ast.parse(source))
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


# ------------------------------------------------------------------------- test mapping


def _digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(str(path.relative_to(ROOT)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _tests_digest() -> str:
    return _digest([*ROOT.glob("tests/**/*.py"), *ROOT.glob(f"{PACKAGE}/**/*.py")])


class _Recorder:
    """A pytest plugin that records, per test, the package functions it called."""

    def __init__(self) -> None:
        self.current: str | None = None
        self.calls: dict[str, set[str]] = {}
        self.durations: dict[str, float] = {}
        self.package = str(ROOT / PACKAGE) + os.sep

    def profile(self, frame: FrameType, event: str, _arg: object) -> None:
        if event == "call" and self.current is not None:
            filename = frame.f_code.co_filename
            if filename.startswith(self.package):
                name = f"{filename[len(self.package) :]}:{frame.f_code.co_qualname}"
                self.calls.setdefault(name, set()).add(self.current)

    def pytest_runtest_setup(self, item: Any) -> None:
        self.current = item.nodeid

    def pytest_runtest_teardown(self, item: Any) -> None:
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
    """For each package function (module:qualname), the names and attributes it reads."""
    used: dict[str, set[str]] = {}
    for path in (ROOT / PACKAGE).rglob("*.py"):
        rel = str(path.relative_to(ROOT / PACKAGE))
        tree = ast.parse(path.read_text())
        for qual, fn in _functions(tree):
            names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute)}
            used[f"{rel}:{qual}"] = names
    return used


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


def run_tests(tree: Path, tests: list[str], timeout: float) -> str:
    """Run pytest -x on `tests` in `tree`, in a forked process: 'killed', 'survived' or 'timeout'."""
    pid = os.fork()
    if pid == 0:  # the child: quiet, in the copy, importing the mutated package from it
        try:
            if not os.environ.get("RQF_MUTATE_VERBOSE"):  # set it to see the runs' output
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
            os.chdir(tree)
            sys.path.insert(0, str(tree))
            # Bytecode is cached in the copy (the tests and the unmutated modules compile once);
            # `_write` drops the mutated module's, whose stamp could not tell two mutants apart.
            os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
            sys.dont_write_bytecode = False
            import pytest  # noqa: PLC0415

            args = ["-p", "no:cacheprovider", "-p", "no:xdist", "-x", "-q", "-o", "addopts="]
            code = pytest.main([*args, "-o", "faulthandler_timeout=0", *tests])
        except BaseException:  # noqa: BLE001  # a mutant that breaks collection is killed
            traceback.print_exc()
            code = 1
        os._exit(int(code))
    start = time.monotonic()
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return "survived" if code == 0 else "killed"
        if time.monotonic() - start > timeout:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(0.05)


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
    source_digest = _digest([module_path(module)])
    stored = results.get(module, {})
    if stored.get("source") != source_digest or args.fresh:
        stored = {"source": source_digest, "tests": mapping["digest"], "mutants": {}}
    elif stored.get("tests") != mapping["digest"]:
        # New or changed tests can kill more, never fewer (a removed test is the one exception:
        # --fresh then): what was killed stays killed, survivors run again.
        kept = {k: s for k, s in stored["mutants"].items() if s != "survived"}
        stored = {"source": source_digest, "tests": mapping["digest"], "mutants": kept}
    results[module] = stored
    done: dict[str, str] = stored["mutants"]
    original = (tree / PACKAGE / module).read_text()
    mutants = mutants_of(module)
    print(
        f"== {module}: {len(mutants)} mutants ({sum(1 for m in mutants if m.key in done)} done before)"
    )
    try:
        for number, mutant in enumerate(mutants, start=1):
            if mutant.key in done and not (args.retry_survivors and done[mutant.key] == "survived"):
                continue
            _write(tree / PACKAGE / module, mutated_source(mutant))
            tests = args.tests or tests_for(mutant, mapping["calls"], used)
            status = run_tests(tree, tests, args.timeout) if tests else "survived"
            stage = "quick"
            if status == "survived" and not args.no_fuzz:
                stage = "fuzz"
                status = run_tests(tree, list(FUZZ_TESTS), args.fuzz_timeout)
            done[mutant.key] = status
            mark = {"killed": ".", "timeout": "t", "survived": "S"}[status]
            if status == "survived":
                print(
                    f"  [{number}/{len(mutants)}] SURVIVED ({stage}, {len(tests)} tests) "
                    f"line {mutant.line}: {mutant.key}"
                )
            else:
                print(mark, end="", flush=True)
            _save(results, module)
    finally:
        _write(tree / PACKAGE / module, original)
        _save(results, module)
    print()
    keys = {m.key for m in mutants}
    return {k: v for k, v in done.items() if k in keys}


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
    equivalent = load_equivalent()
    rows = [
        "| module | mutants | killed | equivalent | other survivors | killed % | of non-equivalent |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    failing = 0
    unexplained: list[str] = []
    for module, done in outcomes.items():
        total = len(done)
        killed = sum(1 for s in done.values() if s in {"killed", "timeout"})
        eq = sum(1 for k, s in done.items() if s == "survived" and k in equivalent)
        other = [k for k, s in done.items() if s == "survived" and k not in equivalent]
        unexplained += other
        score = killed / max(1, total - eq)
        rows.append(
            f"| {module} | {total} | {killed} | {eq} | {len(other)} | "
            f"{100 * killed / max(1, total):.0f}% | {100 * score:.0f}% |"
        )
        failing += bool(other) or score < min_score
    text = "\n".join(rows)
    print(text)
    if unexplained:
        print("\nSurvivors not on the equivalent list:")
        for key in unexplained:
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
    (STATE / "report.md").write_text(text + "\n")
    return 1 if failing else 0


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
        return report(
            {
                m: {
                    k: s
                    for k, s in results.get(m, {}).get("mutants", {}).items()
                    if k in {x.key for x in mutants_of(m)}
                }
                for m in modules
            },
            args.min_score,
        )
    if args.tests:  # an ad-hoc selection: its results are not the module's
        results = {"_volatile": True}
        mapping: dict[str, Any] = {"digest": "adhoc", "calls": {"": args.tests}}
    else:
        mapping = load_map(rebuild=args.remap)
    used = _names_used()
    _preimport()
    outcomes = {}
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
            outcomes[module] = run_module(module, args, mapping, tree, results, used)
    return report(outcomes, args.min_score)


if __name__ == "__main__":
    sys.exit(main())
