"""A TrainJob's nodes as real local processes (``runtime="process"``): the trainer's command runs
with torchrun's environment, localised for one machine the way a PyTorchJob's is."""

from __future__ import annotations

import sys

from kubernetes import client as k8s

from gang_sim.cluster import SimCluster
from tests.sim.trainer_v2.manifests import TRAINJOB_LABEL, create_trainjob, finished, pod_log, trainjob
from tests.waiting import eventually

PRINT_ENV = (
    "import os; print(' '.join(os.environ[k] for k in "
    "('PET_NODE_RANK', 'PET_NNODES', 'PET_MASTER_ADDR', 'PET_MASTER_PORT', 'JOB_COMPLETION_INDEX')))"
)


def test_each_node_runs_the_trainer_command_with_its_rank() -> None:
    cluster = SimCluster(nodes=2, gpus_per_node=2, schedule_period=0.2, runtime="process")
    with cluster, cluster.api_client() as api:
        core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
        body = trainjob("proc", gpus=None)
        body["spec"]["trainer"].update(command=[sys.executable, "-c", PRINT_ENV], args=[])
        create_trainjob(custom, "default", body)

        assert eventually(lambda: finished(custom, "default", "proc"), timeout=30) == "Complete"
        outputs = sorted(
            pod_log(core, pod.metadata.name, "default").split()
            for pod in core.list_namespaced_pod("default", label_selector=f"{TRAINJOB_LABEL}=proc").items
        )
    assert [words[:3] for words in outputs] == [["0", "2", "127.0.0.1"], ["1", "2", "127.0.0.1"]]
    ports = {words[3] for words in outputs}
    assert len(ports) == 1, "every node computes the same local master port"
    assert ports != {"29500"}, "the port is the job's own, so concurrent jobs do not collide"
    assert [words[4] for words in outputs] == ["0", "1"]  # the Job controller's JOB_COMPLETION_INDEX
