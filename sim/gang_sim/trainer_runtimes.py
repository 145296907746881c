"""The ClusterTrainingRuntimes every `SimCluster` starts with, for Kubeflow Trainer v2 TrainJobs.

- ``torch-distributed`` (`GANG_RUNTIME`): PyTorch with torchrun's environment
  (``mlPolicy: {numNodes: 1, torch: {}}``), one replicated job ``node`` whose container ``node``
  runs the trainer, ``podGroupPolicy: {volcano: {}}`` and ``schedulerName: volcano`` in the pod
  spec: the trainer makes one Volcano PodGroup per TrainJob, so a TrainJob's nodes are placed all
  together or not at all.
- ``torch-distributed-no-gang`` (`NO_GANG_RUNTIME`): the same without ``podGroupPolicy`` and
  without ``schedulerName``, like the upstream chart's ``torch-distributed``: no PodGroup, the
  default scheduler places the nodes one by one, and TrainJobs submitted together can each hold
  some GPUs while none can start (the partial-placement deadlock).

A TrainJob picks one with ``spec.runtimeRef: {name: torch-distributed}`` (kind
``ClusterTrainingRuntime`` is the default). Upstream's own ``torch-distributed`` has no
``podGroupPolicy``; here the gang-scheduled runtime takes that name because it is the one the
provider is meant to use. Both are ordinary objects: a test may change or delete them, or add
its own (namespaced ``TrainingRuntime`` too).
"""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

JsonDict = dict[str, Any]

GANG_RUNTIME = "torch-distributed"
NO_GANG_RUNTIME = "torch-distributed-no-gang"
TRAINER_IMAGE = "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"
GROUP, VERSION, PLURAL = "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes"


def torch_runtime(name: str, *, gang: bool) -> JsonDict:
    """A torch ClusterTrainingRuntime; ``gang`` adds the Volcano podGroupPolicy and scheduler."""
    pod_spec: JsonDict = {"containers": [{"name": "node", "image": TRAINER_IMAGE}]}
    spec: JsonDict = {"mlPolicy": {"numNodes": 1, "torch": {}}}
    if gang:
        pod_spec["schedulerName"] = "volcano"
        spec["podGroupPolicy"] = {"volcano": {}}
    spec["template"] = {
        "spec": {
            "replicatedJobs": [
                {
                    "name": "node",
                    "template": {
                        "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                        "spec": {"template": {"spec": pod_spec}},
                    },
                }
            ]
        }
    }
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": spec,
    }


def default_runtimes() -> list[JsonDict]:
    return [torch_runtime(GANG_RUNTIME, gang=True), torch_runtime(NO_GANG_RUNTIME, gang=False)]


def install_default_runtimes(api: k8s.ApiClient) -> None:
    """Create the default runtimes; one that exists already (a restarted cluster) is kept."""
    custom = k8s.CustomObjectsApi(api)
    for runtime in default_runtimes():
        try:
            custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, runtime)
        except k8s.ApiException as error:
            if error.status != 409:
                raise
