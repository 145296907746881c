"""The package's import graph has no cycles (import-linter's contracts state its layers)."""

from __future__ import annotations

import grimp


def test_no_module_of_airflow_gang_imports_itself_back() -> None:
    graph = grimp.build_graph("airflow_gang")
    cycles = sorted(
        {
            tuple(sorted((module, imported)))
            for module in graph.modules
            for imported in graph.find_modules_directly_imported_by(module)
            if graph.chain_exists(importer=imported, imported=module)
        }
    )
    assert cycles == [], f"import cycles (each pair reaches the other): {cycles}"
