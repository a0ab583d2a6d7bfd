"""Write the part of GitHub's OpenAPI descriptions that this program uses into tests/data/openapi.

The source is the npm package `@octokit/openapi` (GitHub's official descriptions, as generated
from github/rest-api-description), fetched at a pinned version with `npm pack` and checked
against its pinned SHA-256. Four views are written, each with its provenance:

- `api.github.com-2022-11-28.json`: `generated/api.github.com.json` as it is (its
  `x-github-breaking-changes` entries dropped, unapplied);
- `api.github.com-2026-03-10.json`: the same file with every `x-github-breaking-changes` entry
  tagged 2026-03-10 applied where it stands (JSON Patch lists and JSON Merge Patch objects);
- `ghes-<oldest>.json` and `ghes-<newest>.json`: the oldest and newest GitHub Enterprise Server
  description the package ships.

Only the operations the client sends (`OPERATIONS`) and the components they reference are kept
(`$ref`s stay, with their components); `examples` are dropped. A GHES release without one of
the `NEWER_OPERATIONS` (the self-hosted-runner policy's: GHES 3.17 lacks them) gets a view
without it. The contract tests
(tests/test_api_contract.py) validate every request and reply of the simulations against them.

    python3 scripts/api_description.py             fetch, subset, write
    python3 scripts/api_description.py --check     exit 1 if the committed files differ
    python3 scripts/api_description.py --tarball octokit-openapi-23.0.2.tgz   no download
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PACKAGE = "@octokit/openapi"
VERSION = "23.0.2"
#: SHA-256 of `octokit-openapi-23.0.2.tgz` as npm packs it: a changed tarball is refused.
TARBALL_SHA256 = "71a18407dd5e8464f4e0525daf03deabbe65abd9287d6adc7b5d98f516cd0d0c"
BREAKING_VERSION = "2026-03-10"
OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "openapi"

#: Every operation `runner_queue_fallback.github.client.GitHubClient` sends (method, template).
OPERATIONS = (
    # the GitHub App's, on its JWT (github/installations.py): its installation, a token minted
    ("get", "/repos/{owner}/{repo}/installation"),
    ("post", "/app/installations/{installation_id}/access_tokens"),
    ("post", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches"),
    ("get", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs"),
    ("get", "/repos/{owner}/{repo}/actions/runs/{run_id}"),
    ("get", "/repos/{owner}/{repo}/actions/runs/{run_id}/attempts/{attempt_number}"),
    ("get", "/repos/{owner}/{repo}/actions/runs/{run_id}/attempts/{attempt_number}/jobs"),
    ("post", "/repos/{owner}/{repo}/actions/runs/{run_id}/cancel"),
    ("post", "/repos/{owner}/{repo}/actions/runs/{run_id}/force-cancel"),
    ("get", "/repos/{owner}/{repo}/git/ref/{ref}"),
    ("get", "/repos/{owner}/{repo}/git/tags/{tag_sha}"),
    ("get", "/repos/{owner}/{repo}/compare/{basehead}"),
    ("get", "/repos/{owner}/{repo}/contents/{path}"),
    ("get", "/rate_limit"),
    # With `runners-token` only (github-api.md 13): the repository's owner, the runner groups,
    # their repositories and runners, the self-hosted-runner policy, the repository's runners.
    ("get", "/repos/{owner}/{repo}"),
    ("get", "/orgs/{org}/actions/runner-groups"),
    ("get", "/orgs/{org}/actions/runner-groups/{runner_group_id}/repositories"),
    ("get", "/orgs/{org}/actions/runner-groups/{runner_group_id}/runners"),
    ("get", "/orgs/{org}/actions/permissions/self-hosted-runners"),
    ("get", "/orgs/{org}/actions/permissions/self-hosted-runners/repositories"),
    ("get", "/repos/{owner}/{repo}/actions/runners"),
)
#: Operations an older GitHub Enterprise Server release may lack (the client reads a 404 from
#: them as "not checked"): absent from a GHES view, they are left out of it, not an error.
NEWER_OPERATIONS = frozenset(
    {
        ("get", "/orgs/{org}/actions/permissions/self-hosted-runners"),
        ("get", "/orgs/{org}/actions/permissions/self-hosted-runners/repositories"),
    }
)

Json = Any


# ------------------------------------------------------------------------------ fetching


def fetch(version: str, into: Path) -> Path:
    """`npm pack` the package into `into`; the tarball's path."""
    result = subprocess.run(  # noqa: S603 (fixed argv: npm and the pinned package)
        ["npm", "pack", f"{PACKAGE}@{version}", "--json", "--pack-destination", str(into)],  # noqa: S607 (npm from PATH)
        check=True,
        capture_output=True,
        text=True,
    )
    packed: list[dict[str, str]] = json.loads(result.stdout)
    return into / packed[0]["filename"]


