"""`JobKind`: everything the provider must know about one kind of gang job, in one place.

The lifecycle (`airflow_gang.jobs`), the hooks, the waits, the trigger, the sensors and the Gang
jobs page read a job's kind-specific facts and behaviour only through its `JobKind`; none of them
branches on which kind it is (``tests/unit/test_kind_boundary.py`` checks it). A kind lives in
its own package under `airflow_gang.kinds` (its `JobKind`, its spec, its recipe, its operator)
and is registered in `airflow_gang.kinds.JOB_KINDS`. `docs/architecture.md` ("How a kind plugs
in") walks through adding one.

A `JobKind` is pure (no cluster client): fields for the facts (where it is served, the labels
its pods carry, which container's exit code and log describe a failure, how it is deleted, which
RBAC rules it needs) and methods for what its objects say (replicas, state, queue, PodGroup,
suspension). The defaults here read the training-operator's conventions (Kubeflow's PyTorchJob);
a kind whose objects say it otherwise overrides the method.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

from airflow_gang.model.k8s_objects import pod_requests
from airflow_gang.model.quantity import parse_quantity

if TYPE_CHECKING:
    from airflow_gang.exceptions import PyTorchJobFailed

JsonDict = dict[str, Any]
# The annotation Volcano's queue is named by (a TrainJob's runtime template and runtimePatches).
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
# The condition types the lifecycle decides on (the training-operator's words).
SUCCEEDED, FAILED, SUSPENDED = "Succeeded", "Failed", "Suspended"
# Volcano's scheduler name, as pods bound for it say it.
VOLCANO_SCHEDULER = "volcano"
# The annotation naming a pod's PodGroup (Volcano's `scheduling.k8s.io/group-name`).
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
# An RBAC rule: (api group, resource, verb).
Permission = tuple[str, str, str]


def true_conditions(job: JsonDict) -> list[JsonDict]:
    conditions = (job.get("status") or {}).get("conditions") or []
    return [condition for condition in conditions if condition.get("status") == "True"]


def labels_of(obj: JsonDict) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _field(obj: JsonDict, dotted: str) -> Any:
    value: Any = obj
    for part in dotted.split("."):
        value = (value or {}).get(part) if isinstance(value, dict) else None
    return value


def _nested(dotted: str, value: Any) -> JsonDict:
    body: JsonDict = {}
    node = body
    *parents, last = dotted.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return body


@dataclass(frozen=True)
class ChildResource:
    """Objects a job's controller makes for it, e.g. a TrainJob's JobSet and batch Jobs.

    :param labelled: found by the job kind's ``pod_job_label`` (``<label>=<job>``); else it is
        the one object named after the job.
    """

    group: str
    version: str
    plural: str
    kind: str
    labelled: bool


@dataclass(frozen=True)
class ApiFacts:
    """What the cluster must serve for a kind, and how a user installs it when it does not.

    :param plurals: the resources of the kind's group/version the provider uses.
    :param title: how an error names what is missing (``PyTorchJob CRD``).
    :param install: the fix, as an error tells it.
    """

    plurals: tuple[str, ...]
    title: str
    install: str


@dataclass(frozen=True)
class JobKind:
    """One kind of gang job (see the module docstring).

    :param kind: the provider's name for the kind, e.g. ``PyTorchJob``: the object's ``kind``
        unless that alone is ambiguous (Volcano's ``Job`` is ``VolcanoJob`` here; ``api_kind``
        then says ``Job``). Records, events and messages name a job's kind by it.
    :param group: its API group; ``version`` and ``plural`` complete where it is served.
    :param pod_job_label: the label every pod of a job carries, with the job's name as value.
    :param replica_type_label: the label naming a pod's replica type (``Master``, ``Worker``).
    :param replica_index_label: the label numbering the pods of one replica type.
    :param container: the training container: its exit code and log describe a failure.
    :param replica_specs_field: the ``spec`` field mapping replica type to ``{replicas, template}``.
    :param leader: the replica type whose first pod's log is the task's (rank 0).
    :param leader_title: how log lines and errors name the leader's log (``master replica``).
    :param api: what the cluster must serve for it (`ApiFacts`).
    :param permissions: the RBAC rules the provider needs for this kind's own objects.
    :param suspend_field: the dotted ``spec`` path that suspends a job (``spec.runPolicy.suspend``).
    :param task_decorator: the ``@task.<name>`` this kind's decorator registers, and
        ``decorator_class`` its dotted path (the provider's metadata lists both).
    :param pods_outlive_failure: a failed job's pods stay to be read (a TrainJob's Job deletes
        them at its backoff limit: its waits note the failure as they see it).
    :param running_condition: the job says it runs with a ``Running`` condition; without one (a
        TrainJob), every replica's pod bound and running is what running means.
    :param deletion_propagation: how the provider deletes such a job (``Foreground`` when the
        controller leaves a job marked for deletion alone; ``Background`` when it would re-create
        the dependents a foreground deletion waits for: docs/trainer-v2.md, "Deleting a TrainJob").
    :param controller_owns_podgroup: the job's controller makes, owns and re-creates its PodGroup
        (Trainer's Volcano plugin), so the provider never deletes it itself: the garbage
        collector removes it with the job.
    :param children: what the job's controller makes besides pods and the PodGroup and that
        holds or makes pods (`ChildResource`): a deletion is confirmed only once none is left.
    :param api_kind: the object's ``kind`` on the wire when it is not ``kind`` (``Job``).
    """

    kind: str
    group: str
    version: str
    plural: str
    pod_job_label: str
    replica_type_label: str
    replica_index_label: str
    container: str
    replica_specs_field: str
    leader: str
    leader_title: str
    api: ApiFacts
    permissions: tuple[Permission, ...]
    suspend_field: str
    task_decorator: str
    decorator_class: str
    pods_outlive_failure: bool = True
    running_condition: bool = True
    deletion_propagation: Literal["Foreground", "Background"] = "Foreground"
    controller_owns_podgroup: bool = False
    children: tuple[ChildResource, ...] = ()
    api_kind: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def wire_kind(self) -> str:
        """The ``kind`` its objects and ownerReferences carry (``PyTorchJob``, Volcano's ``Job``)."""
        return self.api_kind or self.kind

    def describes(self, obj: JsonDict) -> bool:
        """Whether an object or ownerReference (``apiVersion`` and ``kind``) is of this kind."""
        group = str(obj.get("apiVersion") or "").rpartition("/")[0]
        return obj.get("kind") == self.wire_kind and group == self.group

    @property
    def watch_name(self) -> str:
        """The lower-case name the hooks' watch and wait calls take (``pytorchjob``)."""
        return self.kind.lower()

    @property
    def failure_error(self) -> type[PyTorchJobFailed]:
        """The exception a failed job of this kind raises (a `PyTorchJobFailed`)."""
        # Imported here: the kinds are pure data that `get_provider_info` reads while Airflow
        # initialises its configuration, and the exceptions import Airflow.
        from airflow_gang.exceptions import PyTorchJobFailed

        return PyTorchJobFailed

    # --- what a job's objects say ---------------------------------------------------------------

    def pod_selector(self, job_name: str) -> str:
        """The label selector of one job's pods."""
        return f"{self.pod_job_label}={job_name}"

    def podgroup_name(self, job_name: str, job_uid: str | None = None) -> str:
        """The name of the job's PodGroup (both Kubeflow kinds name it after the job; a kind
        whose controller names it after the job's uid needs ``job_uid``)."""
        return job_name

    def job_of_podgroup(self, podgroup: JsonDict) -> str | None:
        """The name of the job a PodGroup of this kind belongs to (`podgroup_name` reversed)."""
        name = (podgroup.get("metadata") or {}).get("name")
        return str(name) if name else None

    def leader_pod(self, job_name: str, pods: Iterable[JsonDict] = ()) -> str | None:
        """The pod whose log goes into the task log: rank 0, the leader's first replica."""
        return f"{job_name}-{self.leader.lower()}-0"

    def replica_specs(self, job: JsonDict) -> dict[str, JsonDict]:
        """Replica type → its spec (``replicas``, ``template``), as the job asks for them."""
        specs = (job.get("spec") or {}).get(self.replica_specs_field) or {}
        return {str(replica_type): spec or {} for replica_type, spec in specs.items()}

    def replica_counts(self, job: JsonDict, gang_size: int = 0) -> dict[str, int]:
        """``{"Master": 1, "Worker": 3}``: the replicas the job wants, per type (1 if unsaid).

        :param gang_size: the gang's size when known otherwise (a TrainJob whose runtime holds its
            node count); the job's own word wins.
        """
        return {
            replica_type: int(spec.get("replicas", 1))
            for replica_type, spec in self.replica_specs(job).items()
        }

    def total_replicas(self, job: JsonDict) -> int:
        return sum(self.replica_counts(job).values())

    def gang_requests(self, job: JsonDict) -> dict[str, Decimal]:
        """What the whole gang asks for: each replica's pod requests times its replica count."""
        totals: dict[str, Decimal] = {}
        for replica in self.replica_specs(job).values():
            count = int(replica.get("replicas", 1))
            for resource, amount in pod_requests(replica.get("template") or {}).items():
                totals[resource] = totals.get(resource, Decimal(0)) + parse_quantity(amount) * count
        return totals

    def replica_rows(
        self, job: JsonDict, pods: Iterable[JsonDict] = (), gang_size: int = 0
    ) -> list[JsonDict]:
        """Per replica type: desired, and how many are active, succeeded and failed, as the job's
        status counts them (the page's replica table)."""
        statuses = ((job.get("status") or {}).get("replicaStatuses")) or {}
        rows = []
        for replica_type, desired in self.replica_counts(job, gang_size).items():
            status = statuses.get(replica_type) or {}
            rows.append(
                {
                    "type": replica_type,
                    "desired": desired,
                    "active": int(status.get("active") or 0),
                    "succeeded": int(status.get("succeeded") or 0),
                    "failed": int(status.get("failed") or 0),
                }
            )
        return rows

    def state(self, job: JsonDict) -> tuple[str | None, str]:
        """The job's state in the training-operator's words (``Running``, ``Succeeded``...) and
        its message; the training-operator appends the newest condition last."""
        true = true_conditions(job)
        if not true:
            return None, ""
        return true[-1].get("type"), str(true[-1].get("message") or "")

    def state_time(self, job: JsonDict, state: str) -> str | None:
        """When the job reached ``state`` (``Running``, ``Succeeded``, ``Failed``: `state`'s words),
        as its own status records it (a true condition's ``lastTransitionTime``), or None."""
        for condition in true_conditions(job):
            if condition.get("type") == state:
                moment = condition.get("lastTransitionTime")
                return str(moment) if moment else None
        return None

    def queue(self, job: JsonDict) -> str | None:
        """The Volcano queue the job asks for, as the job says it (the PodGroup's wins)."""
        policy = ((job.get("spec") or {}).get("runPolicy") or {}).get("schedulingPolicy") or {}
        return policy.get("queue")

    def has_podgroup(self, job: JsonDict) -> bool:
        """Whether the job is gang-scheduled with a PodGroup, as its own spec says."""
        return bool(((job.get("spec") or {}).get("runPolicy") or {}).get("schedulingPolicy"))

    def observed_gang_mode(
        self, job: JsonDict, podgroup: JsonDict | None, pods: Iterable[JsonDict] = ()
    ) -> str:
        """How the job is gang-scheduled, as far as its objects tell (the Gang jobs page's guess
        for a job whose task is not known)."""
        return "disabled" if podgroup is None else "provider"

    def runtime_ref(self, job: JsonDict) -> tuple[str, str] | None:
        """``(kind, name)`` of the object whose policy decides the job's gang mode (a TrainJob's
        runtime), or None when the job's own objects tell it."""
        return None

    def runtime_gang_mode(self, runtime: JsonDict | None) -> str | None:
        """The gang mode the object `runtime_ref` names gives the job (None: unknown, or told
        otherwise: then `observed_gang_mode`)."""
        return None

    def suspended(self, job: JsonDict) -> bool:
        """Whether the job is suspended (``suspend_field``)."""
        return bool(_field(job, self.suspend_field))

    def suspend_patch(self, suspended: bool) -> JsonDict:
        """The merge patch that suspends (True) or resumes (False) a job."""
        return _nested(self.suspend_field, suspended)

    def replica_of(self, pod: JsonDict) -> str:
        """``Worker 2``: the pod's replica, as failure messages name it."""
        labels = labels_of(pod)
        replica_type = str(labels.get(self.replica_type_label, "replica")).capitalize()
        return f"{replica_type} {labels.get(self.replica_index_label, '?')}"

    def replica_phrase(self, replica: str) -> str:
        """How a sentence names a failed replica: ``replica Worker 1``."""
        return f"replica {replica}"
