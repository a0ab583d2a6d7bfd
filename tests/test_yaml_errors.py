"""A YAML file that does not parse: the file, line and column, what was expected, and a real fix.

Issue 48 item 3. Before, `lint` printed PyYAML's own text: several lines shown as a literal `\\n`,
`<unicode string>` for the file, and the fix "fix the YAML syntax". Each case runs under both
loaders PyYAML has (libyaml's words differ from the Python loader's).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
import yaml

from runner_queue_fallback import cli
from runner_queue_fallback.core.yaml_errors import explain
from runner_queue_fallback.tools.simulate.scenarios import CatalogueError, load_entry
from runner_queue_fallback.workflow import model

LOADERS = [
    pytest.param(yaml.SafeLoader, id="python"),
    pytest.param(getattr(yaml, "CSafeLoader", yaml.SafeLoader), id="libyaml"),
]

#: (id, text, line and column where the parser stopped, what it says, what its fix says)
MISTAKES = [
    (
        "unclosed-list",
        "on: push\njobs: [build, test\n  lint: x\n",
        (3, 7),
        "expected ',' or ']' in the list that '[' opens at line 2, column 7",
        "check the brackets and commas on lines 2 to 3",
    ),
    (
        "unclosed-mapping",
        "on: push\nenv: {A: 1, B: 2\nc: d\n",
        (3, 2),
        "expected ',' or '}' in the mapping that '{' opens at line 2, column 6",
        "close the mapping with '}'",
    ),
    (
        "colon-in-value",
        "on: push\nname: build: all\n",
        (2, 12),
        "a ': ' where no new key can start",
        "on line 2, quote a value that holds ': '",
    ),
    (
        "tab",
        "on: push\njobs:\n\tbuild: x\n",
        (3, 1),
        "a tab, which YAML does not allow for indentation",
        "indent line 3 with spaces",
    ),
    (
        "key-out-of-line",
        "on: push\njobs:\n  build:\n    runs-on: x\n   steps: y\n",
        (5, 4),
        "expected a key of the mapping that starts at line 3, column 3",
        "indent line 5 like the keys of that mapping (column 3)",
    ),
    (
        "unclosed-quote",
        "on: push\nname: 'build\njobs: x\n",
        (4, 1),
        "the quote opened at line 2, column 7 is not closed",
        "close the quote opened on line 2",
    ),
    (
        "unknown-escape",
        'on: push\nname: "C:\\path"\n',
        (2, None),
        "a backslash escape that double quotes do not know",
        "write the backslash twice",
    ),
    (
        "reserved-first-character",
        "on: push\nname: @team build\n",
        (2, 7),
        "a plain value cannot start with '@'",
        "quote the value on line 2",
    ),
    (
        "undefined-alias",
        "on: push\nname: *nightly\n",
        (2, 7),
        "no anchor (&name) of that name comes before it",
        "quote the value on line 2 if the '*' is text",
    ),
    (
        "text-after-a-quote",
        "on: push\nname: 'build' all\n",
        (2, 15),
        "text after the closing quote of a value",
        "quote the whole value on line 2",
    ),
    (
        "key-inside-a-list",
        "on: push\nsteps:\n  - run: a\n  name: b\n",
        (4, 3),
        "expected an item ('- ') of the list that starts at line 3, column 3",
        "start each item of that list with '- ' at column 3",
    ),
    (
        "two-documents",
        "on: push\n---\njobs: {}\n",
        (2, 1),
        "a second document starts here",
        "remove the '---' on line 2",
    ),
    (
        "closer-of-nothing",
        "on: push\njobs: [build, test]]\n",
        (2, 20),
        "a ']' that closes no '['",
        "remove the extra ']' on line 2",
    ),
    (
        "tab-in-a-block-text",
        "on: push\nrun: |\n  make\n\tmake test\n",
        (4, 1),
        "a tab, which YAML does not allow for indentation",
        "indent line 4 with spaces",
    ),
    (
        "any-other-error",
        "on: push\nname: [\n",
        (3, 1),
        "node content",
        "look at line 3 and the lines just above it",
    ),
    (
        "control-character",
        "on: push\nname: a\x07b\n",
        (2, 8),
        "the character U+0007, which YAML does not allow",
        'write it as the escape "\\x07" between double quotes',
    ),
]


def _error(text: str, loader: type[yaml.SafeLoader]) -> yaml.YAMLError:
    with pytest.raises(yaml.YAMLError) as raised:
        yaml.compose(text, Loader=loader)
    return raised.value


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize(
    ("text", "where", "what", "fix"), [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES]
)
def test_a_yaml_mistake_is_said_in_one_line_with_a_fix_naming_its_lines(
    loader: type[yaml.SafeLoader], text: str, where: tuple[int, int | None], what: str, fix: str
):
    """Where the parser stopped, what it expected there, and what to change on which line."""
    problem = explain(_error(text, loader), text)
    line, column = where
    assert problem.line == line
    if column is not None:  # libyaml stops one character earlier in an escape
        assert problem.column == column
    assert what in problem.what
    assert fix in problem.fix
    assert problem.message.startswith(f"not valid YAML at line {line}, column {problem.column}: ")
    for said in (problem.message, problem.fix):
        assert "\n" not in said
        assert "<unicode string>" not in said


def _lint(path: Path) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["lint", str(path)], {})
    return code, out.getvalue()


@pytest.mark.parametrize("loader", LOADERS)
def test_lint_names_the_file_line_and_column_and_what_the_parser_expected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loader: type[yaml.SafeLoader]
):
    """The issue's example: an unclosed `[` on line 2 of mine/bad.yml.

    Before: `RQF000 error: not valid YAML (while parsing a flow sequence\\n  in "<unicode
    string>", line 2, column 5\\ndid not find expected ',' or ']'...) (fix: fix the YAML syntax)`.
    """
    monkeypatch.setattr(model, "_LOADER", loader)
    bad = tmp_path / "mine" / "bad.yml"
    bad.parent.mkdir()
    bad.write_text("on: push\njobs: [build, test\n  lint: x\n")
    code, out = _lint(bad)
    assert code == 1, out
    [finding] = [line for line in out.splitlines() if "RQF000" in line]
    assert finding == (
        f"{bad}:3: RQF000 error: not valid YAML at line 3, column 7: expected ',' or ']' in the "
        "list that '[' opens at line 2, column 7 (fix: check the brackets and commas on lines 2 "
        "to 3: close the list with ']' and separate its items with ', ', or quote the value if it "
        "is text that starts with '[')"
    )


def test_a_scenario_file_that_does_not_parse_is_named_with_its_line_and_column(tmp_path: Path):
    """`simulate`'s catalogue: a scenario file's YAML error is one line, with its file and a fix."""
    broken = tmp_path / "mine.yaml"
    broken.write_text("description: x\nworld:\n  pools: [{group: a}\ninputs: {}\n")
    with pytest.raises(CatalogueError) as raised:
        load_entry(broken)
    said = str(raised.value)
    assert said.startswith("mine.yaml: not valid YAML at line 4, column 1: expected ',' or ']'")
    assert "(fix: check the brackets and commas on lines 3 to 4" in said
    assert "\n" not in said
    assert "<unicode string>" not in said
