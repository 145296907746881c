"""The docs' screenshots come from the browser tests, not from someone's screen.

A browser test saves a screenshot for the docs with ``docs_screenshot(browser, tmp_path,
"<name>.png")`` (tests/plugins/conftest.py), which writes to ``$GANG_SCREENSHOTS_DIR`` when
``make screenshots`` sets it to docs/screenshots. This module reads those calls from the test
sources (no list kept by hand) and checks that:

- every raster image a docs page or the README shows is one of those files, and exists;
- every file in docs/screenshots is written by one of them (no stray, hand-made image);
- ``make screenshots`` runs every test module that writes one.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
SCREENSHOTS = REPO / "docs" / "screenshots"
SAVER = "docs_screenshot"
RASTER = (".png", ".jpg", ".jpeg", ".gif", ".webp")
# ![alt](path "title"), [text](path) and <img src="path">: every target that names an image file.
MARKDOWN_TARGET = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_IMG = re.compile(r"<img\b[^>]*\bsrc=[\"']([^\"']+)[\"']", re.IGNORECASE)
IMAGE = re.compile(r"\.(png|jpe?g|gif|webp|svg)$", re.IGNORECASE)


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def screenshot_calls(source: str) -> list[tuple[str, ast.Call]]:
    """The ``docs_screenshot(...)`` calls in a module's source (its definition is not a call),
    each with the name of the function it is in."""
    found = []
    for function in ast.walk(ast.parse(source)):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and _called_name(node) == SAVER:
                    found.append((function.name, node))
    return found


def file_name_of(call: ast.Call) -> str | None:
    """The file a ``docs_screenshot(browser, tmp_path, "x.png")`` call writes, when written out."""
    argument = (
        call.args[2]
        if len(call.args) >= 3
        else next((keyword.value for keyword in call.keywords if keyword.arg == "name"), None)
    )
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return argument.value
    return None


def written_by_browser_tests() -> dict[str, tuple[Path, str]]:
    """Every docs screenshot a test writes -> the test module and the test that write it."""
    written: dict[str, tuple[Path, str]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        if path.resolve() == Path(__file__).resolve():
            continue
        text = path.read_text(encoding="utf-8")
        if SAVER not in text:
            continue
        for function, call in screenshot_calls(text):
            name = file_name_of(call)
            assert name is not None, (
                f"{path.relative_to(REPO)}:{call.lineno}: {SAVER}() must name its file as a string "
                "literal, so the docs' screenshots can be read from the tests"
            )
            assert name not in written, f"{name} is written by two tests: {written[name]}, {function}"
            written[name] = (path, function)
    return written


def image_targets(text: str) -> list[str]:
    """The image files a Markdown text links or shows (local ones: no URL, no anchor)."""
    targets = MARKDOWN_TARGET.findall(text) + HTML_IMG.findall(text)
    local = (target.split("#")[0] for target in targets if "://" not in target)
    return [target for target in local if IMAGE.search(target)]


def referenced_images() -> dict[Path, list[str]]:
    """Every image a docs page or the README references, resolved -> where it is referenced."""
    found: dict[Path, list[str]] = {}
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    for page in pages:
        if not page.exists():
            continue
        for target in image_targets(page.read_text(encoding="utf-8")):
            resolved = (page.parent / target).resolve()
            found.setdefault(resolved, []).append(str(page.relative_to(REPO)))
    return found


def screenshots_recipe() -> str:
    """The commands of the Makefile's ``screenshots`` target."""
    lines = (REPO / "Makefile").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("screenshots:"))
    recipe = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line)
    return "\n".join(recipe)


# -- the reading itself -------------------------------------------------------------------------


def test_the_names_are_read_from_the_calls_in_a_test_source() -> None:
    source = """
def docs_screenshot(browser, tmp_path, name): ...

def test_page(browser, tmp_path):
    docs_screenshot(browser, tmp_path, "page-light.png")
    helpers.docs_screenshot(browser, tmp_path, name="page-dark.png")
    browser.save_screenshot(str(tmp_path / "not-for-the-docs.png"))
"""
    found = [(function, file_name_of(call)) for function, call in screenshot_calls(source)]
    assert found == [("test_page", "page-light.png"), ("test_page", "page-dark.png")]
    ((_, computed),) = screenshot_calls("def test_x():\n    docs_screenshot(b, t, f'{key}.png')\n")
    assert file_name_of(computed) is None


def test_image_targets_are_found_in_markdown_and_html() -> None:
    text = (
        '![The jobs page](../screenshots/a.png "light") and [dark](../screenshots/b.png), '
        '<img src="../screenshots/c.webp" alt="">, [a page](other.md#a.png-like-anchor), '
        "[remote](https://example.com/d.png)"
    )
    assert image_targets(text) == ["../screenshots/a.png", "../screenshots/b.png", "../screenshots/c.webp"]


# -- the docs -----------------------------------------------------------------------------------


def test_the_browser_tests_write_the_docs_screenshots() -> None:
    written = written_by_browser_tests()
    assert written, f"no test calls {SAVER}()"
    assert all(name.endswith(".png") for name in written), sorted(written)


def test_every_image_the_docs_show_exists_and_is_written_by_a_browser_test() -> None:
    written = written_by_browser_tests()
    problems = []
    for image, pages in sorted(referenced_images().items()):
        where = ", ".join(sorted(set(pages)))
        if not image.exists():
            problems.append(f"{where}: {image.relative_to(REPO)} does not exist")
        elif image.suffix.lower() in RASTER and (image.parent != SCREENSHOTS or image.name not in written):
            problems.append(
                f"{where}: {image.relative_to(REPO)} is not a screenshot a browser test writes "
                f"(docs/screenshots/ + one of {sorted(written)})"
            )
    assert not problems, "\n".join(problems)


def test_every_file_in_docs_screenshots_is_written_by_a_browser_test() -> None:
    written = written_by_browser_tests()
    stray = sorted(path.name for path in SCREENSHOTS.iterdir() if path.name not in written)
    assert not stray, (
        f"docs/screenshots has files no browser test writes: {stray}; take them with "
        f"{SAVER}(...) in a browser test and run make screenshots, or delete them"
    )
    missing = sorted(set(written) - {path.name for path in SCREENSHOTS.iterdir()})
    assert not missing, f"written by the browser tests but not committed (run make screenshots): {missing}"


def test_make_screenshots_runs_every_test_that_writes_one() -> None:
    recipe = screenshots_recipe()
    for name, (path, function) in sorted(written_by_browser_tests().items()):
        module = str(path.relative_to(REPO))
        commands = [line for line in recipe.splitlines() if module in line]
        assert commands, f"make screenshots does not run {module} (which writes {name}):\n{recipe}"
        for command in commands:
            assert "GANG_SCREENSHOTS_DIR=docs/screenshots" in command, command
            selected = re.search(r"-k\s+(\S+)", command)
            assert selected is None or selected.group(1).strip("'\"") in function, (
                f"make screenshots runs {module} with {selected.group(0) if selected else ''}, "
                f"which leaves out {function} (it writes {name})"
            )
