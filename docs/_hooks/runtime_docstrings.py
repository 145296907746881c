"""A griffe extension for the reference pages: the docstrings the provider composes at import time.

Each concrete operator and sensor sets its class docstring in its class body as its own
parameters plus a shared text (``__doc__ = "..." + SHARED_PARAMETERS``, see
`airflow_gang.operators.gang_job` and `airflow_gang.sensors.base`), so that ``help()`` and Airflow
show every parameter in one place. Reading the source alone, griffe sees an assignment and no
docstring. For such classes this extension imports the class and takes its ``__doc__`` as Python
built it.

The shared parameters reach the class through ``**kwargs`` (``PyTorchJobOperator(...,
admission_timeout=600)`` goes on to `GangJobOperator`), so the class's own ``__init__`` does not
name them, and griffe would warn that a documented parameter is not in the signature. The
extension therefore adds to the class's ``__init__`` signature, before ``**kwargs``, each
parameter that the class docstring documents and that a base class of the provider takes by
name: the signature shown is the one a DAG author can call, with each parameter's type and
default from the class that declares it.

Used by the ``:::`` blocks of ``docs/reference/*.md`` (``options: extensions``).
"""

from __future__ import annotations

import copy
import importlib
import inspect
import re
from typing import Any

import griffe

PACKAGE = "airflow_gang"
DOCUMENTED_PARAMETER = re.compile(r"^\s*:param\s+(?:[^:\s]+\s+)?(\w+)\s*:", re.MULTILINE)


def _runtime_class(cls: griffe.Class) -> Any:
    """The class object itself, imported by its module and its path inside it."""
    target: Any = importlib.import_module(cls.module.path)
    for name in cls.path[len(cls.module.path) + 1 :].split("."):
        target = getattr(target, name)
    return target


def _own_init(cls: griffe.Class) -> griffe.Function | None:
    init = cls.members.get("__init__")
    return init if isinstance(init, griffe.Function) else None


class RuntimeDocstrings(griffe.Extension):
    """Runtime class docstrings and the parameters taken through ``**kwargs``, for ``airflow_gang``."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.path != PACKAGE:
            return
        classes = list(self._classes(pkg))
        for cls in classes:
            self._take_runtime_docstring(cls, loader)
        for cls in classes:
            self._add_inherited_parameters(cls)

    def _classes(self, module: griffe.Module) -> Any:
        for member in module.members.values():
            if member.is_alias:
                continue
            if isinstance(member, griffe.Module):
                yield from self._classes(member)
            elif isinstance(member, griffe.Class):
                yield member

    def _take_runtime_docstring(self, cls: griffe.Class, loader: griffe.GriffeLoader) -> None:
        assigned = cls.members.get("__doc__")
        if cls.docstring is not None or assigned is None:
            return
        text = inspect.getdoc(_runtime_class(cls))
        if not text:
            return
        cls.docstring = griffe.Docstring(
            text,
            lineno=assigned.lineno,
            endlineno=assigned.endlineno,
            parent=cls,
            parser=loader.docstring_parser,
            parser_options=loader.docstring_options,
        )
        # The assignment is how the docstring is made, not an attribute for the page.
        del cls.members["__doc__"]

    def _add_inherited_parameters(self, cls: griffe.Class) -> None:
        init = _own_init(cls)
        if init is None or cls.docstring is None:
            return
        parameters = init.parameters
        var_keyword = next((p for p in parameters if p.kind is griffe.ParameterKind.var_keyword), None)
        if var_keyword is None:
            return
        documented = DOCUMENTED_PARAMETER.findall(cls.docstring.value)
        missing = [name for name in documented if name not in parameters and name != var_keyword.name]
        if not missing:
            return
        del parameters[var_keyword.name]
        for name in missing:
            declared = self._declared_by_base(cls, name)
            if declared is not None:
                parameters.add(declared)
        parameters.add(var_keyword)

    def _declared_by_base(self, cls: griffe.Class, name: str) -> griffe.Parameter | None:
        """A copy of the first base's (MRO order) ``__init__`` parameter ``name``, if a base of the
        provider declares it by name (Airflow's own classes are not loaded: they document theirs)."""
        for base in cls.mro():
            init = _own_init(base)
            if init is None or name not in init.parameters:
                continue
            parameter = init.parameters[name]
            if parameter.kind in (griffe.ParameterKind.var_positional, griffe.ParameterKind.var_keyword):
                continue
            inherited = copy.copy(parameter)
            inherited.kind = griffe.ParameterKind.keyword_only
            inherited.function = _own_init(cls)
            return inherited
        return None
