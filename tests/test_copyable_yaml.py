"""Every YAML a user may copy passes `lint`: the README's, docs/*.md's and examples/.

Each `yaml` block of the README and of docs/*.md carries an HTML comment on the line before it
that says what it is:

    <!-- lint: pair=NAME coordinator -->     a coordinator workflow, linted with the child NAME
    <!-- lint: pair=NAME child -->           the child workflow of the pair NAME
    <!-- lint: fragment -->                  a part of a file (inputs, a `runs:` block): parsed only

`allow=RQF123,RQF456` on a coordinator's marker names the warnings the pair may show (none by
default); `file=NAME.yml` on either gives the file name when the other half does not name it (the
child's is the coordinator's `workflow:`, the coordinator's the guard's `coordinator-workflow`).
Passing means no error, and no warning the marker does not name. A block without a marker fails,
so a new block must say what it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from runner_queue_fallback.core.inputs import env_name, read_pool_settings
from runner_queue_fallback.core.profiles import load_profiles
from runner_queue_fallback.tools.lint.engine import lint_directory, lint_files
from runner_queue_fallback.workflow.model import Finding

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
EXAMPLES = ROOT / "examples"

_FENCE = re.compile(r"^```(?P<lang>\S*)[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_MARKER = re.compile(r"<!-- lint: (?P<spec>[^>]*?) -->")


@dataclass
class Block:
    """One fenced YAML block: where it is, its marker's words and its text."""

    document: Path
    line: int
    spec: dict[str, str]
    kind: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"


@dataclass
class Pair:
    coordinator: Block | None = None
    child: Block | None = None


def _spec(words: str) -> tuple[str, dict[str, str]]:
    """`pair=cpu coordinator allow=RQF304` -> ("coordinator", {"pair": "cpu", "allow": ...})."""
    kind, options = "", {}
    for word in words.split():
        key, eq, value = word.partition("=")
        if eq:
            options[key] = value
        else:
            kind = word
    return kind, options


def yaml_blocks(document: Path) -> list[Block]:
    """Every fenced `yaml`/`yml` block of a Markdown file, with the marker on the line before."""
    text = document.read_text(encoding="utf-8")
    blocks = []
    for match in _FENCE.finditer(text):
        if match["lang"] not in {"yaml", "yml"}:
            continue
        before = text[: match.start()]
        marker = _MARKER.fullmatch(before.rstrip().rsplit("\n", 1)[-1])
        kind, options = _spec(marker["spec"] if marker is not None else "")
        line = before.count("\n") + 1
        blocks.append(Block(document, line, options, kind or "unmarked", match["body"]))
    return blocks


ALL_BLOCKS = [block for document in DOCUMENTS for block in yaml_blocks(document)]


def _pairs() -> dict[str, Pair]:
    pairs: dict[str, Pair] = {}
    for block in ALL_BLOCKS:
        if block.kind in {"coordinator", "child"}:
            pair = pairs.setdefault(f"{block.document.name}:{block.spec.get('pair', '')}", Pair())
            assert getattr(pair, block.kind) is None, f"{block.where}: a second {block.kind}"
            setattr(pair, block.kind, block)
    return pairs


PAIRS = _pairs()


def test_every_yaml_block_says_what_it_is():
    """A marker on the line before each block: a coordinator, a child or a fragment."""
    unmarked = [b.where for b in ALL_BLOCKS if b.kind not in {"coordinator", "child", "fragment"}]
    assert unmarked == [], f"add <!-- lint: ... --> before: {unmarked}"
    assert all(b.spec.get("pair") for b in ALL_BLOCKS if b.kind != "fragment")


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=lambda b: b.where)
def test_every_yaml_block_parses(block: Block):
    assert yaml.safe_load(block.text) is not None, block.where


def test_the_readme_has_a_complete_pair():
    assert any(name.startswith("README.md:") for name in PAIRS), "no coordinator/child in README"


