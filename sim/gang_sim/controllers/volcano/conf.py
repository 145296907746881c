"""vc-scheduler's configuration (``volcano-scheduler.conf``): its actions and plugin tiers.

The format is the real one (``pkg/scheduler/conf/scheduler_conf.go:34-70`` at
v1.16.0-alpha.1)::

    actions: "enqueue, allocate, preempt, reclaim, backfill"
    tiers:
    - plugins:
      - name: priority
      - name: gang
        enablePreemptable: false
      - name: conformance
    - plugins:
      - name: drf
      - name: proportion

``actions`` run in the listed order (``pkg/scheduler/util.go:83-90``); every ``enable*`` flag of
a plugin defaults to true (``plugins/defaults.go:29-59``), and false removes that plugin's
function from the vote rather than vetoing. Without a configuration the compiled-in default
applies (``util.go:38-51``): ``enqueue, allocate, backfill`` with no preempt or reclaim, which is
what the simulator did before it knew of a configuration.

What the simulator makes of it: enqueue and allocate always run first, as they always did;
``preempt`` and ``reclaim`` (``preempt``) run after them in the listed order; ``backfill``
is accepted and does nothing of its own (the simulated allocate already places every pod it can).
The tiers drive the plugin functions of preempt and reclaim (votes, starving, pipelined,
overused, preemptive, allocatable, job, task and queue order). The plugins that have any of
those here are ``priority``, ``gang``, ``conformance``, ``drf``, ``proportion`` and ``predicates``;
any other name (``overcommit``, ``nodeorder``, ``binpack``, ``capacity``...) is accepted and
abstains everywhere — ``capacity`` in particular is not simulated. The enqueue gate keeps its
overcommit and queue-capability checks whatever the tiers say.

`load_scheduler_conf` accepts a `SchedulerConf`, a mapping, YAML text or a path to a file, and
raises `SchedulerConfError` naming the offending field.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

SIMULATED_ACTIONS = ("enqueue", "allocate", "backfill", "preempt", "reclaim")
# Registered in pkg/scheduler/actions/factory.go:35-44 but not simulated.
UNSIMULATED_ACTIONS = ("gangpreempt", "gangreclaim", "shuffle")
DISRUPTING_ACTIONS = ("preempt", "reclaim")

DEFAULT_SCHEDULER_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""
"""vc-scheduler's compiled-in configuration (``pkg/scheduler/util.go:38-51``)."""


class SchedulerConfError(ValueError):
    """A scheduler configuration that cannot be used; the message names the field."""


class PluginOption(BaseModel):
    """One plugin of a tier, with the ``enable*`` flags of ``conf.PluginOption`` (None: true)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(min_length=1)
    enable_job_order: bool | None = Field(default=None, alias="enableJobOrder")
    enable_hierarchy: bool | None = Field(default=None, alias="enableHierarchy")
    enable_job_ready: bool | None = Field(default=None, alias="enableJobReady")
    enable_job_pipelined: bool | None = Field(default=None, alias="enableJobPipelined")
    enable_task_order: bool | None = Field(default=None, alias="enableTaskOrder")
    enable_preemptable: bool | None = Field(default=None, alias="enablePreemptable")
    enable_reclaimable: bool | None = Field(default=None, alias="enableReclaimable")
    enable_preemptive: bool | None = Field(default=None, alias="enablePreemptive")
    enable_queue_order: bool | None = Field(default=None, alias="enableQueueOrder")
    enable_cluster_order: bool | None = Field(default=None, alias="enabledClusterOrder")
    enable_predicate: bool | None = Field(default=None, alias="enablePredicate")
    enable_best_node: bool | None = Field(default=None, alias="enableBestNode")
    enable_node_order: bool | None = Field(default=None, alias="enableNodeOrder")
    enable_target_job: bool | None = Field(default=None, alias="enableTargetJob")
    enable_reserved_nodes: bool | None = Field(default=None, alias="enableReservedNodes")
    enable_job_enqueued: bool | None = Field(default=None, alias="enableJobEnqueued")
    enable_victim: bool | None = Field(default=None, alias="enabledVictim")
    enable_job_starving: bool | None = Field(default=None, alias="enableJobStarving")
    enable_overused: bool | None = Field(default=None, alias="enabledOverused")
    enable_allocatable: bool | None = Field(default=None, alias="enabledAllocatable")
    enable_hyper_node_order: bool | None = Field(default=None, alias="enabledHyperNodeOrder")
    enable_sub_job_ready: bool | None = Field(default=None, alias="enabledSubJobReady")
    enable_sub_job_pipelined: bool | None = Field(default=None, alias="enabledSubJobPipelined")
    enable_sub_job_order: bool | None = Field(default=None, alias="enabledSubJobOrder")
    enable_hyper_node_gradient: bool | None = Field(default=None, alias="enabledHyperNodeGradient")
    arguments: dict[str, Any] | None = None

    def enabled(self, flag: str) -> bool:
        """``flag`` (e.g. ``"enable_preemptable"``) as vc-scheduler reads it: unset means true."""
        value = getattr(self, flag)
        return value is None or bool(value)


class Tier(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    plugins: tuple[PluginOption, ...] = ()


class ActionConfiguration(BaseModel):
    """``configurations: [{name: preempt, arguments: {...}}]``: accepted, not simulated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    arguments: dict[str, Any] | None = None


