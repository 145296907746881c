"""
### Learning-rate sweep as a TaskFlow function: `@task.pytorchjob` trains digits with real DDP

`train` is an ordinary Python function: it trains a small MLP on scikit-learn's bundled digits
with PyTorch DDP (gloo, CPU) and returns `{"accuracy": ...}`. `@task.pytorchjob` runs it on
every replica of a gang-scheduled PyTorchJob (a Master and a Worker); the task's return value
is rank 0's. `.partial(...).expand(lr=...)` makes one job per learning rate, all in the same
Volcano queue, each waiting in the triggerer (`deferrable=True`); a job that waits longer than
`admission_timeout` is deleted and retried by `gang_retry_policy()`. `pick_best` ranks the
returned accuracies.

No training script and no argument parsing: the function's source and its arguments travel to
the replicas in the pod's environment, and its return value comes back through the master's log.
The image needs Python with torch and scikit-learn; nothing of Airflow.

Settings: params override the Airflow Variables `gang_kubernetes_conn_id`, `gang_namespace`,
`gang_queue` and `gang_image`; the defaults suit the embedded cluster. There, use the process
runtime (`airflow-gang sim --runtime process`, or `make airflow ARGS="--runtime process"`),
which runs each replica's command as a local process with the `python` param's interpreter; the
default script runtime runs no command, so no value would come back.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_gang.retry import gang_retry_policy

DEFAULT_IMAGE = "ghcr.io/acme/train-digits:latest"


def setting(name: str, default: str) -> str:
    """The DAG param ``name`` if given, else the Airflow Variable ``gang_<name>``, else ``default``."""
    return f"{{{{ params.{name} or var.value.get('gang_{name}', '{default}') }}}}"


with DAG(
    dag_id="sweep_taskflow",
    schedule=None,
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    render_template_as_native_obj=True,
    doc_md=__doc__,
    # make airflow marks it: the default script runtime runs no command, so nothing comes back.
    tags=["airflow-gang", "example", "needs-process-runtime"],
    params={
        "learning_rates": Param([0.001, 0.003, 0.01, 0.03], type="array", items={"type": "number"}),
        "epochs": Param(10, type="integer", minimum=1),
        "python": Param("python", type="string", description="interpreter in the image"),
        "kubernetes_conn_id": Param(None, type=["null", "string"]),
        "namespace": Param(None, type=["null", "string"]),
        "queue": Param(None, type=["null", "string"], description="Volcano queue"),
        "image": Param(None, type=["null", "string"]),
    },
) as dag:

    @task
    def learning_rates(params: dict[str, Any] | None = None) -> list[float]:
        """The grid to sweep, from the params."""
        return [float(rate) for rate in (params or {})["learning_rates"]]

    @task.pytorchjob(
        image=setting("image", DEFAULT_IMAGE),
        python="{{ params.python }}",
        workers=1,
        resources={"cpu": "1", "memory": "1Gi"},
        volcano_queue=setting("queue", "default"),
        namespace=setting("namespace", "default"),
        kubernetes_conn_id=setting("kubernetes_conn_id", "kubernetes_default"),
        deferrable=True,
        admission_timeout=dt.timedelta(hours=1),
        retries=2,
        retry_policy=gang_retry_policy(admission_retry_delay=dt.timedelta(minutes=5)),
        map_index_template="lr={{ task.op_kwargs['lr'] }}",
    )
    def train(lr: float, epochs: int, batch_size: int = 32, seed: int = 1) -> dict[str, float]:
        """Train an MLP on digits with DDP: each replica trains on its shard, DDP averages gradients."""
        import torch
        import torch.distributed as dist
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
        from sklearn.preprocessing import StandardScaler
        from torch import nn
        from torch.nn.parallel import DistributedDataParallel
        from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

        torch.set_num_threads(1)  # replicas share the machine's cores on the embedded cluster
        torch.manual_seed(seed)
        digits = load_digits()
        train_x, test_x, train_y, test_y = train_test_split(
            digits.data, digits.target, test_size=0.2, stratify=digits.target, random_state=0
        )
        scaler = StandardScaler().fit(train_x)
        data = TensorDataset(
            torch.tensor(scaler.transform(train_x), dtype=torch.float32), torch.tensor(train_y)
        )
        sampler = DistributedSampler(data, shuffle=True, seed=seed)  # this rank's shard
        loader = DataLoader(data, batch_size=batch_size, sampler=sampler)
        model = DistributedDataParallel(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)))
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        loss_fn = nn.CrossEntropyLoss()
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for features, labels in loader:
                optimizer.zero_grad()
                loss = loss_fn(model(features), labels)
                loss.backward()
                optimizer.step()
            if dist.get_rank() == 0:
                print(f"lr={lr} epoch {epoch + 1}/{epochs} loss={loss.item():.4f}", flush=True)
        model.eval()
        with torch.no_grad():
            predicted = model(torch.tensor(scaler.transform(test_x), dtype=torch.float32)).argmax(dim=1)
        accuracy = float((predicted == torch.tensor(test_y)).float().mean())
        return {"accuracy": round(accuracy, 4), "lr": lr, "world_size": dist.get_world_size()}

    @task
    def pick_best(results: list[dict[str, Any]]) -> dict[str, Any]:
        """The learning rate with the best test accuracy."""
        ranked = sorted(results, key=lambda run: run["accuracy"], reverse=True)
        for place, run in enumerate(ranked, start=1):
            print(f"{place:>2}. accuracy={run['accuracy']:.4f}  lr={run['lr']}")
        return {**ranked[0], "runs": len(ranked)}

    # Native rendering: "{{ params.epochs }}" reaches the function as an int, not a string.
    pick_best(train.partial(epochs="{{ params.epochs }}").expand(lr=learning_rates()))
