"""Built-in openAPIV3Schemas for Kubeflow Trainer v2 and JobSet (TrainJob, runtimes, JobSet).

Written by hand from the facts of the upstream CRDs (trainer.kubeflow.org v1alpha1 as of
Trainer v2.3.0, jobset.x-k8s.io v1alpha2 as of JobSet v0.12.0) and, like ``schemas.py``,
deliberately smaller: they type the fields the simulated controllers and the provider use,
carry the upstream defaults (``runtimeRef.kind``/``apiGroup``, ``suspend``, ``managedBy``,
``replicas``, ``groupName``, the policy defaults) so that stored objects look the same, and keep
the embedded pod specs and the less used policies open (``x-kubernetes-preserve-unknown-fields``)
instead of restating them. Never stricter than upstream. CEL rules (immutability of
``runtimeRef``/``trainer``, the TrainJob name rule) are not evaluated by this server; the name
rule is the TrainJob row's ``dns1035`` name rule instead (``../resources.py``).
"""

from __future__ import annotations

from gang_sim.apiserver.kinds.schema_parts import (
    JsonDict,
    array,
    int32,
    obj,
    pod_template,
    quantities,
    root,
    string,
)

TRAINER_GROUP = "trainer.kubeflow.org"
DEFAULT_RUNTIME_KIND = "ClusterTrainingRuntime"
DEFAULT_MANAGED_BY = "trainer.kubeflow.org/trainjob-controller"


def _boolean(**extra: object) -> JsonDict:
    return {"type": "boolean", **extra}


def _int64(**extra: object) -> JsonDict:
    return {"type": "integer", "format": "int64", **extra}


def _map_list(items: JsonDict, key: str, **extra: object) -> JsonDict:
    """A list merged by ``key`` (``x-kubernetes-list-type: map``), as controller-gen marks it."""
    return array(items, **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [key]}, **extra)


def _metadata() -> JsonDict:
    """The EmbeddedObjectMetadata of templates: labels, annotations and little else."""
    return obj(
        {
            "labels": obj(values=string()),
            "annotations": obj(values=string()),
            "name": string(),
            "namespace": string(),
            "finalizers": array(string()),
        }
    )