class SchedulerConf(BaseModel):
    """A parsed ``volcano-scheduler.conf``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    actions: tuple[str, ...]
    tiers: tuple[Tier, ...] = ()
    configurations: tuple[ActionConfiguration, ...] = ()
    metrics: dict[str, str] | None = None

    @field_validator("actions", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):  # the real format: one comma-separated string
            return tuple(name.strip() for name in value.split(","))
        return value

    @field_validator("actions")
    @classmethod
    def _known(cls, actions: tuple[str, ...]) -> tuple[str, ...]:
        for name in actions:
            if name in UNSIMULATED_ACTIONS:
                raise ValueError(f"action {name!r} is Volcano's but not simulated")
            if name not in SIMULATED_ACTIONS:
                raise ValueError(
                    f"unknown action {name!r} (the simulator runs {', '.join(SIMULATED_ACTIONS)})"
                )
        if len(set(actions)) != len(actions):
            raise ValueError("an action is listed twice")
        if actions[:2] != ("enqueue", "allocate"):
            raise ValueError(
                "the simulator runs enqueue, then allocate, before anything else: "
                "list them first, in that order"
            )
        return actions

    @model_validator(mode="after")
    def _hierarchy(self) -> SchedulerConf:
        # pkg/scheduler/util.go:62-79: drf with hierarchy and proportion in one tier conflict.
        for tier in self.tiers:
            names = {plugin.name for plugin in tier.plugins}
            hdrf = any(p.name == "drf" and p.enable_hierarchy for p in tier.plugins)
            if hdrf and "proportion" in names:
                raise ValueError("proportion and drf with hierarchy enabled conflicts")
        return self

    @property
    def disrupts(self) -> bool:
        """Whether preempt or reclaim runs, i.e. whether a session may evict pods."""
        return any(action in DISRUPTING_ACTIONS for action in self.actions)

    def plugin(self, name: str) -> PluginOption | None:
        return next((p for tier in self.tiers for p in tier.plugins if p.name == name), None)

    def enabled(self, name: str, flag: str) -> bool:
        """Whether plugin ``name`` is configured with ``flag`` on (unset: on)."""
        plugin = self.plugin(name)
        return plugin is not None and plugin.enabled(flag)

    def to_mapping(self) -> dict[str, Any]:
        """The configuration as plain data in the real format (JSON/YAML, and `Topology`)."""
        data = self.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
        data["actions"] = ", ".join(self.actions)
        return data


def parse_scheduler_conf(data: Any) -> SchedulerConf:
    """Validate plain data; errors name the field (``tiers.0.plugins.1.enablePreemptable``)."""
    if not isinstance(data, Mapping):
        raise SchedulerConfError(f"scheduler conf: expected a mapping, got {type(data).__name__}")
    try:
        return SchedulerConf.model_validate(dict(data))
    except ValidationError as error:
        problems = []
        for item in error.errors():
            where = ".".join(str(part) for part in item["loc"]) or "(top level)"
            problems.append(f"{where}: {item['msg']}")
        raise SchedulerConfError("scheduler conf: " + "; ".join(problems)) from error


def load_scheduler_conf(source: SchedulerConf | Mapping[str, Any] | str | Path | None) -> SchedulerConf:
    """A `SchedulerConf` from a conf, a mapping, YAML text, or a path to a YAML file.

    None gives vc-scheduler's compiled-in default. A string is a path when such a file exists,
    else YAML text (a conf always has ``actions:``).
    """
    if source is None:
        return DEFAULT
    if isinstance(source, SchedulerConf):
        return source
    if isinstance(source, Mapping):
        return parse_scheduler_conf(source)
    text = str(source)
    path = Path(text).expanduser()
    if isinstance(source, Path) or ("\n" not in text and ":" not in text):
        if not path.is_file():
            raise SchedulerConfError(f"scheduler conf {text!r}: no such file")
        text = path.read_text(encoding="utf-8")
    elif "\n" not in text and path.is_file():
        text = path.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise SchedulerConfError(f"scheduler conf: not valid YAML: {error}") from error
    return parse_scheduler_conf(data if data is not None else {})


DEFAULT = parse_scheduler_conf(yaml.safe_load(DEFAULT_SCHEDULER_CONF))
