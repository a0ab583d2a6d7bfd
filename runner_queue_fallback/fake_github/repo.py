"""Repository content of the fake GitHub: refs, annotated tags, commits and workflow files.

`RepoContent` is the part of the model that does not move by itself: branches and tags point at
commits, commits hold workflow files and name their parent (every new commit has one: the commit
its branch pointed at, or the default branch's for a new ref; the first has none), so two commits
can be compared as GitHub's compare endpoint does. Changes can be scheduled for a virtual time;
when they land is the Actions model's business (`_at`), what they do is this module's.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from runner_queue_fallback.fake_github.model import WorkflowFile, fake_commit_sha

__all__ = ["CHILD_INPUTS", "Comparison", "RepoContent"]

#: The seven inputs of the child workflow in the specification.
CHILD_INPUTS = (
    "request-id",
    "parent-run-id",
    "parent-run-attempt",
    "source-ref",
    "source-sha",
    "runner",
    "workload",
)
#: The child inputs the guard step is wired to.
_GUARD_WIRED = CHILD_INPUTS[:5]


def workflow_text(
    name: str,
    inputs: Sequence[str] | None,
    revision: int,
    *,
    dispatchable: bool = True,
    required: Sequence[str] | None = None,
) -> str:
    """The YAML of a worker workflow declaring `inputs` (revision > 0 adds a changing comment).

    With the seven inputs of the specification this is a child that `lint` passes: a guarded,
    read-only `worker` job. `inputs=None` (a file accepting any input) declares the seven; a file
    that is not dispatchable runs `on: push`.
    """
    declared = CHILD_INPUTS if inputs is None else tuple(inputs)
    needed = set(declared if required is None else required)
    lines = [f"name: {name}", "run-name: ${{ inputs.request-id }}", "on:"]
    if not dispatchable:
        lines += ["  push:"]
    elif declared:
        lines += ["  workflow_dispatch:", "    inputs:"]
        lines += [
            f"      {i}: {{required: {str(i in needed).lower()}, type: string}}" for i in declared
        ]
    else:
        lines += ["  workflow_dispatch:"]
    lines += ["permissions: {contents: read, actions: read}", "jobs:", "  worker:"]
    lines += ["    runs-on: ${{ fromJSON(inputs.runner) }}", "    timeout-minutes: 180"]
    lines += ["    steps:", "      - uses: ./guard", "        with:"]
    lines += [f"          {i}: ${{{{ inputs.{i} }}}}" for i in _GUARD_WIRED]
    return "\n".join(lines) + ("" if revision == 0 else f"\n# revision {revision}") + "\n"


@dataclass(frozen=True)
class Comparison:
    """How `head` stands to `base`, as `GET .../compare/{base}...{head}` tells it.

    `status`: `identical` (the same commit), `ahead` (head has commits base has not, and base
    none that head has not), `behind` (the reverse) or `diverged` (both have their own).
    """

    base: str  # the commit SHAs the two names resolved to
    head: str
    merge_base: str
    status: str
    ahead: tuple[str, ...]  # head's own commits, oldest first
    behind_by: int


class RepoContent:
    """Refs, commits (each a tree of workflow files) and annotated tag objects of one repository."""

    def __init__(self, default_branch: str = "main") -> None:
        """`default_branch` at one commit, no workflow files."""
        self.default_branch = default_branch
        self.refs: dict[str, str] = {}
        self.commits: dict[str, dict[str, WorkflowFile]] = {}
        #: commit SHA -> its parent's (the first commit has none)
        self.parents: dict[str, str] = {}
        #: annotated tag objects: tag object SHA -> (tag name, commit SHA it points at)
        self.tag_objects: dict[str, tuple[str, str]] = {}
        self.workflow_ids: dict[str, int] = {}
        self._lock = threading.RLock()
        self._revisions = itertools.count(1)
        self.add_ref(f"heads/{default_branch}")

    def _at(self, at: float | None, action: Callable[[], None]) -> None:
        """Apply a change now; a model with a timeline also schedules it for virtual time `at`."""
        if at is not None:
            raise ValueError("this repository has no timeline to schedule a change on")
        with self._lock:
            action()

    def add_ref(self, ref: str, sha: str | None = None) -> str:
        """Create `ref` (`heads/x`, `tags/v1`, `pull/1/merge`) at `sha`, or at a new commit."""
        with self._lock:
            base = self.refs.get(f"heads/{self.default_branch}")
            sha = sha or fake_commit_sha(ref, len(self.commits))
            self._new_commit(sha, base)
            self.refs[ref] = sha
            return sha

    def _new_commit(self, sha: str, parent: str | None) -> None:
        """Make `sha` a commit on top of `parent` (same tree) unless it exists already."""
        if sha in self.commits:
            return
        self.commits[sha] = dict(self.commits.get(parent or "", {}))
        if parent is not None:
            self.parents[sha] = parent

    def add_annotated_tag(self, name: str, commit: str | None = None) -> str:
        """Create `tags/<name>` as an annotated tag: the ref points at a tag object, not a commit."""
        with self._lock:
            commit = commit or self.refs[f"heads/{self.default_branch}"]
            tag_sha = fake_commit_sha("annotated tag", name, commit)
            self.tag_objects[tag_sha] = (name, commit)
            self.refs[f"tags/{name}"] = tag_sha
            return tag_sha

    def move_ref(self, ref: str, new_sha: str | None = None, *, at: float | None = None) -> str:
        """Point `ref` at `new_sha` (a new commit if omitted), now or at virtual time `at`."""
        sha = new_sha or fake_commit_sha(ref, "moved", len(self.commits), at)

        def move() -> None:
            self._new_commit(sha, self.refs.get(ref))
            self.refs[ref] = sha

        self._at(at, move)
        return sha

    def add_workflow(
        self,
        file: str = "runner-worker.yml",
        ref: str = "main",
        *,
        dispatchable: bool = True,
        inputs: Sequence[str] | None = CHILD_INPUTS,
        required: Sequence[str] | None = None,
        name: str = "Runner worker",
        content: str | None = None,
    ) -> str:
        """Put a workflow file on branch `ref` (in its current commit); return its blob SHA.

        The file's text follows `dispatchable`, `inputs` and `required` unless `content` gives it
        (what GitHub does with a dispatch is still decided by those three).
        """
        with self._lock:
            sha = self.refs.get(f"heads/{ref}") or self.add_ref(f"heads/{ref}")
            text = workflow_text(name, inputs, 0, dispatchable=dispatchable, required=required)
            wf = WorkflowFile(
                content=text if content is None else content,
                dispatchable=dispatchable,
                inputs=None if inputs is None else tuple(inputs),
                required=tuple(inputs or ()) if required is None else tuple(required),
                name=name,
            )
            self.commits[sha][f".github/workflows/{file}"] = wf
            self.workflow_id(file)
            return wf.sha

    def change_workflow(
        self, file: str = "runner-worker.yml", ref: str = "main", *, at: float | None = None
    ) -> None:
        """Commit a new revision of `file` on branch `ref` (new blob and commit SHA), now or at `at`."""
        revision = next(self._revisions)

        def change() -> None:
            old = self.refs[f"heads/{ref}"]
            tree = dict(self.commits[old])
            path = f".github/workflows/{file}"
            wf = tree[path]
            text = wf.content.split("\n# revision ", 1)[0].rstrip("\n")
            tree[path] = replace(wf, content=f"{text}\n# revision {revision}\n")
            new = fake_commit_sha(old, file, revision)
            self.commits[new] = tree
            self.parents[new] = old
            self.refs[f"heads/{ref}"] = new

        self._at(at, change)

    def workflow_id(self, file: str, first: int = 161_335_000) -> int:
        """The numeric ID of workflow `file`, given on first sight (`first` + how many came before)."""
        return self.workflow_ids.setdefault(file, first + len(self.workflow_ids))

    def resolve(self, ref: str, *, allow_sha: bool = False) -> tuple[str, str] | None:
        """Resolve a branch/tag name (or `refs/...`, or a commit SHA) to (ref, commit SHA)."""
        name = ref.removeprefix("refs/")
        for candidate in (name, f"heads/{name}", f"tags/{name}"):
            if candidate.startswith(("heads/", "tags/")) and candidate in self.refs:
                return candidate, self.peel(self.refs[candidate])
        if allow_sha and ref in self.commits:
            return ref, ref
        return None

    def peel(self, sha: str) -> str:
        """The commit an object SHA stands for: an annotated tag object resolves to its commit."""
        return self.tag_objects[sha][1] if sha in self.tag_objects else sha

    def revision(self, name: str) -> str | None:
        """The commit `name` names as git reads a revision, or None.

        A commit SHA; `refs/...` exactly; a short name in git's order (`refs/<name>`,
        `refs/tags/<name>`, `refs/heads/<name>`): a bare `main` is the tag `main` when one exists.
        """
        if name in self.commits:
            return name
        if name.startswith("refs/"):
            candidates = [name.removeprefix("refs/")]
        else:
            candidates = [name, f"tags/{name}", f"heads/{name}"]
        for candidate in candidates:
            if candidate in self.refs:
                return self.peel(self.refs[candidate])
        return None

    def lineage(self, sha: str) -> list[str]:
        """`sha` and its ancestors, newest first."""
        line = [sha]
        while line[-1] in self.parents:
            line.append(self.parents[line[-1]])
        return line

    def compare(self, base: str, head: str) -> Comparison | None:
        """How revision `head` stands to revision `base`, as GitHub's compare endpoint says.

        None (GitHub's 404) when either names no commit or the two have no common ancestor.
        """
        with self._lock:
            base_sha, head_sha = self.revision(base), self.revision(head)
            if base_sha is None or head_sha is None:
                return None
            base_line, head_line = self.lineage(base_sha), self.lineage(head_sha)
            shared = set(base_line)
            merge_base = next((sha for sha in head_line if sha in shared), None)
            if merge_base is None:
                return None
            ahead = tuple(reversed(head_line[: head_line.index(merge_base)]))
            behind_by = base_line.index(merge_base)
            status = {
                (False, False): "identical",
                (True, False): "ahead",
                (False, True): "behind",
            }.get((bool(ahead), bool(behind_by)), "diverged")
            return Comparison(base_sha, head_sha, merge_base, status, ahead, behind_by)
