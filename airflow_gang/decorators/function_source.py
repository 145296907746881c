"""The source of a ``@task.pytorchjob`` function, as the replicas get it, checked at DAG parse time.

The replicas see the function's own text and nothing of its DAG file: its ``def`` statement,
dedented, without decorators. So every name the function uses must be a builtin, an argument,
or something it imports or defines itself; `FunctionSource.of` refuses one that reads a global
of its module, a variable of an enclosing function, or a default value computed from either,
naming them, while the DAG is parsed rather than when a replica raises ``NameError``.
"""

from __future__ import annotations

import ast
import builtins
import dis
import inspect
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from airflow_gang.decorators.replica_bootstrap import BOOTSTRAP_MIN_PYTHON
from airflow_gang.exceptions import GangSpecError

PythonVersion = tuple[int, int]
# The exec namespace of a replica defines these besides the function itself.
_REPLICA_GLOBALS = frozenset(dir(builtins)) | {"__name__", "__builtins__"}


@dataclass(frozen=True)
class FunctionSource:
    """The function's ``def`` statement, where it came from, and the Python its syntax needs."""

    name: str
    text: str
    filename: str
    first_line: int
    min_python: PythonVersion

    @classmethod
    def of(cls, function: Callable[..., Any], decorator: str = "@task.pytorchjob") -> FunctionSource:
        """Extract and check; `GangSpecError` names what the replicas could not run and the fix.

        :param decorator: the decorator the user wrote (``@task.trainjob``...), named in the errors.
        """
        name = getattr(function, "__name__", repr(function))
        if not isinstance(function, types.FunctionType):
            raise GangSpecError(
                f"{decorator} needs a function defined with def, not {type(function).__name__} {name!r}",
                field="python_callable",
            )
        if inspect.iscoroutinefunction(function):
            raise GangSpecError(
                f"{name}() is async: {decorator} calls the function directly on each replica; "
                "define it with def",
                field="python_callable",
            )
        try:
            lines, start = inspect.getsourcelines(function)
        except (OSError, TypeError) as error:
            raise GangSpecError(
                f"cannot read the source of {name}() ({error}): {decorator} ships the function's "
                "source to the replicas, so define it in a .py file",
                field="python_callable",
            ) from None
        text, node = _def_statement(lines, name, decorator)
        unresolved = sorted(_names_from_outside(function, node))
        if unresolved:
            raise GangSpecError(
                f"{name}() uses {', '.join(unresolved)} from outside the function, which the replicas "
                "will not have: only the function's own source runs there, without its DAG file. "
                "Import modules inside the function and pass values as arguments",
                field="python_callable",
            )
        return cls(
            name=name,
            text=text,
            filename=inspect.getsourcefile(function) or f"<{name}>",
            first_line=start + node.lineno - 1,
            min_python=max(BOOTSTRAP_MIN_PYTHON, syntax_min_python(text)),
        )


def _def_statement(lines: list[str], name: str, decorator: str) -> tuple[str, ast.FunctionDef]:
    """The ``def`` statement without its decorators, dedented by the ``def``'s own indentation.

    Lines indented less than that (inside a multi-line string) are kept as they are.
    """
    indent = lines[0][: len(lines[0]) - len(lines[0].lstrip())]
    dedented = [
        line[len(indent) :] if line.startswith(indent) else ("\n" if not line.strip() else line)
        for line in lines
    ]
    try:
        tree = ast.parse("".join(dedented))
    except SyntaxError as error:
        raise GangSpecError(
            f"the source of {name}() does not parse on its own ({error.msg}, line {error.lineno})",
            field="python_callable",
        ) from None
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef) or node.name != name:
        raise GangSpecError(
            f"{decorator} needs a function defined with def; {name} is not one (a lambda?)",
            field="python_callable",
        )
    end = node.end_lineno or len(dedented)
    return "".join(dedented[node.lineno - 1 : end]), node


def _names_from_outside(function: types.FunctionType, node: ast.FunctionDef) -> set[str]:
    code = function.__code__
    loaded, stored = set(), set()
    for each in _code_objects(code):
        for instruction in dis.get_instructions(each):
            if instruction.opname == "LOAD_GLOBAL":
                loaded.add(str(instruction.argval))
            elif instruction.opname in ("STORE_GLOBAL", "DELETE_GLOBAL"):
                stored.add(str(instruction.argval))
    defaults = [*node.args.defaults, *(value for value in node.args.kw_defaults if value is not None)]
    for default in defaults:
        loaded |= {
            found.id for found in ast.walk(default) if isinstance(found, ast.Name) and found.id != node.name
        }
    outside = loaded - stored - _REPLICA_GLOBALS - {node.name}
    return outside | set(code.co_freevars)


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    """The function's code and that of everything defined inside it (comprehensions, inner defs)."""
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _code_objects(constant)


def syntax_min_python(source: str) -> PythonVersion:
    """The oldest Python 3 whose grammar accepts ``source`` (``ast``'s best effort, from 3.7 up).

    ``match`` needs 3.10, ``except*`` 3.11, ``def f[T]()`` 3.12: an older replica then fails with
    a clear message from the entry program instead of a ``SyntaxError``.
    """
    for minor in range(7, sys.version_info.minor + 1):
        try:
            ast.parse(source, feature_version=(3, minor))
        except SyntaxError:
            continue
        return 3, minor
    return sys.version_info.major, sys.version_info.minor
