"""What outside linters found, kept fixed: zizmor over the workflows and actions, vulture's dead code.

zizmor itself (pinned) runs in .ci/run's stage that may reach the package index, at its regular
persona over `.github/`, `action.yml`, `guard/` and `examples/`; these tests need no network. They
hold what zizmor cannot: that a finding ignored in place says why, that a pin's comment names the
release it pins, that a container image pinned by tag alone says to pin it by digest, and that no
function of the package is left without a caller (vulture's 60 % findings, issue 48 item 9).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "runner_queue_fallback"
#: Every workflow and action file zizmor audits in .ci/run, and dependabot's configuration.
AUDITED = sorted(
    [
        *(ROOT / ".github").rglob("*.yml"),
        ROOT / "action.yml",
        *(ROOT / "guard").rglob("action.yml"),
        *(ROOT / "examples").glob("*.yml"),
    ]
)
OWN_WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
EXAMPLES = sorted((ROOT / "examples").glob("*.yml"))
#: `# zizmor: ignore[audit, ...] reason`: the audits, then what is left of the line.
ZIZMOR_IGNORE = re.compile(r"#\s*zizmor:\s*ignore\[(?P<audits>[^\]]*)\](?P<reason>.*)$")
#: A step's `uses: owner/repo@<40 hex> # comment`.
PINNED_USES = re.compile(r"uses:\s*(?P<action>[^@\s]+)@(?P<sha>[0-9a-f]{40})\b(?P<rest>.*)$")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _ignores() -> list[tuple[str, int, str, str]]:
    """Every zizmor ignore comment: file, line, audits, reason."""
    return [
        (_rel(path), number, found["audits"].strip(), found["reason"].strip())
        for path in AUDITED
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if (found := ZIZMOR_IGNORE.search(line))
    ]


def test_the_docker_guards_image_path_is_ignored_for_unpinned_images_with_its_reason():
    """zizmor reads `image: ../../Dockerfile` as a registry image; the line says it is our build."""
    ignored = {(file, audits) for file, _, audits, _ in _ignores()}
    assert ("guard/docker/action.yml", "unpinned-images") in ignored


def test_every_zizmor_ignore_names_its_audit_and_says_why():
    """An ignore comment names the audits it silences and gives its reason on the same line."""
    found = _ignores()
    assert found, "the guard's image line, at least, has one"
    for file, number, audits, reason in found:
        assert audits, f"{file}:{number}: name the audit: `# zizmor: ignore[<audit>] <why>`"
        assert len(reason.split()) >= 4, f"{file}:{number}: say why, after the `]`"


@pytest.mark.parametrize("path", OWN_WORKFLOWS, ids=_rel)
def test_an_action_pinned_by_sha_names_the_exact_release_it_pins(path: Path):
    """`@<sha> # v4.0.0`, never `# v4`: a major tag moves, the commit stays the release it was."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if (found := PINNED_USES.search(line)) is None:
            continue
        comment = found["rest"].strip()
        assert re.fullmatch(r"# v\d+\.\d+\.\d+", comment), f"{_rel(path)}:{number}: {comment!r}"


def _images(path: Path) -> list[tuple[int, str, list[str]]]:
    """Each `image:` of a job's container: its line, its value, and the comment lines above it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for index, line in enumerate(lines):
        if (match := re.match(r"\s*image:\s*(\S+)", line)) is None:
            continue
        above = []
        for before in reversed(lines[:index]):
            if not before.strip().startswith("#"):
                break
            above.append(before.strip())
        found.append((index + 1, match[1], above))
    return found


@pytest.mark.parametrize("path", EXAMPLES, ids=_rel)
def test_a_container_image_pinned_by_tag_alone_says_to_pin_it_by_digest(path: Path):
    """An example may show an image by its tag, if the comment beside it says to pin the digest."""
    for number, image, above in _images(path):
        if "@sha256:" in image:
            continue
        assert any("digest" in comment for comment in above), f"{_rel(path)}:{number}: {image}"


def test_the_example_images_are_found():
    """The GPU worker runs in a CUDA container: the test above has an image to look at."""
    assert any(_images(path) for path in EXAMPLES)


def test_dependabot_proposes_a_digest_only_once_it_is_a_week_old():
    """zizmor's dependabot-cooldown: a digest pushed by mistake is usually withdrawn within days."""
    config = yaml.safe_load((ROOT / ".github" / "dependabot.yml").read_text(encoding="utf-8"))
    for update in config["updates"]:
        assert update.get("cooldown", {}).get("default-days", 0) >= 7, update["package-ecosystem"]


# ------------------------------------------------------------------------------ dead code

#: Methods that code outside the package calls by its own protocol, each with who calls it.
CALLED_FROM_OUTSIDE = {
    "log_message": "http.server.BaseHTTPRequestHandler, for each request it logs",
    "writable": "io.TextIOBase: print() and contextlib.redirect_stdout ask a stream",
}
#: Decorators that leave a function to be called by name (others register it: a validator).
PLAIN_DECORATORS = {"property", "staticmethod", "classmethod", "cached_property"}


def _decorator_name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")


def _functions(tree: ast.Module) -> list[tuple[str, int]]:
    """The module's functions and the methods of its classes (not dunders, not registered)."""
    found = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                dunder = node.name.startswith("__") and node.name.endswith("__")
                plain = all(_decorator_name(d) in PLAIN_DECORATORS for d in node.decorator_list)
                if plain and not dunder:
                    found.append((node.name, node.lineno))

    visit(tree.body)
    return found


def _names_used(tree: ast.Module) -> set[str]:
    """Every name a module reads, attribute it takes, name it imports, or identifier it spells."""
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.alias):
            used.add(node.name.rpartition(".")[2])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            used.add(node.value)  # a route table names its handler: `getattr(self, name)`
    return used


def test_every_function_of_the_package_has_a_caller():
    """No function or method of the package is unused in it, the tests, the bench or the scripts.

    vulture (60 %) found three: `GitHubAPIError.with_fix`, `errors.join_errors` and the fake's
    `Renderer.user`; they were removed. This check goes by name, as vulture does: the package's
    own code by what it reads and spells, the rest (2 MB, too slow to parse here) by any mention.
    """
    trees = {
        path: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(PACKAGE.rglob("*.py"))
    }
    used = set().union(*(_names_used(tree) for tree in trees.values())) | set(CALLED_FROM_OUTSIDE)
    for folder in ("tests", "bench", "scripts", "guard"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == Path(__file__).resolve():
                continue  # this file names the removed functions
            used |= set(re.findall(r"[A-Za-z_]\w*", path.read_text(encoding="utf-8")))
    unused = [
        f"{_rel(path)}:{line}: {name}"
        for path, tree in trees.items()
        for name, line in _functions(tree)
        if name not in used
    ]
    assert unused == []
