"""Rules of the design that a grep can prove: time only through the Clock, and module boundaries."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from runner_queue_fallback.cli import SUBCOMMANDS

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "runner_queue_fallback"
MODULES = sorted(PACKAGE.rglob("*.py"))
#: The product's Python outside the package: the bench, the scripts and the guard's own helper.
OTHERS = sorted(
    [
        *(ROOT / "bench").glob("*.py"),
        *(ROOT / "scripts").glob("*.py"),
        *(ROOT / "guard").glob("*.py"),
    ]
)
REAL_TIME = {
    ("time", "sleep"),
    ("time", "monotonic"),
    ("time", "time"),
    ("datetime", "now"),
    ("datetime", "utcnow"),
}


def _calls(path: Path) -> set[tuple[str, str]]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            found.add((node.value.id, node.attr))
    return found


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_clock_touches_real_time(path: Path):
    """Nothing but core/clock.py calls time.sleep, time.monotonic, time.time or datetime.now."""
    if path.relative_to(PACKAGE) == Path("core/clock.py"):
        return
    assert not (_calls(path) & REAL_TIME), f"{path.name} reads or waits on real time"


#: The modules that build a real clock: the composition root, for every subcommand; `simulate`,
#: only to time its own run (its steps run on virtual time).
REAL_CLOCK_BUILDERS = {"cli.py", "tools/simulate/run.py"}


def _names(path: Path) -> set[str]:
    return {node.id for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Name)}


def test_only_the_composition_root_reads_the_environment_and_builds_the_real_clock():
    """docs/architecture.md: only `cli.py` reads os.environ; a SystemClock is used where it says."""
    environ = {str(p.relative_to(PACKAGE)) for p in MODULES if ("os", "environ") in _calls(p)}
    assert environ == {"cli.py"}
    clocks = {str(p.relative_to(PACKAGE)) for p in MODULES if "SystemClock" in _names(p)}
    assert clocks == REAL_CLOCK_BUILDERS


@pytest.mark.parametrize(
    "path", sorted((PACKAGE / "fake_github").glob("*.py")), ids=lambda p: p.name
)
def test_the_simulator_does_not_know_our_client(path: Path):
    """The fake describes GitHub, not our client's beliefs about GitHub."""
    forbidden = {"github", "observe", "coordinator", "sequence", "guard", "cleanup", "action"}
    assert not {
        m
        for m in _imports(path)
        if m.split(".")[-1] in forbidden or {"github", "action", "tools"} & set(m.split(".")[1:])
    }


SEQUENCE = [
    "action/coordinator.py",
    "action/guard.py",
    "action/cleanup.py",
    "action/post_step.py",
] + [str(p.relative_to(PACKAGE)) for p in sorted((PACKAGE / "action" / "sequence").glob("*.py"))]


@pytest.mark.parametrize("name", SEQUENCE)
def test_the_sequence_does_not_import_the_simulator(name: str):
    path = PACKAGE / name
    assert path.exists()
    assert not {m for m in _imports(path) if m.split(".")[1:2] == ["fake_github"]}


@pytest.mark.parametrize(
    "name",
    [
        "core/inputs.py",
        "core/overrides.py",
        "core/profiles.py",
        "action/observe.py",
        "workflow/plan.py",
    ],
)
def test_pure_modules_do_no_io(name: str):
    """inputs, profiles, plan and observe import nothing that talks to the network or the OS env."""
    path = PACKAGE / name
    assert path.exists()
    assert not (_imports(path) & {"requests", "os", "subprocess", "socket"})


# --------------------------------------------------------------------------- import graph


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULE_NAMES = {_module_name(path): path for path in [*MODULES, *OTHERS]}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import that can run: at module level or inside a function, not under TYPE_CHECKING."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            found.extend(_runtime_imports(ast.Module(body=node.orelse, type_ignores=[])))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        else:
            found.extend(_runtime_imports(node))
    return found


