"""Every message the provider raises or logs, read from its source with `ast` (nothing is imported).

A *message site* is one place in ``airflow_gang/`` that puts text in front of a user:

- an exception constructed with a message: ``raise X("...")``, ``error = X(f"...")``, including
  through a function that only passes its argument on to an exception (``validation.error(msg)``)
  or a name bound to an exception class (``failed = job_kind.failure_error``);
- a logging call at WARNING or above (``warning``, ``error``, ``exception``, ``critical``);
- ``warnings.warn(...)``;
- a ``("warning", text)`` pair, which the disruption reports hand to their line writers;
- a warning the Gang jobs page shows (``warnings.append(text)``);
- text written to stderr (``print(..., file=sys.stderr)``, ``sys.stderr.write``, and the replica
  bootstrap's `MESSAGE_FUNCTIONS`).

Each site's message is resolved into *templates*: the literal text with a placeholder (None) for
everything computed at run time. String constants, f-strings (their literal parts), ``%``- and
``str.format`` strings, ``+`` concatenation, conditional expressions, local names assigned in the
same function, module constants (also imported ones) and calls to the package's own functions
that return a string are followed; anything else is a placeholder. A site whose message cannot be
resolved at all (an attribute such as ``self.message``, a parameter) is *unresolved*.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

Part = str | None  # literal text, or None for a value computed at run time
Template = tuple[Part, ...]

LOG_LEVELS = frozenset({"warning", "error", "exception", "critical", "fatal"})
LINE_LEVELS = frozenset({"warning", "error", "critical"})
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[sdifrxXeEgGcoa%]")
_FORMAT_FIELD = re.compile(r"\{[^{}]*\}")
_WORD = re.compile(r"[A-Za-z]{2,}")
_MAX_DEPTH = 8
# Functions whose argument is a message a user reads: the replica bootstrap's error block.
MESSAGE_FUNCTIONS = {"report_error": 0}
# Exceptions whose argument is not a message (an exit status, a value).
_NOT_MESSAGES = frozenset({"SystemExit", "StopIteration", "StopAsyncIteration", "GeneratorExit"})


@dataclass(frozen=True)
class Site:
    """One place that raises or logs a message."""

    path: str  # relative to the repository, e.g. airflow_gang/jobs/observation.py
    line: int
    function: str  # the enclosing function's qualified name ("" at module level)
    source: str  # "raise", "exception", "log", "warnings.warn", "line"
    exception: str | None  # the exception class, for "raise"/"exception" sites
    templates: tuple[Template, ...]  # empty: unresolved
    expression: str  # the message expression as written

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def checkable(self) -> tuple[Template, ...]:
        """The templates with words of their own (``<...> (<...>)`` says nothing to look for)."""
        return tuple(t for t in self.templates if _WORD.search(" ".join(literals(t))))

    @property
    def resolved(self) -> bool:
        return bool(self.checkable)


@dataclass
class _Module:
    name: str  # airflow_gang.jobs.observation
    path: Path
    tree: ast.Module
    constants: dict[str, ast.expr] = field(default_factory=dict)
    functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = field(default_factory=dict)
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # alias -> (module, name)


@dataclass(frozen=True)
class _Context:
    module: _Module
    function: ast.FunctionDef | ast.AsyncFunctionDef | None
    before: int  # only assignments before this line count


class Catalog:
    """The provider's exception classes and message sites."""

    def __init__(self, package: Path) -> None:
        self.package = package
        self.root = package.parent
        self.modules: dict[str, _Module] = {}
        for path in sorted(package.rglob("*.py")):
            relative = path.relative_to(self.root).with_suffix("")
            parts = list(relative.parts)
            if parts[-1] == "__init__":
                parts.pop()
            module = _Module(".".join(parts), path, ast.parse(path.read_text(encoding="utf-8")))
            self.modules[module.name] = module
            self._index(module)
        self.exception_classes = self._exception_classes()
        self.provider_exceptions = {
            name: where for name, where in self._class_defs().items() if name in self.exception_classes
        }
        self._message_index = self._message_indexes()
        self._class_valued = self._class_valued_attributes()
        self.factories = self._factories()
        self.sites: list[Site] = []
        for module in self.modules.values():
            self.sites.extend(self._sites(module))
        self.sites.sort(key=lambda site: (site.path, site.line))

    # --- indexing -----------------------------------------------------------------------------

    def _index(self, module: _Module) -> None:
        for node in module.tree.body:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        module.constants[target.id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
                module.constants[node.target.id] = node.value
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    module.imports[alias.asname or alias.name] = (node.module, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    module.imports[alias.asname or alias.name.split(".")[0]] = (alias.name, None)
        for inner in ast.walk(module.tree):
            if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                module.functions.setdefault(inner.name, []).append(inner)
            elif isinstance(inner, ast.ImportFrom) and inner.module:  # imports inside functions too
                for alias in inner.names:
                    module.imports.setdefault(alias.asname or alias.name, (inner.module, alias.name))

    def _class_defs(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for module in self.modules.values():
            for node in ast.walk(module.tree):
                if isinstance(node, ast.ClassDef):
                    found[node.name] = f"{self._relative(module)}:{node.lineno}"
        return found

    def _exception_classes(self) -> set[str]:
        known = {
            name
            for name in dir(builtins)
            if isinstance(getattr(builtins, name), type)
            and issubclass(getattr(builtins, name), BaseException)
        }
        for module in self.modules.values():  # what the package imports from an exceptions module
            for alias, (origin, name) in module.imports.items():
                if name is not None and "exception" in origin.lower():
                    known.add(alias)
        bases: dict[str, list[str]] = {}
        for module in self.modules.values():
            for node in ast.walk(module.tree):
                if isinstance(node, ast.ClassDef):
                    bases[node.name] = [_terminal(base) for base in node.bases]
        changed = True
        while changed:
            changed = False
            for name, parents in bases.items():
                if name not in known and any(parent in known for parent in parents):
                    known.add(name)
                    changed = True
        return known

    def _message_indexes(self) -> dict[str, int]:
        """Where each provider exception class takes its message (``PageError(status, kind, message)``)."""
        indexes: dict[str, int] = {}
        bases: dict[str, list[str]] = {}
        for module in self.modules.values():
            for node in ast.walk(module.tree):
                if not isinstance(node, ast.ClassDef) or node.name not in self.exception_classes:
                    continue
                bases[node.name] = [_terminal(base) for base in node.bases]
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                        names = [arg.arg for arg in item.args.posonlyargs + item.args.args][1:]
                        for candidate in ("message", "msg", "text", "detail"):
                            if candidate in names:
                                indexes[node.name] = names.index(candidate)
        for name in bases:  # a subclass without __init__ takes its message where its base does
            seen = name
            while seen not in indexes and bases.get(seen):
                seen = bases[seen][0]
            indexes.setdefault(name, indexes.get(seen, 0))
        return indexes

    def _class_valued_attributes(self) -> dict[str, str]:
        """Functions and properties that answer an exception class (``-> type[PyTorchJobFailed]``),
        with the class."""
        found: dict[str, str] = {}
        for module in self.modules.values():
            for name, defs in module.functions.items():
                for node in defs:
                    returns = node.returns
                    if (
                        isinstance(returns, ast.Subscript)
                        and _terminal(returns.value) == "type"
                        and _terminal(returns.slice) in self.exception_classes
                    ):
                        found[name] = _terminal(returns.slice)
        return found

    def _factories(self) -> dict[tuple[str, str], tuple[int, str]]:
        """Functions that pass one of their parameters on as an exception's message.

        ``(module, function) -> (the parameter's position, the exception class)``.
        """
        found: dict[tuple[str, str], tuple[int, str]] = {}
        for module in self.modules.values():
            for name, defs in module.functions.items():
                for node in defs:
                    params = [arg.arg for arg in node.args.posonlyargs + node.args.args]
                    if params and params[0] in ("self", "cls"):
                        params = params[1:]
                    for inner in ast.walk(node):
                        if not isinstance(inner, ast.Call):
                            continue
                        exception = self._exception_of(inner, _Context(module, node, inner.lineno))
                        message = self._message_arg(inner, exception) if exception else None
                        if isinstance(message, ast.Name) and message.id in params:
                            found[(module.name, name)] = (params.index(message.id), exception or "")
        return found

    # --- sites --------------------------------------------------------------------------------

    def _sites(self, module: _Module) -> Iterator[Site]:
        for function, qualname, node in _walk_with_function(module.tree):
            context = _Context(module, function, getattr(node, "lineno", 0))
            if isinstance(node, ast.Call):
                yield from self._call_sites(module, qualname, node, context)
            elif isinstance(node, ast.Tuple) and len(node.elts) == 2:
                level, text = node.elts
                if isinstance(level, ast.Constant) and level.value in LINE_LEVELS:
                    yield self._site(module, qualname, node, "line", None, text, context)

    def _call_sites(
        self, module: _Module, qualname: str, call: ast.Call, context: _Context
    ) -> Iterator[Site]:
        exception = self._exception_of(call, context)
        if exception in _NOT_MESSAGES:
            return
        if exception is not None:
            message = self._message_arg(call, exception)
            if message is None or self._passes_parameter_on(message, context):
                return  # no message, or a factory handing its caller's message on (resolved there)
            if isinstance(message, ast.Constant) and not isinstance(message.value, str):
                return
            yield self._site(module, qualname, call, "exception", exception, message, context)
            return
        factory = self._factory_of(call, context)
        if factory is not None:
            index, exception = factory
            if index < len(call.args) and not isinstance(call.args[index], ast.Starred):
                message = call.args[index]
                if not self._passes_parameter_on(message, context):
                    yield self._site(module, qualname, call, "exception", exception, message, context)
            return
        func = call.func
        if not call.args:
            return
        if isinstance(func, ast.Name) and self._is_logger_method(func.id, context):
            yield self._log_site(module, qualname, call, context)
            return
        if isinstance(func, ast.Name):
            if func.id == "print" and any(
                keyword.arg == "file" and ast.unparse(keyword.value) == "sys.stderr"
                for keyword in call.keywords
            ):
                yield self._site(module, qualname, call, "stderr", None, call.args[0], context)
            elif func.id in MESSAGE_FUNCTIONS and len(call.args) > MESSAGE_FUNCTIONS[func.id]:
                message = call.args[MESSAGE_FUNCTIONS[func.id]]
                yield self._site(module, qualname, call, "stderr", None, message, context)
            return
        if not isinstance(func, ast.Attribute):
            return
        if func.attr in LOG_LEVELS and not _is_warnings_module(func.value):
            yield self._log_site(module, qualname, call, context)
        elif func.attr == "warn" and _is_warnings_module(func.value):
            yield self._site(module, qualname, call, "warnings.warn", None, call.args[0], context)
        elif func.attr == "append" and _terminal(func.value) == "warnings":
            yield self._site(module, qualname, call, "page warning", None, call.args[0], context)
        elif func.attr == "write" and ast.unparse(func.value) == "sys.stderr":
            yield self._site(module, qualname, call, "stderr", None, call.args[0], context)

    @staticmethod
    def _is_logger_method(name: str, context: _Context) -> bool:
        """``emit = log.debug if quiet else log.warning``: a local name bound to a logging call at
        WARNING or above (in one of its branches)."""
        if context.function is None:
            return False
        for value in _assigned(context.function, name, context.before):
            branches = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
            if any(isinstance(branch, ast.Attribute) and branch.attr in LOG_LEVELS for branch in branches):
                return True
        return False

    def _exception_of(self, call: ast.Call, context: _Context) -> str | None:
        func = call.func
        name = _terminal(func)
        if name in self.exception_classes and (isinstance(func, ast.Name) or name[:1].isupper()):
            return name
        if isinstance(func, ast.Name) and context.function is not None:
            for value in _assigned(context.function, func.id, context.before):
                if isinstance(value, ast.Attribute) and value.attr in self._class_valued:
                    return self._class_valued[value.attr]
        if (  # type(error)(...): a new exception of the class of a parameter annotated with one
            isinstance(func, ast.Call)
            and isinstance(func.func, ast.Name)
            and func.func.id == "type"
            and len(func.args) == 1
            and isinstance(func.args[0], ast.Name)
            and context.function is not None
        ):
            args = context.function.args
            for arg in args.posonlyargs + args.args + args.kwonlyargs:
                if arg.arg == func.args[0].id and arg.annotation is not None:
                    annotated = _terminal(arg.annotation)
                    if annotated in self.exception_classes:
                        return annotated
        return None

    def _message_arg(self, call: ast.Call, exception: str | None) -> ast.expr | None:
        for keyword in call.keywords:
            if keyword.arg in ("message", "msg"):
                return keyword.value
        index = self._message_index.get(exception or "", 0)
        if index < len(call.args) and not isinstance(call.args[index], ast.Starred):
            return call.args[index]
        return None

    def _factory_of(self, call: ast.Call, context: _Context) -> tuple[int, str] | None:
        target = self._callee(call.func, context.module)
        return self.factories.get(target) if target else None

    def _passes_parameter_on(self, message: ast.expr, context: _Context) -> bool:
        if not isinstance(message, ast.Name) or context.function is None:
            return False
        args = context.function.args
        params = {arg.arg for arg in args.posonlyargs + args.args + args.kwonlyargs}
        return message.id in params and not list(_assigned(context.function, message.id, context.before))

    def _callee(self, func: ast.expr, module: _Module) -> tuple[str, str] | None:
        """The package function a call calls, as (module, name), when it can be told."""
        if isinstance(func, ast.Name):
            if func.id in module.functions:
                return module.name, func.id
            origin = module.imports.get(func.id)
            if origin and origin[1] is not None:
                return origin[0], origin[1]
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            origin = module.imports.get(func.value.id)
            if origin:  # `validation.error` after `from airflow_gang.model import validation`
                target = f"{origin[0]}.{origin[1]}" if origin[1] else origin[0]
                if target in self.modules:
                    return target, func.attr
            if func.value.id in ("self", "cls") and func.attr in module.functions:
                return module.name, func.attr
        return None

    def _log_site(self, module: _Module, qualname: str, call: ast.Call, context: _Context) -> Site:
        first = call.args[0]
        if len(call.args) == 1:
            return self._site(module, qualname, call, "log", None, first, context)
        # %-style logging: the arguments that are constants go into the text
        args = [self._inline(arg, context, 0) for arg in call.args[1:]]
        formats = self._resolve(first, context, 0) or []
        templates = tuple(dict.fromkeys(_percent_template(template, args) for template in formats))
        return self._make(module, qualname, call, "log", None, first, templates)

    def _site(
        self,
        module: _Module,
        qualname: str,
        node: ast.AST,
        source: str,
        exception: str | None,
        message: ast.expr,
        context: _Context,
    ) -> Site:
        templates = tuple(dict.fromkeys(self._resolve(message, context, 0) or ()))
        return self._make(module, qualname, node, source, exception, message, templates)

    def _make(
        self,
        module: _Module,
        qualname: str,
        node: ast.AST,
        source: str,
        exception: str | None,
        message: ast.expr,
        templates: tuple[Template, ...],
    ) -> Site:
        kept = tuple(_merge(template) for template in templates if any(template))
        return Site(
            self._relative(module),
            getattr(node, "lineno", 0),
            qualname,
            source,
            exception,
            kept,
            ast.unparse(message),
        )

    def _relative(self, module: _Module) -> str:
        return module.path.relative_to(self.root).as_posix()

    # --- resolving a message expression into templates ----------------------------------------

    def _resolve(self, node: ast.expr, context: _Context, depth: int) -> list[Template] | None:
        """The templates ``node`` may produce; None when nothing of it can be told statically."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(node, ast.Constant):
            return [(node.value,)] if isinstance(node.value, str) else None
        if isinstance(node, ast.JoinedStr):
            parts: list[Part] = []
            for value in node.values:
                if isinstance(value, ast.Constant):
                    parts.append(str(value.value))
                elif isinstance(value, ast.FormattedValue):
                    inlined = self._inline(value.value, context, depth)
                    if value.conversion == ord("r") and None not in inlined:
                        inlined = (repr("".join(str(part) for part in inlined)),)
                    parts.extend(inlined)
            return [tuple(parts)]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self._resolve(node.left, context, depth + 1)
            right = self._resolve(node.right, context, depth + 1)
            if left is None and right is None:
                return None
            return [a + b for a in (left or [(None,)]) for b in (right or [(None,)])]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            formats = self._resolve(node.left, context, depth + 1)
            if formats is None:
                return None
            values = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            args = [self._inline(value, context, depth + 1) for value in values]
            return [_percent_template(template, args) for template in formats]
        if isinstance(node, ast.IfExp):
            body = self._resolve(node.body, context, depth + 1) or []
            orelse = self._resolve(node.orelse, context, depth + 1) or []
            return (body + orelse) or None
        if isinstance(node, ast.Call):
            return self._resolve_call(node, context, depth)
        if isinstance(node, ast.Name):
            return self._resolve_name(node.id, context, depth)
        return None

    def _resolve_call(self, node: ast.Call, context: _Context, depth: int) -> list[Template] | None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "format":
            formats = self._resolve(func.value, context, depth + 1)
            return [_format_template(template) for template in formats] if formats else None
        if isinstance(func, ast.Name) and func.id == "str" and node.args:
            return self._resolve(node.args[0], context, depth + 1)
        if isinstance(func, ast.Attribute) and func.attr == "join" and node.args:
            return self._resolve_joined(node.args[0], context, depth)
        target = self._callee(func, context.module)
        if target is None or target[0] not in self.modules or target in self.factories:
            return None
        module = self.modules[target[0]]
        found: list[Template] = []
        for definition in module.functions.get(target[1], []):
            for inner in ast.walk(definition):
                if isinstance(inner, ast.Return) and inner.value is not None:
                    inner_context = _Context(module, definition, inner.lineno)
                    found.extend(self._resolve(inner.value, inner_context, depth + 1) or [])
        return found or None

    def _resolve_joined(self, items: ast.expr, context: _Context, depth: int) -> list[Template] | None:
        """``"; ".join(problems)``: each text appended to the local list (one problem alone)."""
        while isinstance(items, ast.Call) and items.args:  # dict.fromkeys(problems), sorted(...)
            items = items.args[0]
        if not isinstance(items, ast.Name) or context.function is None:
            return None
        found: list[Template] = []
        for node in ast.walk(context.function):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "append"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == items.id
                and node.args
            ):
                found.extend(self._resolve(node.args[0], context, depth + 1) or [])
        return found or None

    def _resolve_name(self, name: str, context: _Context, depth: int) -> list[Template] | None:
        if context.function is not None:
            assigned = list(_assigned(context.function, name, context.before, augmented=True))
            if assigned:
                templates: list[Template] = []
                for value in assigned:
                    if isinstance(value, _Augmented):  # `message += ...`: grows every earlier text
                        tails = self._resolve(value.value, context, depth + 1) or [(None,)]
                        templates = [t + tail for t in templates or [(None,)] for tail in tails]
                    else:
                        templates.extend(self._resolve(value, context, depth + 1) or [])
                return templates or None
        module = context.module
        if name in module.constants:
            return self._resolve(module.constants[name], _Context(module, None, 0), depth + 1)
        origin = module.imports.get(name)
        if origin and origin[1] and origin[0] in self.modules:
            other = self.modules[origin[0]]
            if origin[1] in other.constants:
                return self._resolve(other.constants[origin[1]], _Context(other, None, 0), depth + 1)
        return None

    def _inline(self, node: ast.expr, context: _Context, depth: int) -> Template:
        """A value inside a message: its text when it is a single constant text, else a placeholder."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return (node.value,)
        if isinstance(node, ast.Name):
            resolved = self._resolve_name(node.id, context, depth + 1)
            if resolved is not None and len(resolved) == 1 and None not in resolved[0]:
                return resolved[0]
        return (None,)


@dataclass(frozen=True)
class _Augmented:
    value: ast.expr


def _assigned(
    function: ast.FunctionDef | ast.AsyncFunctionDef, name: str, before: int, *, augmented: bool = False
) -> Iterator[ast.expr | _Augmented]:
    """The values assigned to local ``name`` in ``function`` before line ``before``, in order."""
    for node in ast.walk(function):
        if getattr(node, "lineno", before) >= before:
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == name:
                    yield node.value
                elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    for element, value in zip(target.elts, node.value.elts, strict=False):
                        if isinstance(element, ast.Name) and element.id == name:
                            yield value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            if node.target.id == name:
                yield node.value
        elif isinstance(node, ast.NamedExpr) and node.target.id == name:
            yield node.value
        elif (
            augmented
            and isinstance(node, ast.AugAssign)
            and isinstance(node.op, ast.Add)
            and isinstance(node.target, ast.Name)
            and node.target.id == name
        ):
            yield _Augmented(node.value)


def _walk_with_function(
    tree: ast.Module,
) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef | None, str, ast.AST]]:
    """Every node with its innermost enclosing function and that function's qualified name."""

    def visit(
        node: ast.AST, function: ast.FunctionDef | ast.AsyncFunctionDef | None, qualname: str
    ) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef | None, str, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from visit(child, child, f"{qualname}.{child.name}" if qualname else child.name)
            elif isinstance(child, ast.ClassDef):
                yield from visit(child, function, f"{qualname}.{child.name}" if qualname else child.name)
            else:
                yield function, qualname, child
                yield from visit(child, function, qualname)

    yield from visit(tree, None, "")


def _terminal(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _terminal(node.value)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ""


def _is_warnings_module(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "warnings"


def _percent_template(template: Template, args: list[Template]) -> Template:
    """``%``-format specifiers in the literal parts become the arguments' text or placeholders."""
    out: list[Part] = []
    remaining = list(args)
    for part in template:
        if part is None:
            out.append(None)
            continue
        position = 0
        for match in _PERCENT_SPEC.finditer(part):
            out.append(part[position : match.start()])
            if match.group() == "%%":
                out.append("%")
            else:
                out.extend(remaining.pop(0) if remaining else (None,))
            position = match.end()
        out.append(part[position:])
    return tuple(out)


def _format_template(template: Template) -> Template:
    out: list[Part] = []
    for part in template:
        if part is None:
            out.append(None)
            continue
        pieces = _FORMAT_FIELD.split(part.replace("{{", "\0").replace("}}", "\1"))
        for index, piece in enumerate(pieces):
            if index:
                out.append(None)
            out.append(piece.replace("\0", "{").replace("\1", "}"))
    return tuple(out)


def _merge(template: Template) -> Template:
    """Adjacent literal parts joined, adjacent placeholders collapsed, empty literals dropped."""
    out: list[Part] = []
    for part in template:
        if part == "":
            continue
        if part is None:
            if out and out[-1] is None:
                continue
            out.append(None)
        elif out and out[-1] is not None:
            out[-1] = f"{out[-1]}{part}"
        else:
            out.append(part)
    return tuple(out)


def literals(template: Template) -> list[str]:
    return [part for part in template if part is not None]


def shown(template: Template) -> str:
    """The template as the page shows it: ``<...>`` for each value computed at run time."""
    return "".join("<...>" if part is None else part for part in template)
