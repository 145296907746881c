"""Nothing in the repository sends its reader to a document outside it.

The people who built the provider kept design notes beside their checkout (four upper-case
Markdown files in a shared design folder, next to the upstream CRD files) and scratch notes in
session folders under ``/tmp``. A user's clone has none of these, so a docstring, comment, test or
page that cites one is a dead end. The facts the code relies on are written into the repository's
own docs instead (``docs/architecture.md``, "Domain facts the code relies on", and the pages it
links), and cited there. This test reads every text file ``git ls-files`` lists and fails with
``file:line`` for each reference to a document outside the repository:

- a design note by name (the four ``<NAME>.md`` files), or one of its sections
  (``<NAME> \u00a7<n>``, ``<NAME> facts``);
- the folder beside the checkout the notes live in, written as a relative path or joined as one
  with ``pathlib``, and any path on the team's machine (``/work/...``);
- a document at an absolute path (a Markdown or text file under ``/tmp``, ``/work``, ``/home``),
  and the helpers' session folders under ``/tmp``;
- a section sign with no repository document named before it (``(\u00a710)`` cites a section of
  something the reader cannot find).

Reading *data* from beside the checkout is allowed, narrowly: a test may read the upstream CRD
schemas from the two CRD folders there (``crds`` and ``crds-trainer-v2``) when they are present and
must skip when they are not. So a path into one of those two folders is accepted only in a file
under ``tests/`` that skips (``pytest.skip`` or ``skipif``); the same path anywhere else, or any
other folder beside the checkout, is reported.

A second test checks the other direction: every ``docs/<page>.md`` a file names exists, and so
does the ``#anchor`` it names, so the references that replaced the outside ones cannot rot.
"""

from __future__ import annotations

import re
import subprocess
import unicodedata
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SECTION_SIGN = "\u00a7"
# The notes' file names (any case: no page of the repository may take these names).
NOTE_NAMES = r"(?:design|domain|airflow|style)"
# (what it is, pattern). Written so that this file's own text matches none of them.
REFERENCES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a design note outside the repository", re.compile(rf"(?i)\b{NOTE_NAMES}\.md\b")),
    (
        "a section of a design note outside the repository",
        re.compile(rf"\b(?:DESIGN|DOMAIN|AIRFLOW|STYLE)\s*(?:{SECTION_SIGN}|sections?\b|facts?\b|docs?\b)"),
    ),
    (
        "the team's design notes outside the repository",
        re.compile(rf"(?i)\bthe {NOTE_NAMES} (?:doc|docs|document|documents|notes)\b"),
    ),
    ("a session folder outside the repository", re.compile(r"(?<![\w.~-])/tmp/s\d+/")),
    (
        "a document at an absolute path outside the repository",
        re.compile(r"(?<![\w.~-])/(?:tmp|work|home|Users)/[^\s`'\"()<>]*\.(?:md|txt|rst)\b"),
    ),
)
# The folder beside the checkout, written as a path or joined as one; ``rest`` is the folder in it.
BESIDE = (
    re.compile(r"\.\./shared\b(?:/(?P<rest>[\w.-]+))?"),
    re.compile(r"/\s*[\"']shared[\"'](?:\s*/\s*[\"'](?P<rest>[\w.-]+)[\"'])?"),
)
ON_THE_TEAMS_MACHINE = re.compile(r"(?<![\w.~-])/work/\w")
DATA_FOLDERS = {"crds", "crds-trainer-v2"}
SKIPS = re.compile(r"\bpytest\.skip\(|\bskipif\(")
# How far before a section sign the document it cites must be named (a wrapped sentence).
SECTION_WINDOW = 300
MARKDOWN_FILE = re.compile(r"[\w./-]+\.md\b")
DOCS_REFERENCE = re.compile(r"(?<![\w/.-])docs/[\w./-]+\.md(?:#[\w-]+)?")


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    what: str
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}: {self.text.strip()[:140]}"


def tracked_texts(root: Path) -> dict[str, str]:
    """Every file ``git ls-files`` lists under ``root`` that exists and is UTF-8 text."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, check=True, capture_output=True
    ).stdout.decode("utf-8")
    texts = {}
    for name in filter(None, listed.split("\0")):
        path = root / name
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            texts[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return texts


def line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def is_data_read(name: str, text: str, rest: str | None) -> bool:
    """A test's read of the upstream CRD data beside the checkout, in a file that skips without it."""
    return name.startswith("tests/") and rest in DATA_FOLDERS and SKIPS.search(text) is not None


def cites_a_repository_document(root: Path, name: str, before: str) -> bool:
    """Whether the last Markdown file named in ``before`` is one of the repository's."""
    named = MARKDOWN_FILE.findall(before)
    if not named:
        return False
    document = named[-1]
    return (root / document).is_file() or (root / name).parent.joinpath(document).is_file()