def _package_imports(name: str) -> set[str]:
    """The package's modules that importing `name` imports (the module itself, not its parents)."""
    targets: set[str] = set()
    for node in _runtime_imports(ast.parse(MODULE_NAMES[name].read_text())):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif node.module and node.level == 0:
            for alias in node.names:  # `from pkg import module` imports pkg.module
                submodule = f"{node.module}.{alias.name}"
                targets.add(submodule if submodule in MODULE_NAMES else node.module)
    return targets & MODULE_NAMES.keys() - {name}


def _import_graph() -> dict[str, set[str]]:
    """Module -> the modules it imports, plus the subcommands the composition root loads by name."""
    graph = {name: _package_imports(name) for name in MODULE_NAMES}
    graph["runner_queue_fallback.cli"] |= {sub.module for sub in SUBCOMMANDS.values()}
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph[node])
    return seen


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each group of modules that reach one another through their imports, sorted."""
    reach = {node: _reachable(graph, node) for node in graph}
    groups = {
        frozenset(other for other in reach[node] if node in reach[other])
        for node in graph
        if node in reach[node]
    }
    return sorted(sorted(group) for group in groups)


def test_the_package_the_bench_and_the_scripts_have_no_import_cycle():
    """No module imports, directly or through others, a module that imports it back.

    Lazy imports inside functions count (they only move the circle to run time), and so do the
    subcommands `cli` loads by module path; imports under TYPE_CHECKING never run and do not count.
    A package's `__init__` re-exporting its submodules is not a cycle: importing `pkg.module`
    counts as importing that module only.
    """
    cycles = _cycles(_import_graph())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_the_import_graph_sees_lazy_imports_and_the_subcommand_table():
    graph = _import_graph()
    assert "runner_queue_fallback.commands.coordinate" in graph["runner_queue_fallback.cli"]
    assert "bench.sweep" in graph["bench.run"]  # `--load-sweep`, imported inside a function
    assert (
        "runner_queue_fallback.action.coordinator"
        in graph["runner_queue_fallback.commands.coordinate"]
    )
    assert (
        "runner_queue_fallback.tools.simulate.steps"
        in graph["runner_queue_fallback.tools.simulate.run"]
    )


# ------------------------------------------------------------------- what a subcommand loads

#: Run `cli.main(argv)` in a fresh interpreter; print every module it left loaded.
_PROBE = """
import contextlib, io, json, sys
from runner_queue_fallback.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(json.loads(sys.argv[1]), {})
print(json.dumps(sorted(sys.modules)))
"""
#: What `--help` may load from the package: the root, the subcommand table's context, errors.
HELP_MODULES = {
    "runner_queue_fallback",
    "runner_queue_fallback.cli",
    "runner_queue_fallback.core.clock",
    "runner_queue_fallback.commands",
    "runner_queue_fallback.commands.flags",  # `coordinate --help`: its one flag, --token-env
    "runner_queue_fallback.core",
    "runner_queue_fallback.core.errors",
    "runner_queue_fallback.core.hand_off",  # `cleanup --help`: the state it reads
    "runner_queue_fallback.core.input_names",
    "runner_queue_fallback.core.input_table",  # the names, read from the tables
    "runner_queue_fallback.core.actions_io",
}
#: Libraries that take tens of milliseconds to import, and the profiles' TOML reader.
HEAVY = {"pydantic", "requests", "urllib3", "tenacity", "yaml", "tomllib", "jwt", "cryptography"}
#: Only the composition root's `simulate`, the bench and the tests load these.
SIMULATOR_AND_LINT = {
    "runner_queue_fallback.fake_github",
    "runner_queue_fallback.tools.simulate.run",
    "runner_queue_fallback.tools.simulate.steps",
    "runner_queue_fallback.tools.simulate.scenarios",
    "runner_queue_fallback.tools.lint",
    "runner_queue_fallback.workflow",
    "yaml",
}


def _loaded(argv: list[str]) -> set[str]:
    done = subprocess.run(  # noqa: S603  # this interpreter, a fixed probe, JSON arguments
        [sys.executable, "-c", _PROBE, json.dumps(argv)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def _top(modules: set[str], prefixes: set[str]) -> set[str]:
    return {m for m in modules if any(m == p or m.startswith(f"{p}.") for p in prefixes)}


@pytest.mark.parametrize(
    "argv", [["--help"], ["coordinate", "--help"], ["guard", "--help"], ["cleanup", "--help"]]
)
def test_help_loads_almost_nothing(argv: list[str]):
    """`--help` of the action's steps loads no subcommand, no pydantic, requests or simulator."""
    loaded = _loaded(argv)
    assert {m for m in loaded if m.startswith("runner_queue_fallback")} <= HELP_MODULES
    assert not _top(loaded, HEAVY)


