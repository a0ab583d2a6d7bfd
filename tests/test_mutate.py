"""scripts/mutate.py changes only what it says (issue 35).

The runner is held to its own rules: the module it re-emits unmutated is the same program, a
mutant no test can see survives, a mutant that is not a program is invalid (never killed), and a
module whose round trip differs is refused before any mutant runs. The runs are real (a forked
pytest on a tiny package in a temporary tree), driven through the runner's own functions.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import pytest

from tests.script_files import load_file

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "mutate.py"


mutate = load_file(SCRIPT, "rqf_mutate_runner")

# Every form the runner once mangled or could: keyword-only parameters with and without
# defaults (`None` in kw_defaults), `**` in a dict display (`None` in keys), decorators,
# f-strings with conversions, `=` and nested specs, and `match` with every kind of pattern.
SAMPLE = """
import functools


def cached(fn):
    return functools.cache(fn)


@cached
def poll(self, *, limit, grace=5.0, **rest):
    return {**rest, "limit": limit, "grace": grace * 2}


@functools.wraps(poll)
def wrapper(a, /, b=1, *args, c, d=None, e, **kw):
    return f"{a!r:>10} {b + 1} {c=} {d:{e}}"


async def later(*, until, every=1):
    return [x async for x in until if x % every == 0]


class Reader:
    @staticmethod
    def read(*, at=0, until):
        match at:
            case 0 | 1 if until > 2:
                return -1
            case [x, *rest]:
                return x + len(rest)
            case {"k": v, **others}:
                return v or others
            case Reader(at=0, until=u):
                return u
            case None:
                return not until
            case _:
                return at < until <= 3 and until is not None

    pick = staticmethod(lambda *, q, r=2: q - r)
"""

LIMITS = """def over(value, *, limit, strict=False):
    if strict:
        return value > limit
    return value >= limit  # the boundary counts
"""

LIMITS_TEST = """from tinypkg.limits import over


def test_the_boundary_counts():
    assert over(3, limit=3)
    assert not over(2, limit=3)
"""

# A test that reads the module's text: the runner's unparse drops the comment, so the module as
# re-emitted fails it while its AST is the original's.
READS_SOURCE_TEST = """from pathlib import Path

import tinypkg.limits


def test_the_comment_is_there():
    assert "# the boundary counts" in Path(tinypkg.limits.__file__).read_text()
"""


def _pytest_config() -> str:
    """The repository's own pytest settings (warnings are errors, the hang detector, ...)."""
    text = (SCRIPT.parent.parent / "pyproject.toml").read_text()
    section = text.split("[tool.pytest.ini_options]", 1)[1].split("\n[", 1)[0]
    return f"[tool.pytest.ini_options]{section}\n"


#: The tiny tree runs under the repository's pytest settings, as the copy of the repository does.
PYTEST_CONFIG = _pytest_config()

STRICT = "limits.py :: over :: compare :: value > limit => value >= limit"
BOUNDARY = "limits.py :: over :: compare :: value >= limit => value > limit"
DEFAULT = "limits.py :: over :: boolean :: False => True"


def _old_generic_visit(self, node):
    """The runner's first generic_visit: it dropped every `None` of a list field."""
    for field, old in ast.iter_fields(node):
        if isinstance(old, list) and old and isinstance(old[0], ast.stmt):
            setattr(node, field, self._body(old))
        elif isinstance(old, list):
            new = [self.visit(v) if isinstance(v, ast.AST) else v for v in old]
            setattr(node, field, [v for v in new if v is not None])
        elif isinstance(old, ast.AST):
            setattr(node, field, self.visit(old))
    return node


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A repository of one package (`tinypkg`, module `limits.py`) and one test, and its copy."""

    def build(test_source: str = LIMITS_TEST) -> Path:
        root = tmp_path / "root"
        (root / "tinypkg").mkdir(parents=True)
        (root / "pyproject.toml").write_text(PYTEST_CONFIG)
        (root / "tinypkg" / "__init__.py").write_text("")
        (root / "tinypkg" / "limits.py").write_text(LIMITS)
        (root / "tiny_tests").mkdir()
        (root / "tiny_tests" / "test_limits.py").write_text(test_source)
        monkeypatch.setattr(mutate, "ROOT", root)
        monkeypatch.setattr(mutate, "PACKAGE", "tinypkg")
        monkeypatch.setattr(mutate, "STATE", root / ".mutate")
        monkeypatch.setattr(mutate, "EQUIVALENT", root / "equivalent.txt")
        # a verbose child would write into this worker's own stdout
        monkeypatch.delenv("RQF_MUTATE_VERBOSE", raising=False)
        copy: Path = mutate._copy_tree(tmp_path / "copy")
        return copy

    return build


DEEP_TEST = """from tinypkg.limits import over


