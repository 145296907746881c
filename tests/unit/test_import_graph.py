"""No import cycles in any of the repository's packages (import-linter's contracts state the layers
and which packages may import which)."""

from __future__ import annotations

import grimp
import pytest


@pytest.mark.parametrize("package", ["airflow_gang", "gang_sim", "gang_stack"])
def test_no_module_imports_itself_back(package: str) -> None:
    graph = grimp.build_graph(package)
    cycles = sorted(
        {
            tuple(sorted((module, imported)))
            for module in graph.modules
            for imported in graph.find_modules_directly_imported_by(module)
            if graph.chain_exists(importer=imported, imported=module)
        }
    )
    assert cycles == [], f"import cycles (each pair reaches the other): {cycles}"