def references_in(root: Path, name: str, text: str) -> list[Finding]:
    found: list[tuple[int, str]] = []
    for what, pattern in REFERENCES:
        found.extend((match.start(), what) for match in pattern.finditer(text))
    for pattern in BESIDE:
        for match in pattern.finditer(text):
            if not is_data_read(name, text, match.group("rest")):
                found.append((match.start(), "the folder beside the checkout, which a user's clone lacks"))
    found.extend(
        (match.start(), "a path on the team's machine") for match in ON_THE_TEAMS_MACHINE.finditer(text)
    )
    for match in re.finditer(SECTION_SIGN, text):
        before = text[max(0, match.start() - SECTION_WINDOW) : match.start()]
        if not cites_a_repository_document(root, name, before):
            found.append((match.start(), "a section sign that names no repository document before it"))
    lines = text.splitlines()
    findings = {
        Finding(name, line_of(text, position), what, lines[line_of(text, position) - 1])
        for position, what in found
    }
    return sorted(findings, key=lambda finding: (finding.line, finding.what))


def scan(root: Path = REPO) -> list[Finding]:
    """Every reference to a document outside the repository in ``root``'s tracked text files."""
    texts = tracked_texts(root)
    return [finding for name in sorted(texts) for finding in references_in(root, name, texts[name])]


def slug(heading: str) -> str:
    """The anchor Python-Markdown's ``toc`` gives a heading (its default ``slugify``)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: str) -> set[str]:
    """The heading anchors of a Markdown page: ``{#id}`` where given, else the slug."""
    found, fenced = set(), False
    for line in page.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        heading = None if fenced else re.match(r"#{1,6}\s+(.*?)\s*$", line)
        if heading:
            title, given = heading.group(1), re.search(r"\{:?\s*#([\w-]+)[^}]*\}\s*$", heading.group(1))
            found.add(given.group(1) if given else slug(re.sub(r"\{[^}]*\}\s*$", "", title)))
    return found


def broken_docs_references(root: Path = REPO) -> list[Finding]:
    """``docs/<page>.md[#anchor]`` references to a page or anchor that does not exist."""
    broken = []
    for name, text in sorted(tracked_texts(root).items()):
        for match in DOCS_REFERENCE.finditer(text):
            page, _, anchor = match.group().partition("#")
            target = root / page
            line = line_of(text, match.start())
            if not target.is_file():
                broken.append(Finding(name, line, f"{page} does not exist", text.splitlines()[line - 1]))
            elif anchor and anchor not in anchors(target.read_text(encoding="utf-8")):
                broken.append(Finding(name, line, f"{page} has no #{anchor}", text.splitlines()[line - 1]))
    return broken


def test_nothing_cites_a_document_outside_the_repository() -> None:
    findings = scan()
    assert not findings, (
        f"{len(findings)} reference(s) to documents outside the repository; write the fact into the "
        "repository's docs (docs/architecture.md, 'Domain facts the code relies on') and cite that:\n"
        + "\n".join(map(str, findings))
    )


def test_the_docs_pages_the_repository_names_exist() -> None:
    broken = broken_docs_references()
    assert not broken, "\n".join(map(str, broken))


def test_the_scan_finds_each_kind_of_reference(tmp_path: Path) -> None:
    """The rules above, on made-up files: each reference is found, the allowed data read is not.

    The references are assembled at run time, so that this file itself cites nothing."""
    sign, docs = SECTION_SIGN, "do" + "cs"
    notes, beside, join = "DES" + "IGN.md", ".." + "/shared", "/ " + '"shared"'
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# A page\n\n## Some facts {#facts}\n", encoding="utf-8")
    files = {
        "airflow_gang/a.py": f'"""As {notes} {sign}3 says."""\n',
        "airflow_gang/b.py": f"# (DOM{'AIN'} {sign}10)\n",
        "airflow_gang/c.py": f'"""The CRDs in ``{beside}/crds``."""\n',
        "tests/d.py": f'PATH = "{beside}/crds"\n',  # no skip in the file
        "tests/e.py": f'PATH = "{beside}/crds"\n# pytest.skip(\n',  # allowed: data, and a skip
        "tests/f.py": f'PATH = "{beside}/design"\n# pytest.skip(\n',  # not a data folder
        "tests/g.py": f"ROOT = Path(__file__).parent {join}\npytest.skip(\n",  # not a data folder
        "tests/h.py": f'"""Followed ({"/tm" + "p/s42/facts.md"} {sign}C2)."""\n',
        f"{docs}/other.md": f"See [the page](page.md) {sign}2.\n\nAnd (deploy/README.md {sign}3b).\n",
        "airflow_gang/i.py": f'"""See {docs}/page.md#facts, {docs}/page.md#nothing, {docs}/gone.md."""\n',
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    findings = scan(tmp_path)
    found = {(finding.path, finding.what) for finding in findings}
    assert {path for path, _ in found} == {
        "airflow_gang/a.py",
        "airflow_gang/b.py",
        "airflow_gang/c.py",
        "tests/d.py",
        "tests/f.py",
        "tests/g.py",
        "tests/h.py",
        f"{docs}/other.md",
    }, sorted(found)
    assert ("airflow_gang/a.py", "a design note outside the repository") in found
    assert ("tests/h.py", "a session folder outside the repository") in found
    # The first section sign cites page.md, a page of this made-up repository; the second cites
    # deploy/README.md, which it does not have.
    assert {finding.line for finding in findings if finding.path == f"{docs}/other.md"} == {3}
    broken = {finding.what for finding in broken_docs_references(tmp_path)}
    assert broken == {f"{docs}/page.md has no #nothing", f"{docs}/gone.md does not exist"}
