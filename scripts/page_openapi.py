"""Write the OpenAPI document of the Gang jobs page's JSON API to ``docs/page-api/openapi.json``.

    .venv/bin/python scripts/page_openapi.py             # regenerate the committed snapshot
    .venv/bin/python scripts/page_openapi.py --output -  # print it instead

The document is the plugin app's own (`airflow_gang.plugins.app.create_app`; Airflow's API server
serves it at ``/gang/api/openapi.json``), made without Airflow's authentication: with it, the
document would also carry Airflow's security schemes, which are Airflow's, not the page's.
``tests/plugins/test_api_contract.py`` fails when the snapshot no longer matches the code.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).resolve().parents[1] / "docs" / "page-api" / "openapi.json"


def document() -> dict[str, Any]:
    """The app's OpenAPI document, as FastAPI makes it."""
    from airflow_gang.plugins.app import create_app

    return create_app(authenticate=False).openapi()


def render(openapi: dict[str, Any]) -> str:
    """Stable text: sorted keys, two-space indent, a trailing newline."""
    return json.dumps(openapi, sort_keys=True, indent=2) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--output", default=str(SNAPSHOT), help="file to write; - for standard output")
    args = parser.parse_args()
    text = render(document())
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text)
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
