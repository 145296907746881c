"""Built-in openAPIV3Schemas for the custom resources (PyTorchJob, PodGroup, Queue, Volcano Job).

The built-in schemas are the project's own, written by hand and deliberately smaller than the
upstream CRDs: they type and constrain the fields the provider and the controllers use
(replica specs, scheduling policy, PodGroup/Queue spec and status, resource quantities) and
mark the embedded pod specs ``x-kubernetes-preserve-unknown-fields`` instead of restating
the whole PodSpec. They are never stricter than upstream, so an object they accept is one a
real cluster would store. ``crd_loader.load_crds`` reads ``apiextensions.k8s.io/v1``
CustomResourceDefinition YAML (e.g. the upstream files) so tests can prove objects pass the
real schemas (see ``../crd_loader.py``).
"""

from __future__ import annotations

# The building blocks live in `schema_parts` (the Trainer v2 schemas share them); the short
# private names keep these long literals readable.
from gang_sim.apiserver.kinds.schema_parts import DNS_SUBDOMAIN_PATTERN, JsonDict
from gang_sim.apiserver.kinds.schema_parts import array as _arr
from gang_sim.apiserver.kinds.schema_parts import conditions as _conditions
from gang_sim.apiserver.kinds.schema_parts import int32 as _int
from gang_sim.apiserver.kinds.schema_parts import obj as _obj
from gang_sim.apiserver.kinds.schema_parts import pod_template as _pod_template
from gang_sim.apiserver.kinds.schema_parts import quantities as _quantities
from gang_sim.apiserver.kinds.schema_parts import root as _root
from gang_sim.apiserver.kinds.schema_parts import string as _str

PYTORCHJOB_SCHEMA: JsonDict = _root(
    _obj(
        {
            "pytorchReplicaSpecs": _obj(
                values=_obj(
                    {
                        "replicas": _int(),
                        "restartPolicy": _str(),
                        "template": _pod_template(),
                    }
                )
            ),
            "runPolicy": _obj(
                {
                    "cleanPodPolicy": _str(),
                    "ttlSecondsAfterFinished": _int(),
                    "activeDeadlineSeconds": {"type": "integer", "format": "int64"},
                    "backoffLimit": _int(),
                    "suspend": {"type": "boolean", "default": False},
                    "managedBy": _str(),
                    "schedulingPolicy": _obj(
                        {
                            "minAvailable": _int(),
                            "queue": _str(),
                            "minResources": _quantities(),
                            "priorityClass": _str(),
                            "scheduleTimeoutSeconds": _int(),
                        }
                    ),
                }
            ),
            "elasticPolicy": _obj(open_=True),
            "nprocPerNode": _str(),
        },
        ["pytorchReplicaSpecs"],
    ),
    _obj(
        {
            "conditions": _arr(
                _obj(
                    {
                        "type": _str(),
                        "status": _str(),
                        "reason": _str(),
                        "message": _str(),
                        "lastUpdateTime": _str(format="date-time"),
                        "lastTransitionTime": _str(format="date-time"),
                    },
                    ["status", "type"],
                )
            ),
            "replicaStatuses": _obj(
                values=_obj(
                    {
                        "active": _int(),
                        "succeeded": _int(),
                        "failed": _int(),
                        "selector": _str(),
                        "labelSelector": _obj(open_=True),
                    }
                )
            ),
            "startTime": _str(format="date-time"),
            "completionTime": _str(format="date-time"),
            "lastReconcileTime": _str(format="date-time"),
        }
    ),
)

PODGROUP_SCHEMA: JsonDict = _root(
    _obj(
        {
            "minMember": _int(minimum=0),
            "minTaskMember": _obj(values=_int()),
            "queue": _str(default="default", maxLength=253, pattern=DNS_SUBDOMAIN_PATTERN),
            "priorityClassName": _str(maxLength=253),
            "minResources": _quantities(),
            "networkTopology": _obj(
                {
                    "mode": _str(default="hard", enum=["hard", "soft"]),
                    "highestTierAllowed": {"type": "integer", "minimum": 0},
                    "highestTierName": _str(maxLength=253),
                }
            ),
            "subGroupPolicy": _arr(_obj(open_=True)),
        }
    ),
    _obj(
        {
            "phase": _str(enum=["Pending", "Running", "Unknown", "Inqueue", "Completed"]),
            "conditions": _conditions(),
            "running": _int(minimum=0),
            "succeeded": _int(minimum=0),
            "failed": _int(minimum=0),
        }
    ),
)

QUEUE_SCHEMA: JsonDict = _root(
    _obj(
        {
            "weight": _int(default=1, minimum=1, maximum=65535),
            "capability": _quantities(),
            "deserved": _quantities(),
            "guarantee": _obj({"resource": _quantities()}),
            "reclaimable": {"type": "boolean"},
            "parent": _str(maxLength=253, pattern=DNS_SUBDOMAIN_PATTERN),
            "priority": _int(minimum=0),
            "type": _str(maxLength=253),
            "dequeueStrategy": _str(default="traverse", enum=["fifo", "traverse"]),
            "affinity": _obj(open_=True),
            "extendClusters": _arr(_obj(open_=True)),
        }
    ),
    _obj(
        {
            "state": _str(),
            "allocated": _quantities(),
            "reservation": _obj(open_=True),
            "pending": _int(minimum=0),
            "running": _int(minimum=0),
            "inqueue": _int(minimum=0),
            "completed": _int(minimum=0),
            "unknown": _int(minimum=0),
        }
    ),
)

VOLCANO_JOB_SCHEMA: JsonDict = _root(
    _obj(
        {
            "schedulerName": _str(),
            "minAvailable": _int(minimum=0),
            "minSuccess": _int(minimum=1),
            "queue": _str(default="default", maxLength=253, pattern=DNS_SUBDOMAIN_PATTERN),
            "maxRetry": _int(default=3, minimum=0),
            "ttlSecondsAfterFinished": _int(minimum=0),
            "priorityClassName": _str(),
            "plugins": _obj(values=_arr(_str())),
            "policies": _arr(_obj(open_=True)),
            "volumes": _arr(_obj(open_=True)),
            "tasks": _arr(
                _obj(
                    {
                        # The CRD's pattern: a task name is a DNS-1123 label (it names pods).
                        "name": _str(maxLength=63, pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
                        "replicas": _int(minimum=0),
                        "minAvailable": _int(minimum=0),
                        "maxRetry": _int(minimum=0),
                        "template": _pod_template(),
                        "policies": _arr(_obj(open_=True)),
                        "dependsOn": _obj(open_=True),
                    },
                    open_=True,
                )
            ),
        },
        open_=True,
    ),
    _obj(open_=True),
)
