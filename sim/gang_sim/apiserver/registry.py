"""The resource registry: every served kind is one :class:`ResourceInfo` row of data.

Discovery, routing, validation, garbage collection and table printing all read these rows, so
adding a kind is adding a row (see ``resources.py``), never new handler code. A row names its
group/version/kind/plural, its scope, its subresources, its schema (custom resources), the
extra field selectors it supports and the pure hooks that default, validate and admit it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from gang_sim.apiserver.errors import Cause

JsonDict = dict[str, Any]
Operation = Literal["CREATE", "UPDATE"]
NameRule = Literal["subdomain", "label", "dns1035", "path"]

ALL_VERBS: tuple[str, ...] = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)


class ClusterView(Protocol):
    """Read-only access to stored objects for admission decisions (e.g. does the queue exist?)."""

    def lookup(self, group: str, plural: str, namespace: str, name: str) -> JsonDict | None: ...

    def objects(self, group: str, plural: str) -> list[JsonDict]: ...


# Mutating admission / defaulting: changes ``new`` in place; may raise a StatusError.
Mutator = Callable[[Operation, JsonDict, "JsonDict | None", ClusterView], None]
# Object validation (the kind's strategy): pure, returns field causes for a 422 Invalid.
Validator = Callable[[JsonDict, "JsonDict | None"], list[Cause]]
# Validating admission (webhooks): raises a StatusError to deny.
Admission = Callable[[Operation, JsonDict, "JsonDict | None", ClusterView], None]


@dataclass(frozen=True)
class PrinterColumn:
    """A ``kubectl get`` table column: a JSONPath (CRD style) or a cell function (built-ins)."""

    name: str
    type: str = "string"
    json_path: str = ""
    cell: Callable[[JsonDict], Any] | None = None
    priority: int = 0
    format: str = ""
    description: str = ""


@dataclass(frozen=True)
class ScalePaths:
    """A custom resource's ``scale`` subresource, as its CRD declares it (simple JSONPaths)."""

    spec_replicas: str
    status_replicas: str
    label_selector: str = ""


@dataclass(frozen=True)
class ResourceInfo:
    """One served resource. ``schema`` set means a custom resource (CRD semantics); ``scale``
    set (with ``"scale"`` in ``subresources``) serves its ``scale`` subresource."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    subresources: frozenset[str] = frozenset()
    schema: JsonDict | None = None
    short_names: tuple[str, ...] = ()
    singular: str = ""
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    name_rule: NameRule = "subdomain"
    field_selectors: tuple[str, ...] = ()
    generation: bool = True
    graceful_delete: bool = False
    printer_columns: tuple[PrinterColumn, ...] = ()
    scale: ScalePaths | None = None
    mutators: tuple[Mutator, ...] = ()
    validators: tuple[Validator, ...] = ()
    admission: tuple[Admission, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def custom(self) -> bool:
        return self.schema is not None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> str:
        """Group-qualified plural as errors print it: ``pytorchjobs.kubeflow.org``, ``pods``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """``Kind.group`` as ``Invalid`` errors print it: ``PyTorchJob.kubeflow.org``, ``Pod``."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def key(self) -> str:
        """Storage key; one per group and plural (a single served version per group here)."""
        return f"{self.group}/{self.plural}"

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()

    def supports_field(self, name: str) -> bool:
        return name in ("metadata.name", "metadata.namespace") or name in self.field_selectors


class Registry:
    """Lookup tables over the rows; immutable once built."""

    def __init__(self, resources: Iterable[ResourceInfo]):
        self._rows: list[ResourceInfo] = []
        self._by_path: dict[tuple[str, str, str], ResourceInfo] = {}
        self._by_key: dict[str, ResourceInfo] = {}
        self._by_kind: dict[tuple[str, str], ResourceInfo] = {}
        for info in resources:
            self._rows = [r for r in self._rows if r.key != info.key]
            self._rows.append(info)
        for info in self._rows:
            self._by_path[(info.group, info.version, info.plural)] = info
            self._by_key[info.key] = info
            self._by_kind[(info.group, info.kind)] = info

    def __iter__(self) -> Iterator[ResourceInfo]:
        return iter(self._rows)

    def replaced(self, rows: Iterable[ResourceInfo]) -> Registry:
        """A registry where ``rows`` replace the rows with the same group and plural."""
        return Registry([*self._rows, *rows])

    def lookup(self, group: str, version: str, plural: str) -> ResourceInfo | None:
        return self._by_path.get((group, version, plural))

    def by_key(self, key: str) -> ResourceInfo | None:
        return self._by_key.get(key)

    def by_kind(self, api_version: str, kind: str) -> ResourceInfo | None:
        group = api_version.rpartition("/")[0]
        return self._by_kind.get((group, kind))

    def group_versions(self) -> dict[str, list[str]]:
        """Groups in registration order (core ``""`` included) with their versions."""
        groups: dict[str, list[str]] = {}
        for info in self._rows:
            versions = groups.setdefault(info.group, [])
            if info.version not in versions:
                versions.append(info.version)
        return groups

    def resources_in(self, group: str, version: str) -> list[ResourceInfo]:
        return [r for r in self._rows if r.group == group and r.version == version]