#: The coordinator checks its child file with the child rules before the first dispatch, and its
#: own job's timeout with `plan`'s arithmetic: both read the workflow file (`workflow/`), never lint.
PREFLIGHT_NEEDS = {"runner_queue_fallback.workflow", "yaml"}


@pytest.mark.parametrize("command", ["coordinate", "guard", "cleanup"])
def test_the_action_steps_load_neither_the_simulator_nor_lint(command: str):
    """A step of the action (here stopped by missing inputs) loads only what it uses."""
    loaded = _loaded([command])
    assert f"runner_queue_fallback.commands.{command}" in loaded  # it really ran
    allowed = PREFLIGHT_NEEDS if command == "coordinate" else set()
    assert not _top(loaded, SIMULATOR_AND_LINT - allowed)
    others = {f"runner_queue_fallback.commands.{name}" for name in ("plan", "lint", "simulate")}
    assert not loaded & others
    if command != "coordinate":
        assert "runner_queue_fallback.action.coordinator" not in loaded
    # PyJWT and cryptography (0.1 s of imports) are loaded only to mint a GitHub App's token.
    assert not _top(loaded, {"jwt", "cryptography"})


# --------------------------------------------------------------------------------- the layout
# docs/architecture.md draws these places and the rules below; a change to one changes both.

#: The places of the package and the places each may import (besides itself).
PLACES: dict[str, set[str]] = {
    "core": set(),
    "github": {"core"},
    "fake_github": {"core"},
    "workflow": {"core"},
    "action": {"core", "github", "workflow"},
    "tools": {"core", "github", "fake_github", "workflow"},
    "commands": {"core", "github", "workflow", "action", "tools"},
    "cli": {"core", "commands"},
}
#: The one rule past the places above: a tool that runs the action's own steps (`simulate` runs
#: them on the fake GitHub, `preflight` runs the coordinator's checks without a dispatch) may
#: import `action`; no other tool does, and `action` never imports a tool.
RUNS_THE_ACTION = ("runner_queue_fallback.tools.simulate", "runner_queue_fallback.tools.preflight")


def _may_import(module: str, target: str) -> bool:
    allowed = {_place(module), "root"} | PLACES[_place(module)]
    if module.startswith(RUNS_THE_ACTION):
        allowed.add("action")
    return _place(target) in allowed


