"""No module of the provider grows past 400 lines (issue 22): one job per module, or split it."""

from __future__ import annotations

from pathlib import Path

import airflow_gang

LIMIT = 400
PACKAGE = Path(airflow_gang.__file__).resolve().parent


def test_no_provider_module_is_over_400_lines() -> None:
    sizes = {
        str(path.relative_to(PACKAGE.parent)): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    assert sizes, "no modules found"
    over = {name: lines for name, lines in sizes.items() if lines > LIMIT}
    assert over == {}, f"split these modules (over {LIMIT} lines): {over}"
