"""Refs, tags, files and comparisons: the endpoints that tell which code a ref names.

Its own module because these reads answer a different question from the run endpoints: the
preflight, the sequence and the guard use them to pin the commit a child runs, to read a
workflow file at it, and (the guard) to tell whether a commit is on a branch. A git ref, a file
path or a comparison's `BASE...HEAD` is sent as several path segments, each encoded.
"""

from __future__ import annotations

from typing import Final

from runner_queue_fallback.core.errors import TransportError
from runner_queue_fallback.github.calls import Calls
from runner_queue_fallback.github.models import CommitComparison, ContentFile, GitRef, GitTag

__all__ = ["Refs"]

_MAX_TAG_HOPS: Final = 3  # a tag of a tag of a tag is already unusual


class Refs:
    """Read refs, annotated tags and files of one repository."""

    def __init__(self, calls: Calls) -> None:
        """Read through `calls` (conditional GETs with retries)."""
        self._calls = calls

    def get_ref_sha(self, ref: str, *, deadline: float | None = None) -> str:
        """The SHA a fully qualified ref points at.

        Accepts `refs/heads/x`, `heads/x`, `refs/tags/v1`, `refs/pull/5/merge`...; a bare
        branch name is not qualified and GitHub answers 404. For an annotated tag the SHA is
        the tag object's, not the commit's.
        """
        path = self._calls.path("git", "ref", *ref.removeprefix("refs/").split("/"))
        return self._calls.get(path, {}, GitRef, deadline).object.sha

    def get_commit_sha(self, ref: str, *, deadline: float | None = None) -> str:
        """The commit a fully qualified ref points at, peeling an annotated tag to its commit.

        A lightweight tag or a branch costs one request; an annotated tag one more
        (`GET .../git/tags/{sha}`), since its ref names the tag object, not the commit.
        """
        path = self._calls.path("git", "ref", *ref.removeprefix("refs/").split("/"))
        target = self._calls.get(path, {}, GitRef, deadline).object
        for _ in range(_MAX_TAG_HOPS):
            if target.type != "tag":
                return target.sha
            tag_path = self._calls.path("git", "tags", target.sha)
            target = self._calls.get(tag_path, {}, GitTag, deadline).object
        raise TransportError("GET", path, f"tag {ref} points at more than {_MAX_TAG_HOPS} tags")

    def compare(self, base: str, head: str, *, deadline: float | None = None) -> CommitComparison:
        """How `head` stands to `base` (each a commit SHA or a full ref such as `refs/heads/x`).

        A bare branch name would be read as a tag of that name first, so pass refs in full.
        """
        path = self._calls.path("compare", *f"{base}...{head}".split("/"))
        return self._calls.get(path, {}, CommitComparison, deadline)

    def get_file(self, path: str, ref: str, *, deadline: float | None = None) -> ContentFile:
        """The file `path` at `ref`: its blob SHA and (up to 1 MB) its content, in one request."""
        file_path = self._calls.path("contents", *path.lstrip("/").split("/"))
        return self._calls.get(file_path, {"ref": ref}, ContentFile, deadline)
