"""A job kind is data in one place (issue 35): outside `airflow_gang.kinds`, no module of the
provider tells the kinds apart by identity, nor spells a kind's name.

What the check looks for, with the standard library's `ast` (docstrings and comments are prose
and may name kinds):

- a comparison with a kind constant (``job_kind is PYTORCHJOB``, ``kind == TRAINJOB``...);
- a string literal that is a registered kind's name, lower-case name, plural or API group
  (``"PyTorchJob"``, ``"trainjob"``, ``"pytorchjobs"``, ``"kubeflow.org"``), e.g. in a
  ``Literal[...]`` alias or a lookup table keyed by kind.

The one literal allowed is listed in `ALLOWED` with the reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import airflow_gang
from airflow_gang.kinds import JOB_KINDS

PACKAGE = Path(airflow_gang.__file__).resolve().parent
KIND_CONSTANTS = {"PYTORCHJOB", "TRAINJOB", "VCJOB"}
# Words that name a kind only together with its group: Volcano's Job is served as ``jobs``, the
# plural of batch/v1's Job too and the page API's word for its list of rows.
SHARED_WORDS = {"jobs"}
KIND_WORDS = {
    word
    for job_kind in JOB_KINDS.values()
    for word in (job_kind.kind, job_kind.wire_kind, job_kind.watch_name, job_kind.plural, job_kind.group)
} - SHARED_WORDS
# (module, literal): why it stays.
ALLOWED = {
    ("state/reaper.py", "pytorchjob"): "the task state store key every try has written its job under since "
    "0.1, for any kind: renaming it would hide running jobs from the orphan reaper",
}


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the string nodes that are docstrings."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def kind_references(source: str) -> list[str]:
    """What in ``source`` tells kinds apart by identity (see the module docstring), in words."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            named = [o.id for o in operands if isinstance(o, ast.Name) and o.id in KIND_CONSTANTS]
            if named:
                found.append(f"line {node.lineno}: compares with {named[0]}")
        elif isinstance(node, ast.Constant) and node.value in KIND_WORDS and id(node) not in docstrings:
            found.append(f"line {node.lineno}: the literal {node.value!r}")
    return found


def offenders() -> dict[str, list[str]]:
    result = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module.startswith("kinds/"):
            continue
        refs = [
            ref
            for ref in kind_references(path.read_text(encoding="utf-8"))
            if not any(module == allowed and repr(word) in ref for allowed, word in ALLOWED)
        ]
        if refs:
            result[module] = refs
    return result


def test_no_module_outside_kinds_tells_the_kinds_apart() -> None:
    assert offenders() == {}, (
        "a kind's behaviour belongs to its JobKind (airflow_gang/kinds/): move these into a JobKind "
        "field or method"
    )


def test_the_check_finds_a_branch_on_a_kind_and_a_kind_literal() -> None:
    branch = (
        'def f(job_kind):\n'
        '    """Says PyTorchJob in prose."""\n'
        '    return 1 if job_kind is PYTORCHJOB else 2\n'
    )
    literal = 'from typing import Literal\nWatchKind = Literal["pytorchjob", "podgroup"]\n'
    assert kind_references(branch) == ["line 3: compares with PYTORCHJOB"]
    assert kind_references(literal) == ["line 2: the literal 'pytorchjob'"]
    assert kind_references('"""PyTorchJob and TrainJob, in prose."""\n') == []
