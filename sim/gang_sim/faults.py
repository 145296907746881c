"""Fault specs for the simulator's API server: what to break, how often, and when.

A `FaultSpec` is plain data (JSON or YAML, every section optional, unknown keys rejected). The
API server's injector (``gang_sim.apiserver.faults.injector``) applies it: per-request
errors and latency, watch cuts and ``410 Gone`` on resume, listener outages, external deletions,
node failures (and the removal of a failed node's Node object) and kubelet evictions under node
pressure. The same seed and the same sequence of requests give the same faults. See
``docs/fault-injection.md``::

    seed: 7
    errors: [{verbs: [create], resources: [pytorchjobs.kubeflow.org], rate: 0.5, status: 503}]
    outages: [{start: 10, duration: 5}]

`load_fault_spec` accepts a `FaultSpec`, a mapping, a path to a YAML/JSON file, or inline JSON,
and raises `FaultSpecError` naming the offending field.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gang_sim.apiserver.selectors import SelectorError, parse_label_selector

Verb = Literal["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
FAULT_KINDS = (
    "error_500",
    "error_503",
    "error_429",
    "latency",
    "watch_cut",
    "watch_gone",
    "outage",
    "deletion",
    "node_failure",
    "node_deletion",
    "kubelet_eviction",
)
"""Counter names, as ``fault_counts()`` and ``GET /sim/v1/metrics`` (``faults``) report them."""


class FaultSpecError(ValueError):
    """A fault spec that cannot be used; the message names the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RequestRule(_Strict):
    """Which requests a rule picks: kube-apiserver verbs and resources, as ``/sim/v1/metrics``
    names them (``pods``, ``pods/status``, ``pytorchjobs.kubeflow.org``); None means all."""

    verbs: list[Verb] | None = Field(default=None, min_length=1)
    resources: list[str] | None = Field(default=None, min_length=1)
    rate: float = Field(default=1.0, ge=0.0, le=1.0)

    def matches(self, verb: str, resource: str) -> bool:
        return (self.verbs is None or verb in self.verbs) and (
            self.resources is None or resource in self.resources
        )


class ErrorRule(RequestRule):
    """Answer a picked request with this HTTP error instead of serving it."""

    status: Literal[500, 503, 429]
    retry_after: int = Field(default=1, ge=0)


class LatencyRule(RequestRule):
    """Delay a picked request by ``seconds`` before serving it."""

    seconds: float = Field(gt=0.0)


class WatchFaults(_Strict):
    """Faults of watch streams (every watch of a faulted client)."""

    cut_after_events: int | None = Field(default=None, ge=1)
    cut_after_seconds: float | None = Field(default=None, gt=0.0)
    gone_on_resume_rate: float = Field(default=0.0, ge=0.0, le=1.0)


class Outage(_Strict):
    """The listener closes at ``start`` seconds for ``duration`` seconds, then reopens."""

    start: float = Field(ge=0.0)
    duration: float = Field(gt=0.0)


class Deletion(_Strict):
    """At ``at`` seconds, delete one object by ``name`` or all matching ``label_selector``."""

    at: float = Field(ge=0.0)
    kind: Literal["pytorchjob", "podgroup"]
    namespace: str = Field(default="default", min_length=1)
    name: str | None = Field(default=None, min_length=1)
    label_selector: str | None = Field(default=None, min_length=1)

    @field_validator("label_selector")
    @classmethod
    def _parsable(cls, selector: str | None) -> str | None:
        if selector is not None:
            try:
                parse_label_selector(selector)
            except SelectorError as error:
                raise ValueError(f"not a label selector: {error}") from error
        return selector

    @model_validator(mode="after")
    def _one_target(self) -> Deletion:
        if (self.name is None) == (self.label_selector is None):
            raise ValueError("give exactly one of name and label_selector")
        return self


class NodeFailure(_Strict):
    """At ``at`` seconds the node's machine dies (its kubelet goes silent); it comes back after
    ``duration`` seconds if given, or its Node object is deleted after ``delete_node_after``
    seconds (the cloud provider removing a VM that went away, a reclaimed spot instance)."""

    at: float = Field(ge=0.0)
    node: str = Field(min_length=1)
    duration: float | None = Field(default=None, gt=0.0)
    delete_node_after: float | None = Field(default=None, gt=0.0)

    @model_validator(mode="after")
    def _one_ending(self) -> NodeFailure:
        if self.duration is not None and self.delete_node_after is not None:
            raise ValueError("give at most one of duration (the node comes back) and delete_node_after")
        return self