def sha256(data: bytes) -> str:
    """Hex SHA-256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def read_members(tarball: Path) -> dict[str, bytes]:
    """The package's `generated/*.json` descriptions (not the dereferenced copies), by name."""
    members: dict[str, bytes] = {}
    with tarfile.open(tarball, "r:gz") as archive:
        for member in archive.getmembers():
            name = member.name.removeprefix("package/")
            if re.fullmatch(r"generated/[^/]+\.json", name) and ".deref." not in name:
                handle = archive.extractfile(member)
                if handle is not None:
                    members[name] = handle.read()
    return members


def ghes_range(names: list[str]) -> tuple[str, str]:
    """The oldest and newest `generated/ghes-X.Y.json` among `names`."""

    def release(name: str) -> tuple[int, ...]:
        found = re.search(r"ghes-(\d+)\.(\d+)\.json$", name)
        return (int(found.group(1)), int(found.group(2))) if found else ()

    releases = sorted((n for n in names if release(n)), key=release)
    if not releases:
        raise SystemExit("the package ships no GHES description")
    return releases[0], releases[-1]


# ------------------------------------------------------------------------ breaking changes


def _pointer(path: str) -> list[str]:
    return [part.replace("~1", "/").replace("~0", "~") for part in path.split("/")[1:]]


def json_patch(target: Json, operations: list[dict[str, Any]]) -> None:
    """Apply RFC 6902 `add`, `remove` and `replace` operations to `target` in place."""
    for operation in operations:
        *parents, last = _pointer(operation["path"])
        node = target
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        kind = operation["op"]
        key: int | str = int(last) if isinstance(node, list) and last != "-" else last
        if kind == "remove":
            del node[key]
        elif kind == "replace":
            node[key] = operation["value"]
        elif kind == "add" and isinstance(node, list):
            node.insert(len(node) if key == "-" else int(key), operation["value"])
        elif kind == "add":
            node[key] = operation["value"]
        else:
            raise SystemExit(f"unsupported JSON Patch operation {kind!r}")


def merge_patch(target: Json, patch: Json) -> Json:
    """RFC 7386: `patch` merged into `target` (objects merge, null removes, others replace)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def _nodes_with_changes(node: Json, where: str = "#") -> Iterator[tuple[dict[str, Any], str]]:
    """Every object carrying `x-github-breaking-changes`, innermost first."""
    children = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    for key, child in children:
        escaped = str(key).replace("~", "~0").replace("/", "~1")
        yield from _nodes_with_changes(child, f"{where}/{escaped}")
    if isinstance(node, dict) and "x-github-breaking-changes" in node:
        yield node, where


def apply_breaking_changes(document: Json, version: str) -> list[dict[str, str]]:
    """Apply every breaking change of `version` in place; the list of what was applied."""
    applied = []
    for node, where in list(_nodes_with_changes(document)):
        for change in node.pop("x-github-breaking-changes"):
            if change["version"] != version:
                raise SystemExit(
                    f"{where}: a breaking change of {change['version']}, not {version}"
                )
            if isinstance(change["patch"], list):
                json_patch(node, change["patch"])
            else:
                patched = merge_patch(node, change["patch"])
                node.clear()
                node.update(patched)
            applied.append({"at": where, "changeset": change["changeset"]})
    return applied


def drop_breaking_changes(document: Json) -> None:
    """Remove every `x-github-breaking-changes` entry unapplied (the 2022-11-28 view)."""
    for node, _ in list(_nodes_with_changes(document)):
        del node["x-github-breaking-changes"]


# --------------------------------------------------------------------------------- subset


def _resolve(document: Json, ref: str) -> Json:
    node = document
    for part in _pointer(ref.removeprefix("#")):
        node = node[part]
    return node


def _strip(node: Json) -> Json:
    """A copy without `examples`/`example` and Octokit's own extension."""
    if isinstance(node, dict):
        return {
            k: _strip(v) for k, v in node.items() if k not in {"examples", "example", "x-octokit"}
        }
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _refs(node: Json) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def subset(document: Json, *, older_server: bool = False) -> Json:
    """The operations of `OPERATIONS` with every component they reference, nothing else.

    On an `older_server`, the `NEWER_OPERATIONS` its description lacks are left out.
    """
    paths: dict[str, dict[str, Json]] = {}
    for method, template in OPERATIONS:
        item = document["paths"].get(template, {})
        if method not in item and older_server and (method, template) in NEWER_OPERATIONS:
            continue
        if method not in item:
            raise SystemExit(f"{method.upper()} {template} is not in the description")
        paths.setdefault(template, {})[method] = _strip(item[method])
        if "parameters" in item:
            paths[template]["parameters"] = _strip(item["parameters"])
    components: dict[str, dict[str, Json]] = {}
    pending = list(_refs(paths))
    while pending:
        ref = pending.pop()
        _, _, kind, name = ref.split("/", 3)
        if name in components.get(kind, {}):
            continue
        target = _strip(_resolve(document, ref))
        components.setdefault(kind, {})[name] = target
        pending += _refs(target)
    return {
        "openapi": document["openapi"],
        "info": document["info"],
        "servers": document.get("servers", []),
        "paths": paths,
        "components": {
            kind: dict(sorted(items.items())) for kind, items in sorted(components.items())
        },
    }