def _named(text: str, key: str) -> str | None:
    found = re.search(rf"^\s+{key}: (\S+)", text, re.MULTILINE)
    return found[1] if found else None


def _file_names(pair: Pair) -> tuple[str, str]:
    """The coordinator's and the child's file names, as each half names the other."""
    assert pair.coordinator is not None
    assert pair.child is not None
    child = pair.child.spec.get("file") or _named(pair.coordinator.text, "workflow")
    coordinator = pair.coordinator.spec.get("file") or _named(
        pair.child.text, "coordinator-workflow"
    )
    return coordinator or "check.yml", child or "worker.yml"


def _blocking(findings: list[Finding], allowed: set[str]) -> list[str]:
    return [
        f.text()
        for f in findings
        if f.level == "error" or (f.level == "warning" and f.rule not in allowed)
    ]


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_every_coordinator_block_passes_lint_with_its_child(name: str, tmp_path: Path):
    """Written as the files they say they are, the pair lints clean but for what its marker allows."""
    pair = PAIRS[name]
    assert pair.coordinator is not None, f"{name}: no coordinator block"
    assert pair.child is not None, f"{name}: no child block"
    coordinator_name, child_name = _file_names(pair)
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    coordinator = workflows / coordinator_name
    child = workflows / child_name
    coordinator.write_text(pair.coordinator.text, encoding="utf-8")
    child.write_text(pair.child.text, encoding="utf-8")
    result = lint_files(coordinator, child)
    assert result.coordinators, f"{pair.coordinator.where}: lint found no coordinator step"
    allowed = set(filter(None, pair.coordinator.spec.get("allow", "").split(",")))
    assert _blocking(result.findings, allowed) == [], pair.coordinator.where


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yml")), ids=lambda p: p.name)
def test_every_example_parses(path: Path):
    assert isinstance(yaml.safe_load(path.read_text(encoding="utf-8")), dict)


def test_every_example_pair_passes_lint_without_a_warning():
    """examples/ as a directory of workflows: every coordinator with its child, nothing to fix."""
    result = lint_directory(EXAMPLES)
    assert len(result.coordinators) >= 4
    assert _blocking(result.findings, set()) == []


def test_a_warning_the_marker_does_not_name_fails(tmp_path: Path):
    """The check can fail: the README's pair with a short timeout-minutes is refused."""
    pair = next(p for n, p in PAIRS.items() if n.startswith("README.md:"))
    assert pair.coordinator is not None
    assert pair.child is not None
    coordinator_name, child_name = _file_names(pair)
    short = re.sub(r"timeout-minutes: \d+", "timeout-minutes: 100", pair.coordinator.text, count=1)
    (tmp_path / coordinator_name).write_text(short, encoding="utf-8")
    (tmp_path / child_name).write_text(pair.child.text, encoding="utf-8")
    result = lint_files(tmp_path / coordinator_name, tmp_path / child_name)
    assert any("RQF203" in line for line in _blocking(result.findings, set()))


#: A fragment that sets literal pool inputs, as a user pastes it under `with:`.
POOL_FRAGMENTS = [
    block
    for block in ALL_BLOCKS
    if block.kind == "fragment"
    and isinstance(data := yaml.safe_load(block.text), dict)
    and "runner-type" in data
    and "${{" not in block.text
]


def test_the_documents_show_pool_fragments():
    assert any(b.document.name == "README.md" for b in POOL_FRAGMENTS)


@pytest.mark.parametrize("block", POOL_FRAGMENTS, ids=lambda b: b.where)
def test_every_pool_fragment_is_accepted_as_it_stands(block: Block):
    """What `plan` and the coordinator would read: the pool inputs validate, no error."""
    data = yaml.safe_load(block.text)
    environ = {env_name(name): str(value) for name, value in data.items()}
    settings = read_pool_settings(environ, load_profiles())
    assert settings.candidates, block.where