def _place(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "root"


def test_each_place_imports_only_the_places_below_it():
    """The layering of docs/architecture.md: core at the bottom, cli at the top, no exception."""
    graph = _import_graph()
    wrong = sorted(
        (module, target)
        for module, targets in graph.items()
        if module.startswith("runner_queue_fallback.") and _place(module) in PLACES
        for target in targets
        if target.startswith("runner_queue_fallback.") and not _may_import(module, target)
    )
    assert not wrong, wrong


def test_the_layering_rule_refuses_an_upward_import():
    """The check above would catch each edge the layers once listed as exceptions."""
    assert not _may_import(
        "runner_queue_fallback.action.sequence.job_time", "runner_queue_fallback.tools.lint"
    )
    assert not _may_import(
        "runner_queue_fallback.core.inputs", "runner_queue_fallback.github.versions"
    )
    assert not _may_import(
        "runner_queue_fallback.tools.lint.coordinator", "runner_queue_fallback.action.outcome"
    )
    assert not _may_import(
        "runner_queue_fallback.tools.simulate.run", "runner_queue_fallback.commands"
    )
    assert _may_import(
        "runner_queue_fallback.tools.preflight", "runner_queue_fallback.action.observe"
    )
    assert _may_import(
        "runner_queue_fallback.tools.simulate.steps", "runner_queue_fallback.action.coordinator"
    )


def test_the_package_root_holds_only_the_composition_root():
    """Every concept lives in a named place; the root keeps the entry points only."""
    flat = {p.name for p in PACKAGE.glob("*.py")}
    assert flat == {"__init__.py", "__main__.py", "cli.py"}
    places = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert places == {"action", "commands", "core", "fake_github", "github", "tools", "workflow"}


def test_commands_holds_one_module_per_subcommand_named_after_it():
    """`commands/X.py` is the command line of `X` and nothing else; `flags` is their shared flags."""
    names = {p.stem for p in (PACKAGE / "commands").glob("*.py")} - {"__init__", "flags"}
    assert names == set(SUBCOMMANDS)
    for name, sub in SUBCOMMANDS.items():
        assert sub.module == f"runner_queue_fallback.commands.{name}"


@pytest.mark.parametrize("name", ["preflight", "simulate", "guard", "cleanup", "stats", "lint"])
def test_each_concept_has_one_home_beside_its_command_line(name: str):
    """Besides `commands/X.py`, one module or package in the tree is named after X."""
    homes = [
        p.relative_to(PACKAGE)
        for p in PACKAGE.rglob(f"{name}*")
        if p.stem == name and "commands" not in p.parts and "__pycache__" not in p.parts
    ]
    assert len(homes) == 1, homes


#: Product Python: the package, the guard's helper, the bench and the scripts (tests are exempt).
PRODUCT = [*MODULES, *OTHERS]
LONG = 400


@pytest.mark.parametrize("path", PRODUCT, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_long_module_says_why_in_its_docstring(path: Path):
    """A module past ~400 lines states in its docstring why it is one module."""
    lines = len(path.read_text().splitlines())
    if lines <= LONG:
        return
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    text = " ".join(doc.split())
    assert re.search(r"\bLong \([^)]+\) because\b", text), f"{lines} lines and no reason"
    assert not re.search(r"\d+ lines", text), "a reason, not a line count that goes stale"
    assert "splits it" not in doc, "a reason, not a promise"


#: Words that say how a file's tests were found, not what they hold (issue 45).
FOUND_BY_WORDS = (
    *("mutation", "mutant", "survivor", "hidden", "audit", "regression", "review"),
    *("trust_boundar", "odd_input", "found", "bug"),
)
#: How a test may have been found: `@pytest.mark.found_by(<how>, issue=N)`.
FOUND_BY = {"mutation", "fuzz", "review", "audit"}


def _found_by_marks(path: Path) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "found_by"
    ]


def test_a_test_file_is_named_after_what_it_holds_never_after_how_its_tests_were_found():
    """One file per module, phase or behaviour (docs/contributing.md, "Where a test goes"); how
    a test was found is its `found_by` marker, of a known kind, with an issue number if any."""
    tests = sorted((ROOT / "tests").glob("test_*.py"))
    named = [p.name for p in tests if any(word in p.stem for word in FOUND_BY_WORDS)]
    assert named == []
    marks = [(p.name, call) for p in tests for call in _found_by_marks(p)]
    assert marks, "the found_by markers were not seen"
    for name, call in marks:
        [how] = call.args
        assert isinstance(how, ast.Constant), name
        assert how.value in FOUND_BY, (name, how.value)
        for keyword in call.keywords:
            assert keyword.arg == "issue", (name, keyword.arg)
            assert isinstance(keyword.value, ast.Constant), name
            assert isinstance(keyword.value.value, int), name


# -- the phases of the sequence read the state; only the ledger writes it ------------------------

#: The shared state and the attempt ledger, as the phases name them (parameters and annotations).
_SHARED_TYPES = {"SequenceState", "Attempt"}
_SHARED_NAMES = {"seq", "attempt"}
#: Methods that change a list, a set or a dict in place.
_MUTATORS = {"append", "extend", "insert", "remove", "pop", "clear", "add", "update", "discard"}


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node


def shared_state_writes(source: str) -> list[str]:
    """Each assignment to (or in-place change of) a field of the shared state or of an attempt.

    The shared objects are the names `seq` and `attempt`, and any parameter annotated with
    `SequenceState` or `Attempt`.
    """
    tree = ast.parse(source)
    shared = set(_SHARED_NAMES)
    for arg in (node for node in ast.walk(tree) if isinstance(node, ast.arg)):
        named = set(re.findall(r"\w+", ast.unparse(arg.annotation))) if arg.annotation else set()
        if named & _SHARED_TYPES:
            shared.add(arg.arg)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt | ast.expr):
            continue
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = [t for target in node.targets for t in _unpacked(target)]
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MUTATORS
            and isinstance(node.func.value, ast.Attribute | ast.Subscript)
        ):
            targets = [node.func.value]
        for target in targets:
            root = _root(target)
            if target is not root and isinstance(root, ast.Name) and root.id in shared:
                found.append(f"line {node.lineno}: {ast.unparse(node).splitlines()[0]}")
    return found