def metav1_conditions() -> JsonDict:
    """``[]metav1.Condition`` with the API machinery's own constraints."""
    return _map_list(
        obj(
            {
                "type": string(maxLength=316),
                "status": string(enum=["True", "False", "Unknown"]),
                "reason": string(maxLength=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"),
                "message": string(maxLength=32768),
                "lastTransitionTime": string(format="date-time"),
                "observedGeneration": _int64(minimum=0),
            },
            ["lastTransitionTime", "message", "reason", "status", "type"],
        ),
        "type",
    )


def _job_template() -> JsonDict:
    """batch/v1 JobTemplateSpec: the Job fields JobSet and the simulated Job controller read."""
    return obj(
        {
            "metadata": _metadata(),
            "spec": obj(
                {
                    "parallelism": int32(),
                    "completions": int32(),
                    "completionMode": string(),
                    "backoffLimit": int32(),
                    "backoffLimitPerIndex": int32(),
                    "maxFailedIndexes": int32(),
                    "activeDeadlineSeconds": _int64(),
                    "ttlSecondsAfterFinished": int32(),
                    "suspend": _boolean(),
                    "manualSelector": _boolean(),
                    "podReplacementPolicy": string(),
                    "managedBy": string(),
                    "selector": obj(open_=True),
                    "podFailurePolicy": obj(open_=True),
                    "successPolicy": obj(open_=True),
                    "template": pod_template(),
                },
                ["template"],
            ),
        }
    )


def jobset_spec() -> JsonDict:
    """JobSetSpec: shared by the JobSet kind and the runtimes' ``spec.template.spec``."""
    replicated_job = obj(
        {
            "name": string(),
            "groupName": string(default="default"),
            "replicas": int32(default=1),
            "dependsOn": _map_list(
                obj({"name": string(), "status": string(enum=["Ready", "Complete"])}, ["name", "status"]),
                "name",
                maxItems=5,
            ),
            "template": _job_template(),
        },
        ["name", "template"],
    )
    return obj(
        {
            "replicatedJobs": _map_list(replicated_job, "name"),
            "network": obj(
                {
                    "enableDNSHostnames": _boolean(),
                    "publishNotReadyAddresses": _boolean(),
                    "subdomain": string(),
                }
            ),
            "successPolicy": obj(
                {"operator": string(enum=["All", "Any"]), "targetReplicatedJobs": array(string())},
                ["operator"],
            ),
            "failurePolicy": obj(
                {
                    "maxRestarts": int32(),
                    "restartStrategy": string(
                        default="Recreate", enum=["Recreate", "BlockingRecreate", "InPlaceRestart"]
                    ),
                    "rules": array(obj(open_=True)),
                }
            ),
            "startupPolicy": obj(
                {"startupPolicyOrder": string(enum=["AnyOrder", "InOrder"])}, ["startupPolicyOrder"]
            ),
            "coordinator": obj(
                {"replicatedJob": string(), "jobIndex": {"type": "integer"}, "podIndex": {"type": "integer"}},
                ["replicatedJob"],
            ),
            "suspend": _boolean(),
            "managedBy": string(),
            "ttlSecondsAfterFinished": int32(minimum=0),
            "volumeClaimPolicies": array(obj(open_=True), maxItems=50),
        }
    )


TRAINJOB_SCHEMA: JsonDict = root(
    obj(
        {
            "runtimeRef": obj(
                {
                    "name": string(maxLength=253),
                    "apiGroup": string(default=TRAINER_GROUP, maxLength=253),
                    "kind": string(default=DEFAULT_RUNTIME_KIND, maxLength=253),
                },
                ["name"],
            ),
            "initializer": obj(open_=True),
            "trainer": obj(
                {
                    "image": string(maxLength=500),
                    "command": array(string(), maxItems=128),
                    "args": array(string(), maxItems=128),
                    "env": _map_list(
                        obj({"name": string(), "value": string(), "valueFrom": obj(open_=True)}, ["name"]),
                        "name",
                        maxItems=128,
                    ),
                    "numNodes": int32(),
                    "numProcPerNode": int32(),
                    "resourcesPerNode": obj(
                        {
                            "limits": quantities(),
                            "requests": quantities(),
                            "claims": _map_list(
                                obj({"name": string(), "request": string()}, ["name"]), "name"
                            ),
                        }
                    ),
                }
            ),
            "runtimePatches": _map_list(
                obj(
                    {
                        "manager": string(maxLength=253),
                        "time": string(format="date-time"),
                        "trainingRuntimeSpec": obj(open_=True),
                    },
                    ["manager"],
                ),
                "manager",
                maxItems=16,
            ),
            "suspend": _boolean(default=False),
            "managedBy": string(default=DEFAULT_MANAGED_BY, maxLength=253),
            "activeDeadlineSeconds": _int64(minimum=1),
        },
        ["runtimeRef"],
    ),
    obj(
        {
            "conditions": {**metav1_conditions(), "maxItems": 8},
            "jobsStatus": _map_list(
                obj(
                    {
                        "name": string(maxLength=253),
                        "ready": int32(minimum=0),
                        "succeeded": int32(minimum=0),
                        "failed": int32(minimum=0),
                        "active": int32(minimum=0),
                        "suspended": int32(minimum=0),
                    },
                    ["active", "failed", "name", "ready", "succeeded", "suspended"],
                ),
                "name",
                maxItems=100,
            ),
            "trainerStatus": obj(open_=True),
        }
    ),
)

# TrainingRuntime and ClusterTrainingRuntime share their spec (and have no status).
TRAINING_RUNTIME_SCHEMA: JsonDict = obj(
    {
        "apiVersion": string(),
        "kind": string(),
        "metadata": obj(),
        "spec": obj(
            {
                "mlPolicy": obj(
                    {
                        "numNodes": int32(),
                        "torch": obj(open_=True),
                        "mpi": obj(open_=True),
                        "jax": obj(open_=True),
                        "xgboost": obj(open_=True),
                        "flux": obj(open_=True),
                    }
                ),
                "podGroupPolicy": obj(
                    {
                        "coscheduling": obj({"scheduleTimeoutSeconds": int32(default=60)}),
                        "volcano": obj(
                            {
                                "networkTopology": obj(
                                    {
                                        "mode": string(default="hard", enum=["hard", "soft"]),
                                        "highestTierAllowed": {"type": "integer", "default": 1},
                                    }
                                )
                            }
                        ),
                    }
                ),
                "template": obj({"metadata": _metadata(), "spec": jobset_spec()}),
            }
        ),
    }
)

JOBSET_SCHEMA: JsonDict = root(
    jobset_spec(),
    obj(
        {
            "conditions": metav1_conditions(),
            "replicatedJobsStatus": _map_list(
                obj(
                    {
                        "name": string(),
                        "ready": int32(),
                        "succeeded": int32(),
                        "failed": int32(),
                        "active": int32(),
                        "suspended": int32(),
                        "jobRestarts": array({"type": "integer"}, maxItems=1024),
                        "jobRestartsCountTowardsMax": array({"type": "integer"}, maxItems=1024),
                    },
                    ["active", "failed", "name", "ready", "succeeded", "suspended"],
                ),
                "name",
            ),
            "restarts": int32(),
            "restartsCountTowardsMax": int32(),
            "terminalState": string(),
            "currentInPlaceRestartAttempt": int32(minimum=0),
            "previousInPlaceRestartAttempt": int32(minimum=0),
        }
    ),
)