def test_deep_input_overflows_the_stack():
    def down(depth):
        return down(depth + 1)

    try:
        down(0)
    except RecursionError:
        pass
    assert over(3, limit=3)
"""


def _args() -> argparse.Namespace:
    return argparse.Namespace(
        fresh=False,
        retry_survivors=False,
        tests=None,
        no_fuzz=True,
        timeout=60.0,
        fuzz_timeout=60.0,
        min_score=0.9,
    )


def _mapping(test: str = "test_the_boundary_counts") -> dict[str, object]:
    return {"digest": "tiny", "calls": {"limits.py:over": [f"tiny_tests/test_limits.py::{test}"]}}


def _run_module(tree: Path, results: dict[str, object] | None = None, **mapping: str):
    results = {"_volatile": True} if results is None else results
    used = mutate._names_used()
    return mutate.run_module("limits.py", _args(), _mapping(**mapping), tree, results, used)


def test_a_module_with_keyword_only_parameters_decorators_fstrings_and_match_round_trips():
    emitted = mutate.emit(SAMPLE)
    assert ast.dump(ast.parse(emitted)) == ast.dump(ast.parse(SAMPLE))
    mutate.check_round_trip("sample.py", SAMPLE)


def test_every_mutant_of_such_a_module_compiles():
    sites = mutate._Sites(SAMPLE.splitlines())
    sites.visit(ast.parse(SAMPLE))
    assert len(sites.found) > 20
    for index, *_ in sites.found:
        assert mutate.compiles(mutate.emit(SAMPLE, index), "sample.py"), sites.found[index]


@pytest.mark.parametrize("module", mutate.CORE)
def test_every_core_module_round_trips(module):
    mutate.check_round_trip(module, mutate.module_path(module).read_text())


def test_every_module_of_the_sequence_is_measured_the_older_server_search_included():
    sequence = mutate.module_path("action/sequence")
    modules = {
        f"action/sequence/{p.name}" for p in sequence.glob("*.py") if p.name != "__init__.py"
    }
    assert "action/sequence/run_name.py" in modules
    assert modules <= set(mutate.CORE)


def test_a_mutant_no_test_sees_survives_and_the_others_are_killed(tiny):
    outcome = _run_module(tiny())
    assert outcome == {STRICT: "survived", BOUNDARY: "killed", DEFAULT: "killed"}


def test_an_invalid_mutant_is_not_counted_as_killed(tiny, monkeypatch, capsys):
    real = mutate.mutated_source

    def broken(mutant):
        if mutant.key == DEFAULT:  # no Python at all
            return "def over(:\n"
        if mutant.key == STRICT:  # compiles, and its module does not import
            return real(mutant) + "from tinypkg import missing_name\n"
        return real(mutant)

    monkeypatch.setattr(mutate, "mutated_source", broken)
    outcome = _run_module(tiny())
    assert outcome == {DEFAULT: "invalid", STRICT: "invalid", BOUNDARY: "killed"}
    capsys.readouterr()
    assert mutate.report({"limits.py": outcome}, 0.9) == 1
    out = capsys.readouterr().out
    assert "| limits.py | 1 | 1 | 0 | 0 | 2 | 100% | 100% |" in out
    assert "Invalid mutants" in out
    assert DEFAULT in out
    assert STRICT in out


def test_the_self_check_refuses_a_module_whose_round_trip_differs(tiny, monkeypatch, capsys):
    tree = tiny()
    monkeypatch.setattr(mutate._Sites, "generic_visit", _old_generic_visit)
    with pytest.raises(
        mutate.SelfCheckFailed, match=r"not the same program .* at line 1: 'def over\("
    ):
        mutate.check_round_trip("limits.py", LIMITS)
    results: dict[str, object] = {"_volatile": True}
    with pytest.raises(mutate.SelfCheckFailed):
        _run_module(tree, results)
    assert results["limits.py"]["mutants"] == {}  # type: ignore[index]  # the runner's own dict
    assert (tree / "tinypkg" / "limits.py").read_text() == LIMITS
    capsys.readouterr()
    assert mutate.run(["limits.py"], _args(), _mapping(), {"_volatile": True}) == 1
    assert "Refused by the self-check (nothing measured): limits.py" in capsys.readouterr().out


def test_the_self_check_refuses_a_module_that_fails_its_tests_once_re_emitted(tiny):
    results: dict[str, object] = {"_volatile": True}
    with pytest.raises(mutate.SelfCheckFailed, match="does not pass its 1 tests"):
        _run_module(tiny(READS_SOURCE_TEST), results, test="test_the_comment_is_there")
    assert results["limits.py"]["mutants"] == {}  # type: ignore[index]  # the runner's own dict


def test_a_test_that_overflows_the_stack_does_not_hide_the_later_tests_from_the_map(
    tiny, monkeypatch
):
    """Python drops a profile hook that raises: the map must not lose every later test."""
    tiny()
    root = mutate.ROOT
    (root / "tiny_tests" / "test_a_deep.py").write_text(DEEP_TEST)
    first, later = "tiny_tests/test_a_deep.py", "tiny_tests/test_limits.py"
    monkeypatch.setattr(mutate, "MAP_TESTS", (first, later))
    monkeypatch.chdir(root)  # build_map runs in the repository, its package importable
    monkeypatch.syspath_prepend(str(root))
    try:
        calls = mutate.build_map()["calls"]
    finally:  # the forked runs of other tests import their own tinypkg
        for name in [
            n for n in sys.modules if n.startswith(("tinypkg", "test_a_deep", "test_lim"))
        ]:
            del sys.modules[name]
    assert f"{later}::test_the_boundary_counts" in calls["limits.py:over"]


def test_every_test_file_is_either_mapped_or_left_out_of_the_map_on_purpose():
    """A file of rule tests missing from MAP_TESTS is never run on a mutant: its rules look unheld
    (tests/test_startup_rules.py was, until issue 35's figures were measured)."""
    files = sorted(str(p.relative_to(mutate.ROOT)) for p in mutate.ROOT.glob("tests/test_*.py"))
    listed = [*mutate.MAP_TESTS, *mutate.UNMAPPED_TESTS]
    assert sorted(listed) == files
    assert len(set(listed)) == len(listed), "a file is in both lists"


def test_a_constant_runs_the_tests_of_the_readers_of_a_constant_defined_from_it():
    """`POST_STEP_LIMIT_SECONDS = POST_STEP_GRACE_SECONDS - 60`: only the limit is read by a
    function, and a mutant of the grace must still run that function's tests."""
    used = mutate._names_used()
    readers = [f for f, names in used.items() if "POST_STEP_LIMIT_SECONDS" in names]
    assert readers
    calls = {f: [f"test of {f}"] for f in readers}
    grace = [
        m
        for m in mutate.mutants_of("core/timing.py")
        if m.function == "<module>.POST_STEP_GRACE_SECONDS" and m.kind == "constant"
    ]
    assert grace
    assert set(mutate.tests_for(grace[0], calls, used)) == {f"test of {f}" for f in readers}