# ---------------------------------------------------------------------------------- views


def build_views(tarball: Path) -> dict[str, Json]:
    """Every view file's name and content, with its provenance."""
    data = tarball.read_bytes()
    if sha256(data) != TARBALL_SHA256:
        raise SystemExit(
            f"{tarball.name}: SHA-256 {sha256(data)} is not the pinned {TARBALL_SHA256}"
        )
    members = read_members(tarball)
    oldest, newest = ghes_range(sorted(members))
    wanted = [
        ("api.github.com-2022-11-28.json", "generated/api.github.com.json", "2022-11-28"),
        (
            f"api.github.com-{BREAKING_VERSION}.json",
            "generated/api.github.com.json",
            BREAKING_VERSION,
        ),
        (Path(oldest).name, oldest, "2022-11-28"),
        (Path(newest).name, newest, "2022-11-28"),
    ]
    views = {}
    for out_name, member, api_version in wanted:
        document = json.loads(members[member])
        applied: list[dict[str, str]] = []
        if api_version == BREAKING_VERSION:
            applied = apply_breaking_changes(document, BREAKING_VERSION)
        else:
            drop_breaking_changes(document)
        view = subset(document, older_server=member.startswith("generated/ghes-"))
        view["x-provenance"] = {
            "package": PACKAGE,
            "version": VERSION,
            "tarball": tarball.name,
            "tarball_sha256": TARBALL_SHA256,
            "file": member,
            "file_sha256": sha256(members[member]),
            "api_version": api_version,
            "breaking_changes_applied": [
                change for change in applied if _in_view(change["at"], view)
            ],
            "written_by": "scripts/api_description.py",
        }
        views[out_name] = view
    return views


def _in_view(where: str, view: Json) -> bool:
    """Whether a breaking change's location is part of the subset."""
    try:
        _resolve(view, where)
    except (KeyError, IndexError, TypeError):
        return False
    return True


def render(view: Json) -> str:
    """A view as committed: sorted keys, one-space indent, a final newline."""
    return json.dumps(view, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Fetch (or read `--tarball`), build the views, write them or `--check` them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tarball", type=Path, help="use this package tarball, no download")
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    parser.add_argument("--out", type=Path, default=OUT, help="the directory written")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rqf-openapi-") as tmp:
        tarball = args.tarball or fetch(VERSION, Path(tmp))
        views = build_views(tarball)
    stale = []
    for name, view in views.items():
        path = args.out / name
        text = render(view)
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
            continue
        args.out.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path} ({len(text)} bytes)")
    if stale:
        print(f"out of date: {', '.join(stale)} (run scripts/api_description.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