class KubeletEviction(_Strict):
    """At ``at`` seconds the kubelet of the pod's node evicts it for lack of ``resource``
    (node-pressure eviction): the eviction message quotes ``threshold`` and ``available``, and
    the main container's ``usage`` if given."""

    at: float = Field(ge=0.0)
    namespace: str = Field(default="default", min_length=1)
    pod: str = Field(min_length=1)
    resource: Literal["memory", "ephemeral-storage", "pids"] = "memory"
    threshold: str = Field(default="100Mi", min_length=1)
    available: str = Field(default="80Mi", min_length=1)
    usage: str | None = Field(default=None, min_length=1)


class FaultSpec(_Strict):
    """Everything the API server's fault injector does; times count from when it is applied.

    :param seed: same seed + same request sequence => same faults.
    :param clients: fault only requests whose User-Agent contains one of these substrings; None
        means every client except the simulator's own controllers. Outages hit everybody.
    """

    seed: int = 0
    clients: list[str] | None = Field(default=None, min_length=1)
    errors: list[ErrorRule] = Field(default_factory=list)
    latency: list[LatencyRule] = Field(default_factory=list)
    watches: WatchFaults = Field(default_factory=WatchFaults)
    outages: list[Outage] = Field(default_factory=list)
    deletions: list[Deletion] = Field(default_factory=list)
    node_failures: list[NodeFailure] = Field(default_factory=list)
    kubelet_evictions: list[KubeletEviction] = Field(default_factory=list)

    @model_validator(mode="after")
    def _outages_apart(self) -> FaultSpec:
        windows = sorted(self.outages, key=lambda outage: outage.start)
        for earlier, later in itertools.pairwise(windows):
            if later.start < earlier.start + earlier.duration:
                raise ValueError(
                    f"outages overlap: the one starting at {later.start:g}s begins before the one "
                    f"starting at {earlier.start:g}s ends"
                )
        return self

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_defaults=True)


def _field_path(location: tuple[int | str, ...]) -> str:
    path = ""
    for step in location:
        path += f"[{step}]" if isinstance(step, int) else (f".{step}" if path else str(step))
    return path


def describe(error: ValidationError) -> str:
    """One line per problem, each naming its field (``errors[0].status: ...``)."""
    lines = []
    for problem in error.errors():
        where = _field_path(tuple(problem["loc"]))
        message = problem["msg"].removeprefix("Value error, ")
        if problem["type"] == "extra_forbidden":
            message = "unknown field"
        lines.append(f"{where}: {message}" if where else message)
    return "; ".join(lines)


def parse_fault_spec(data: Any) -> FaultSpec:
    """Validate already-decoded data (a mapping) into a `FaultSpec`."""
    if not isinstance(data, Mapping):
        raise FaultSpecError(f"a fault spec is a mapping of sections, got {type(data).__name__}")
    try:
        return FaultSpec.model_validate(dict(data))
    except ValidationError as error:
        raise FaultSpecError(f"invalid fault spec: {describe(error)}") from error


def load_fault_spec(source: FaultSpec | Mapping[str, Any] | str | Path) -> FaultSpec:
    """A `FaultSpec` from a spec, a mapping, a YAML/JSON file path, or an inline JSON string."""
    if isinstance(source, FaultSpec):
        return source
    if isinstance(source, Mapping):
        return parse_fault_spec(source)
    text = str(source)
    if isinstance(source, str) and text.lstrip().startswith("{"):
        try:
            return parse_fault_spec(json.loads(text))
        except json.JSONDecodeError as error:
            raise FaultSpecError(f"inline fault spec is not valid JSON: {error}") from error
    path = Path(text).expanduser()
    if not path.is_file():
        raise FaultSpecError(f"fault spec {text!r}: no such file (or give inline JSON: '{{...}}')")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))  # YAML is a superset of JSON
    except yaml.YAMLError as error:
        raise FaultSpecError(f"fault spec {path}: not valid YAML/JSON: {error}") from error
    return parse_fault_spec(data if data is not None else {})
