"""The page's shell and files, without a browser: the default timezone from Airflow's own
``[core] default_timezone``, the strict CSP kept (no inline style or script), one palette per
theme holding every colour, and words that name no single job kind."""

from __future__ import annotations

import re

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from airflow_gang.plugins.pages import CONTENT_SECURITY_POLICY, STATIC_DIR, pages_router, render_page
from airflow_gang.plugins.settings import UiSettings, load_settings, ui_timezone


@pytest.mark.parametrize(
    ("configured", "expected"),
    [
        ("utc", "UTC"),
        ("UTC", "UTC"),
        ("", "UTC"),
        (None, "UTC"),
        ("system", "system"),
        ("System", "system"),
        (" Europe/Paris ", "Europe/Paris"),
        ("America/Argentina/Buenos_Aires", "America/Argentina/Buenos_Aires"),
    ],
)
def test_default_timezone_values(configured: str | None, expected: str) -> None:
    assert ui_timezone(configured) == expected


def test_load_settings_reads_airflows_default_timezone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW__CORE__DEFAULT_TIMEZONE", raising=False)
    assert load_settings().timezone == "UTC"  # Airflow's own default: utc
    monkeypatch.setenv("AIRFLOW__CORE__DEFAULT_TIMEZONE", "Asia/Tokyo")
    assert load_settings().timezone == "Asia/Tokyo"
    monkeypatch.setenv("AIRFLOW__CORE__DEFAULT_TIMEZONE", "system")
    assert load_settings().timezone == "system"


def pages(settings: UiSettings | None) -> TestClient:
    app = FastAPI()
    app.include_router(pages_router(None if settings is None else lambda: settings))
    return TestClient(app)


def test_the_shell_carries_the_default_timezone_escaped() -> None:
    page = pages(UiSettings(timezone="Europe/Paris")).get("/")
    assert page.status_code == 200
    assert 'data-timezone="Europe/Paris"' in page.text
    assert page.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    job = pages(UiSettings(timezone="system")).get("/jobs/default/train")
    assert 'data-timezone="system"' in job.text
    assert 'data-timezone="UTC"' in pages(None).get("/").text
    hostile = render_page("", "jobs", timezone='"><script>alert(1)</script>')
    assert "<script>alert(1)" not in hostile
    assert 'data-timezone="&quot;&gt;&lt;script&gt;' in hostile
    assert "{{" not in render_page("/gang", "job", "default", "train", "Asia/Kolkata")


def test_a_broken_settings_loader_still_serves_the_page_in_utc() -> None:
    def broken() -> UiSettings:
        raise RuntimeError("no config")

    app = FastAPI()
    app.include_router(pages_router(broken))
    page = TestClient(app).get("/")
    assert page.status_code == 200
    assert 'data-timezone="UTC"' in page.text


def read(name: str) -> str:
    return (STATIC_DIR / name).read_text(encoding="utf-8")


def test_the_csp_stays_strict_no_inline_style_or_script() -> None:
    assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY
    shell = read("page.html")
    assert not re.search(r"\sstyle\s*=", shell), "inline style attribute"
    assert "<style" not in shell
    for script in re.findall(r"<script[^>]*>", shell):
        assert "src=" in script, script
    assert not re.search(r"<script[^>]*>\s*[^<\s]", shell), "inline script"
    assert not re.search(r"\son[a-z]+\s*=", shell), "inline event handler"
    for name in ("gang.js", "theme.js"):
        code = read(name)
        assert ".style." not in code
        assert 'setAttribute("style"' not in code
        assert "innerHTML" not in code


# A colour literal in CSS: #abc, #aabbcc, rgb(...), hsl(...), oklch(...).
COLOUR = re.compile(r"#[0-9a-fA-F]{3,8}\b|\b(?:rgba?|hsla?|oklch|lab|lch)\(")


def test_every_colour_comes_from_the_two_palettes() -> None:
    css = re.sub(r"/\*.*?\*/", "", read("gang.css"), flags=re.DOTALL)
    blocks = re.findall(r"([^{}]+)\{([^{}]*)\}", css)
    palettes = {selector.strip(): body for selector, body in blocks if re.search(r"--fg\s*:", body)}
    assert set(palettes) == {':root,\n:root[data-theme="light"]', ':root[data-theme="dark"]'}
    names = [set(re.findall(r"(--[\w-]+)\s*:", body)) for body in palettes.values()]
    assert names[0] == names[1], names[0] ^ names[1]  # every variable in both palettes
    for selector, body in blocks:
        if selector.strip() in palettes:
            continue
        assert not COLOUR.search(body), f"a colour outside the palettes: {selector.strip()} {{{body}}}"
    assert "color-scheme: light" in palettes[':root,\n:root[data-theme="light"]']
    assert "color-scheme: dark" in palettes[':root[data-theme="dark"]']
    # The charts draw with classes only (their colours in the CSS above), none of their own.
    code = read("gang.js")
    assert not COLOUR.search(re.sub(r"//.*", "", code)), "a colour in gang.js"
    assert not re.search(r'"(fill|stroke|stop-color)"\s*:', code)


def test_words_name_no_single_job_kind() -> None:
    assert "PyTorchJob" not in read("page.html")
    for number, line in enumerate(read("gang.js").splitlines(), 1):
        if "PyTorchJob" not in line or line.strip().startswith("//"):
            continue
        # The only use left: a PyTorchJob's page keeps its plain address (no ?kind=).
        assert 'kind !== "PyTorchJob"' in line, f"gang.js:{number}: {line.strip()}"


def test_gang_js_reads_no_key_of_airflows_own_ui() -> None:
    code = read("gang.js")
    assert "airflow-gang.timezone" in code
    assert not re.search(r"localStorage\.getItem\(\s*[\"']timezone[\"']", code)