def _unpacked(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, ast.Tuple | ast.List):
        return [t for item in target.elts for t in _unpacked(item)]
    return [target]


@pytest.mark.parametrize(
    "path", sorted((PACKAGE / "action" / "sequence").glob("*.py")), ids=lambda p: p.name
)
def test_no_phase_writes_the_shared_state_or_an_attempt(path: Path):
    """A phase yields or returns what it found; `action/ledger.py` alone applies it."""
    assert shared_state_writes(path.read_text()) == []


@pytest.mark.parametrize(
    "line",
    [
        "seq.active = None",
        "seq.result.admission_waited += 1.0",
        "attempt.queued_at, seq.last_queued_read = None, None",
        "attempt.requeued_from.append('r')",
        "def f(state: SequenceState):\n    state.commit = 'x'",
        "def f(a: Attempt | None):\n    a.ended_at: float = 1.0",
    ],
)
def test_the_shared_state_check_sees_every_kind_of_write(line: str):
    assert shared_state_writes(line)


def test_the_shared_state_check_lets_a_phase_keep_its_own_values():
    source = "def f(seq: SequenceState):\n    window = seq.clock.monotonic()\n    other.x = 1\n"
    assert shared_state_writes(source) == []


def _words() -> set[str]:
    from runner_queue_fallback.action.attempts import AttemptState  # noqa: PLC0415  # the words

    return {state.words() for state in AttemptState if state is not AttemptState.FINISHED}


def compared_outcomes(source: str) -> list[str]:
    """Each comparison of an `outcome` with a named value or with an attempt's words."""
    words = _words()

    def suspect(side: ast.expr) -> bool:
        if isinstance(side, ast.Name | ast.Attribute):
            return True  # a named phrase or set of phrases (`REFUSED`, `_IN_FLIGHT`)
        if isinstance(side, ast.Set | ast.List | ast.Tuple):
            return any(suspect(item) for item in side.elts)
        return isinstance(side, ast.Constant) and side.value in words

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            ours = [s for s in sides if isinstance(s, ast.Attribute) and s.attr == "outcome"]
            if ours and any(suspect(s) for s in sides if s not in ours):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("path", [*MODULES, *OTHERS], ids=lambda p: str(p.relative_to(ROOT)))
def test_no_code_compares_an_attempts_outcome_words(path: Path):
    """An attempt's state is compared as an `AttemptState`; its words are only for people."""
    assert compared_outcomes(path.read_text()) == []


@pytest.mark.parametrize(
    "line",
    [
        "attempt.outcome != REFUSED",
        "a.outcome in _IN_FLIGHT",
        "a.outcome == 'dispatch refused'",
        "a.outcome in {'queued', 'dispatched'}",
    ],
)
def test_the_outcome_check_sees_a_compared_phrase(line: str):
    assert compared_outcomes(line)
