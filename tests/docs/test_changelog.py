"""CHANGELOG.md keeps the Keep a Changelog 1.1.0 shape and agrees with the package.

The file is read by people on PyPI and GitHub and, through ``docs/changelog.md``, on the docs
site: so no relative links (they would break in one of the two), one ``## [Unreleased]`` section
first, released versions newest first, and only Keep a Changelog's groups as ``###`` headings.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

import airflow_gang
from airflow_gang.moved import MOVED

ROOT = Path(__file__).resolve().parents[2]
CHANGELOG = ROOT / "CHANGELOG.md"
GROUPS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
UNRELEASED = "## [Unreleased]"
RELEASE = re.compile(r"^## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})$")
# Inline links and images `[text](target)`, and reference definitions `[label]: target`.
INLINE_LINK = re.compile(r"\]\(([^)\s]+)[^)]*\)")
REFERENCE = re.compile(r"^\[[^\]]+\]:\s*(\S+)", re.MULTILINE)


def sections(text: str) -> list[tuple[str, list[str]]]:
    """Each ``## `` heading with the lines under it, in order (lines outside fenced code only)."""
    found: list[tuple[str, list[str]]] = []
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced:
            continue
        if line.startswith("## "):
            found.append((line, []))
        elif found:
            found[-1][1].append(line)
    return found


def releases(text: str) -> list[tuple[tuple[int, int, int], dt.date]]:
    """The released versions and their dates, in the file's order."""
    out = []
    for heading, _ in sections(text):
        match = RELEASE.match(heading)
        if match:
            major, minor, patch, day = match.groups()
            out.append(((int(major), int(minor), int(patch)), dt.date.fromisoformat(day)))
    return out


@pytest.fixture(scope="module")
def text() -> str:
    return CHANGELOG.read_text(encoding="utf-8")


def test_title_then_unreleased_then_releases(text: str) -> None:
    assert text.splitlines()[0] == "# Changelog"
    headings = [heading for heading, _ in sections(text)]
    assert headings, "no ## sections"
    assert headings[0] == UNRELEASED
    assert headings.count(UNRELEASED) == 1
    bad = [heading for heading in headings[1:] if not RELEASE.match(heading)]
    assert not bad, f"headings that are not '## [X.Y.Z] - YYYY-MM-DD': {bad}"
    assert len(headings) > 1, "no released version"


def test_versions_newest_first(text: str) -> None:
    found = releases(text)
    versions = [version for version, _ in found]
    assert versions == sorted(versions, reverse=True)
    assert len(set(versions)) == len(versions), "a version appears twice"
    dates = [day for _, day in found]
    assert dates == sorted(dates, reverse=True), "release dates must not grow down the file"


def test_only_keep_a_changelog_groups(text: str) -> None:
    before_first_section = text.split("\n## ", 1)[0]
    assert "\n### " not in before_first_section
    for heading, lines in sections(text):
        groups = [line[4:].strip() for line in lines if line.startswith("### ")]
        unknown = [group for group in groups if group not in GROUPS]
        assert not unknown, f"{heading}: groups outside Keep a Changelog's {GROUPS}: {unknown}"
        assert len(set(groups)) == len(groups), f"{heading}: a group appears twice: {groups}"
        assert groups == sorted(groups, key=GROUPS.index), f"{heading}: groups out of order: {groups}"


def test_newest_release_is_the_package_version(text: str) -> None:
    newest, _ = releases(text)[0]
    assert ".".join(map(str, newest)) == airflow_gang.__version__


def test_no_relative_links(text: str) -> None:
    """Shown on PyPI/GitHub and inside the docs site: a relative link breaks in one of them."""
    targets = INLINE_LINK.findall(text) + REFERENCE.findall(text)
    relative = [target for target in targets if not re.match(r"(https?://|mailto:)", target)]
    assert not relative, f"relative links: {relative}"


def test_every_old_import_path_is_named(text: str) -> None:
    """Each module path kept working after a move (the finder's table and the shim modules, whose
    docstrings start with "Moved" or "Old home") is named, so a user can find the new one."""
    shims = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for path in (ROOT / "airflow_gang").rglob("*.py")
        if re.match(r'"""(Moved|Old home)', path.read_text(encoding="utf-8"))
    }
    assert shims, "no shim modules found: the docstring convention changed"
    missing = sorted(old for old in {*MOVED, *shims} if f"`{old}`" not in text)
    assert not missing, f"old import paths the changelog does not name: {missing}"
