"""Label and field selectors: parsing, canonical printing and matching (pure functions).

Label selectors follow ``k8s.io/apimachinery/pkg/labels``: comma-joined requirements
``key``, ``!key``, ``key=v``/``key==v``, ``key!=v``, ``key in (a,b)``, ``key notin (a,b)``,
``key>N``/``key<N``. ``!=`` and ``notin`` also match objects without the key, as upstream.
Field selectors follow ``.../fields``: ``path=v``, ``path==v``, ``path!=v`` with ``\\``-escapes;
the value at a dotted path is read from the object (missing reads as ``""``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

LabelOp = Literal["=", "!=", "in", "notin", "exists", "!", ">", "<"]

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_NAME_RE = re.compile(rf"^{_NAME}$")
_PREFIX_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_TOKEN_RE = re.compile(r"\s*(==|!=|=|!|\(|\)|,|>|<|[^\s=!(),<>]+)")


class SelectorError(ValueError):
    """The selector text does not parse; the message is what the API returns in a 400."""


def label_key_error(key: str) -> str | None:
    """Why ``key`` is not a valid label key, or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _PREFIX_RE.match(prefix)):
        return f"prefix part of {key!r} must be a lowercase RFC 1123 subdomain"
    if not name or len(name) > 63 or not _NAME_RE.match(name):
        return (
            f"name part of {key!r} must consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character, at most 63 characters"
        )
    return None


def label_value_error(value: str) -> str | None:
    """Why ``value`` is not a valid label value, or None (empty is valid)."""
    if value and (len(value) > 63 or not _NAME_RE.match(value)):
        return (
            f"label value {value!r} must be 63 characters or less and consist of alphanumeric "
            "characters, '-', '_' or '.', starting and ending with an alphanumeric character"
        )
    return None


@dataclass(frozen=True)
class Requirement:
    key: str
    op: LabelOp
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key, "")
        match self.op:
            case "exists":
                return present
            case "!":
                return not present
            case "=":
                return present and value == self.values[0]
            case "!=":
                return not present or value != self.values[0]
            case "in":
                return present and value in self.values
            case "notin":
                return not present or value not in self.values
            case ">" | "<":
                try:
                    number = int(value)
                except ValueError:
                    return False
                bound = int(self.values[0])
                return present and (number > bound if self.op == ">" else number < bound)

    def __str__(self) -> str:
        if self.op == "exists":
            return self.key
        if self.op == "!":
            return f"!{self.key}"
        if self.op in ("in", "notin"):
            return f"{self.key} {self.op} ({','.join(self.values)})"
        return f"{self.key}{self.op}{self.values[0]}"


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN_RE.match(text, pos)
        if match is None:  # pragma: no cover - the pattern accepts any non-space character
            raise SelectorError(f"unable to parse requirement: unexpected {text[pos:]!r}")
        tokens.append(match.group(1))
        pos = match.end()
    return tokens


def _check_key(key: str) -> None:
    error = label_key_error(key)
    if error:
        raise SelectorError(f"unable to parse requirement: invalid label key {key!r}: {error}")


def _check_value(value: str) -> None:
    error = label_value_error(value)
    if error:
        raise SelectorError(f"unable to parse requirement: invalid label value: {error}")


_SPECIAL = {"=", "==", "!=", "!", "(", ")", ",", ">", "<"}


class _LabelParser:
    """Recursive-descent parser over the token list (one method per grammar rule)."""

    def __init__(self, text: str):
        self.tokens = _tokens(text)
        self.pos = 0

    def peek(self, offset: int = 0) -> str | None:
        index = self.pos + offset
        return self.tokens[index] if index < len(self.tokens) else None

    def value(self) -> str:
        # An absent or special token is the empty value: "key=" selects key with value "".
        token = self.peek()
        if token is not None and token not in _SPECIAL:
            self.pos += 1
            return token
        return ""

    def selector(self) -> LabelSelector:
        requirements: list[Requirement] = []
        while self.peek() is not None:
            requirements.append(self.requirement())
            token = self.peek()
            if token is None:
                break
            if token != ",":
                raise SelectorError(f"unable to parse requirement: found '{token}', expected: ','")
            self.pos += 1
            if self.peek() is None:
                raise SelectorError("unable to parse requirement: found end of input, expected: identifier")
        return LabelSelector(tuple(requirements))

    def requirement(self) -> Requirement:
        negated = self.peek() == "!"
        if negated:
            self.pos += 1
        key = self.peek()
        if key is None or key in _SPECIAL:
            raise SelectorError(f"unable to parse requirement: found '{key or ''}', expected: identifier")
        _check_key(key)
        self.pos += 1
        op = self.peek()
        if negated:
            return Requirement(key, "!")
        if op in (None, ","):
            return Requirement(key, "exists")
        self.pos += 1
        if op in ("=", "==", "!="):
            value = self.value()
            _check_value(value)
            return Requirement(key, "!=" if op == "!=" else "=", (value,))
        if op in (">", "<"):
            value = self.value()
            if not re.fullmatch(r"-?\d+", value):
                raise SelectorError(
                    f"unable to parse requirement: for '{op}' operator, the value must be an integer"
                )
            return Requirement(key, ">" if op == ">" else "<", (value,))
        if op in ("in", "notin"):
            return Requirement(key, "in" if op == "in" else "notin", self.value_set(op))
        raise SelectorError(
            f"unable to parse requirement: found '{op}', expected: '=', '!=', '==', 'in', notin'"
        )

    def value_set(self, op: str) -> tuple[str, ...]:
        if self.peek() != "(":
            raise SelectorError(f"unable to parse requirement: found '{op}', expected: '('")
        self.pos += 1
        values: list[str] = []
        while True:
            value = self.value()
            _check_value(value)
            values.append(value)
            token = self.peek()
            self.pos += 1
            if token == ")":
                break
            if token != ",":
                raise SelectorError("unable to parse requirement: found end of input, expected: ')'")
        if values == [""]:
            raise SelectorError(
                "unable to parse requirement: for 'in', 'notin' operators, values set can't be empty"
            )
        return tuple(sorted(set(values)))


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse ``labelSelector``; raises :class:`SelectorError` with the reason."""
    return _LabelParser(text or "").selector()


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    op: Literal["=", "!="]
    value: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        actual = field_value(obj, self.field)
        return (actual == self.value) if self.op == "=" else (actual != self.value)


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(r.matches(obj) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def single_value(self, name: str) -> str | None:
        """The value of an ``name=value`` term if present (used to narrow a lookup)."""
        for r in self.requirements:
            if r.field == name and r.op == "=":
                return r.value
        return None


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string value at a dotted path; booleans print as Go does, missing values as ``""``."""
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, current, escaped = [], [], False
    for ch in text:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if escaped:
        raise SelectorError("invalid field selector: trailing backslash")
    parts.append("".join(current))
    return parts


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def parse_field_selector(text: str | None) -> FieldSelector:
    """Parse ``fieldSelector``; raises :class:`SelectorError` with the reason."""
    if not text or not text.strip():
        return FieldSelector()
    requirements: list[FieldRequirement] = []
    for term in _split_unescaped(text, ","):
        if not term:
            continue  # upstream skips empty terms ("a=b,")
        match = re.fullmatch(r"((?:[^\\=!]|\\.)+?)(==|!=|=)(.*)", term, flags=re.DOTALL)
        if match is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        name, op, value = match.groups()
        field = _unescape(name).strip()
        requirements.append(FieldRequirement(field, "!=" if op == "!=" else "=", _unescape(value)))
    return FieldSelector(tuple(requirements))
