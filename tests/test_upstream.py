"""The vendored upstream files: each is the named tag's file, byte for byte, and each is accounted for."""

from __future__ import annotations

import hashlib
import re

import pytest

from tests import k8s

SOURCES = k8s.sources()


def git_blob(data: bytes) -> str:
    """The hash git gives a file's content (`git hash-object`)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_git_blob_is_what_git_hash_object_prints():
    # `printf 'hello\n' | git hash-object --stdin`
    assert git_blob(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s["file"])
def test_each_vendored_file_is_the_upstream_blob(source):
    assert set(source) >= {"file", "repo", "tag", "path", "blob"}
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", source["repo"])
    assert re.fullmatch(r"[0-9a-f]{40}", source["blob"])
    data = (k8s.ROOT / source["file"]).read_bytes()
    assert git_blob(data) == source["blob"], f"{source['file']} differs from {source['repo']}@{source['tag']}"


def test_every_file_under_tests_upstream_has_a_source():
    listed = {source["file"] for source in SOURCES}
    present = {str(path.relative_to(k8s.ROOT)) for path in k8s.UPSTREAM.rglob("*")
               if path.is_file() and path != k8s.SOURCES and "__pycache__" not in path.parts}
    assert present <= listed, f"vendored without a SOURCES entry: {sorted(present - listed)}"
    assert len(listed) == len(SOURCES), "a file is listed twice"


def test_the_tests_need_nothing_outside_the_repository():
    # ../shared is the team's reference copy; a fresh clone must not need it,
    # however a path to it is spelt.
    outside = re.compile(r"""\.\./shared|/\s*["']shared["']|parent\.parent\.parent|parents\[[2-9]\]""")
    offenders = [str(path.relative_to(k8s.ROOT)) for path in k8s.ROOT.joinpath("tests").rglob("*.py")
                 if path.name != "test_upstream.py" and outside.search(path.read_text())]
    assert offenders == []
