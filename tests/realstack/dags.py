"""The DAG files of the real-stack scenarios (written into the stack's dags folder).

Each is a file users could copy: the job arguments are the operator's, and the simulated work is
set through the script runtime's pod annotations (duration, exit code, log).
"""

from __future__ import annotations

# The simulated work of a replica, as the script runtime reads it from the pod's annotations.
WORK_FUNCTION = """
def work(seconds, exit_code=0, log="epoch 1/1 accuracy=0.9"):
    return {"metadata": {"annotations": {
        "sim.airflow-gang.io/duration": str(seconds),
        "sim.airflow-gang.io/exit-code": str(exit_code),
        "sim.airflow-gang.io/log": log,
    }}}
"""
_HEADER = (
    """
import datetime as dt
from airflow.sdk import DAG, task
from airflow_gang.operators.pytorch_job import PyTorchJobOperator
"""
    + WORK_FUNCTION
)


def sweep_dag(
    dag_id: str, gang_scheduling: str, admission_timeout: float, conn_id: str = "kubernetes_default"
) -> str:
    """Six deferrable 4-GPU jobs (Master + 3 Workers, 3 s each) mapped on a 4-GPU pool, retries=0."""
    return (
        _HEADER
        + f"""
with DAG("{dag_id}", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator.partial(
        task_id="train", image="ghcr.io/acme/train:1", workers=3, resources={{"nvidia.com/gpu": 1}},
        gang_scheduling="{gang_scheduling}", deferrable=True, admission_timeout={admission_timeout},
        retries=0, poll_interval=30, pod_template=work(3), kubernetes_conn_id="{conn_id}",
    ).expand(env=[{{"SWEEP_INDEX": str(i)}} for i in range(6)])
"""
    )


# With gangs: one whole gang at a time, never two placed together.
GANG_SWEEP = sweep_dag("rs_gang_sweep", "provider", 300)
# The default mode on the seed's own cluster: a training-operator started with
# --gang-scheduler-name=volcano (conftest's `gang_flag_cluster`, behind this connection).
GANG_FLAG_CONNECTION = "kubernetes_gang_flag"
GANG_FLAG_SWEEP = sweep_dag("rs_gang_flag_sweep", "provider", 300, conn_id=GANG_FLAG_CONNECTION)
# Without: partial placements deadlock the pool until each job's admission timeout deletes it.
NO_GANG_SWEEP = sweep_dag("rs_no_gang_sweep", "disabled", 25)

LONG_JOB = (
    _HEADER
    + """
# One long job per mode: killed or failed from outside by the tests.
with DAG("rs_long_job", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    for deferrable in (True, False):
        PyTorchJobOperator(
            task_id="deferred" if deferrable else "in_worker", image="ghcr.io/acme/train:1", workers=1,
            resources={"nvidia.com/gpu": 1}, deferrable=deferrable, retries=0, poll_interval=1,
            pod_template=work(600),
        )
"""
)

RETRY_AFTER_TIMEOUT = (
    _HEADER
    + """
# The pool is busy when try 1 queues: its admission timeout deletes it, try 2 gets the gang.
with DAG("rs_retry_after_timeout", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=3, resources={"nvidia.com/gpu": 1},
        deferrable=True, admission_timeout=8, retries=2, retry_delay=dt.timedelta(seconds=1),
        poll_interval=30, pod_template=work(2),
    )
"""
)

REPLICA_FAILURE = (
    _HEADER
    + """
# Worker 0 exits with code 3: the task fails with PyTorchJobFailed naming it.
with DAG("rs_replica_failure", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        deferrable=True, retries=0, restart_policy="Never", poll_interval=30,
        pod_template=work(1, exit_code=3, log="loading shard 7\\nRuntimeError: CUDA error: out of memory"),
    )
"""
)

ADOPT_AFTER_KILL = (
    _HEADER
    + """
# Waits in the worker, looking only every 60 s; the test SIGKILLs the task process after the job
# Succeeded (the worker never saw it end). The retry must adopt the finished job, not train again.
with DAG("rs_adopt_after_kill", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        deferrable=False, retries=1, retry_delay=dt.timedelta(seconds=1), poll_interval=60,
        pod_template=work(3),
    )
"""
)

# The Volcano queue rs_triggerer_kill's third task submits to; test_process_faults.py creates it
# with a quota of one GPU, so that task's two-GPU gang is never admitted.
SMALL_QUOTA_QUEUE = "rs-small-quota"

TRIGGERER_KILL = (
    _HEADER
    + f"""
# Three deferred gangs while the test SIGKILLs the triggerer and starts a new one: two fit, one
# training for 20 s (it ends while no triggerer runs), one for 40 s (it ends under the new one);
# the third asks more of its queue than the queue's quota, so it stays queued until its
# admission timeout, whose deadline must survive the restart.
with DAG("rs_triggerer_kill", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    for index, seconds in enumerate((20, 40)):
        PyTorchJobOperator(
            task_id=f"fits_{{index}}", image="ghcr.io/acme/train:1", workers=1,
            resources={{"nvidia.com/gpu": 1}}, deferrable=True, retries=0, poll_interval=5,
            pod_template=work(seconds),
        )
    PyTorchJobOperator(
        task_id="never_admitted", image="ghcr.io/acme/train:1", workers=1,
        resources={{"nvidia.com/gpu": 1}}, queue="{SMALL_QUOTA_QUEUE}", deferrable=True,
        admission_timeout=50, retries=0, poll_interval=5, pod_template=work(5),
    )
"""
)

SYNC_TASK_KILL = (
    _HEADER
    + """
# Waits in the worker; the test SIGKILLs the task process mid-wait. The retry must reattach to
# the job of try 1, and no other job may ever be created for the task. The job runs long enough
# to be still training when the retry starts: the retry joins a live wait, not a finished job.
with DAG("rs_sync_task_kill", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        deferrable=False, retries=1, retry_delay=dt.timedelta(seconds=1), poll_interval=1,
        pod_template=work(30),
    )
"""
)

CLEAR_TRIGGERER_DOWN = (
    _HEADER
    + """
# Deferred, then cleared while no triggerer runs (so no on_kill of ours can delete try 1's job):
# try 1 trains for ten minutes, the try after the clear for three seconds.
with DAG("rs_clear_triggerer_down", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        deferrable=True, retries=0, poll_interval=5,
        pod_template=work("{{ 600 if ti.try_number == 1 else 3 }}"),
    )
"""
)

# The name of the connection test_credentials.py stores in the metadata DB, the simulator's
# kubeconfig inline in its extras: the bearer token lives in the connection itself.
INLINE_KUBECONFIG_CONN_ID = "rs_inline_kubeconfig"

INLINE_CREDENTIALS = (
    _HEADER
    + f"""
# A deferred job through a connection holding the whole kubeconfig (token included) in its
# extras, and a downstream task reading its result: no credential may reach the trigger table,
# the XComs, the task state store or the task logs.
with DAG("rs_inline_credentials", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    train = PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=1, resources={{"nvidia.com/gpu": 1}},
        kubernetes_conn_id="{INLINE_KUBECONFIG_CONN_ID}", deferrable=True, retries=0, poll_interval=5,
        pod_template=work(15),
    )

    @task
    def report(result):
        return {{"job": result["name"], "state": result["state"]}}

    report(train.output)
"""
)

_TRAINJOB_HEADER = """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.train_job import TrainJobOperator

def work(seconds):
    return {"metadata": {"annotations": {"sim.airflow-gang.io/duration": str(seconds)}}}
"""

TRAINJOB_LONG = (
    _TRAINJOB_HEADER
    + """
# A deferred 2-node TrainJob training for ten minutes: marked failed from outside by the test.
with DAG("rs_trainjob_long", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    TrainJobOperator(
        task_id="deferred", image="ghcr.io/acme/train:1", num_nodes=2,
        resources_per_node={"nvidia.com/gpu": 1}, deferrable=True, retries=0, poll_interval=1,
        pod_template=work(600),
    )
"""
)

TRAINJOB_RETRY_AFTER_TIMEOUT = (
    _TRAINJOB_HEADER
    + """
# The pool is busy when try 1 queues: its admission timeout deletes it, a retry gets the gang.
from airflow_gang.retry import gang_retry_policy

with DAG(
    "rs_trainjob_retry_after_timeout", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False
) as dag:
    TrainJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", num_nodes=4,
        resources_per_node={"nvidia.com/gpu": 1},
        deferrable=True, admission_timeout=6, retries=3, retry_delay=dt.timedelta(seconds=1),
        retry_policy=gang_retry_policy(admission_retry_delay=dt.timedelta(seconds=1)),
        poll_interval=30, pod_template=work(1),
    )
"""
)

TRAINJOB_OUTAGE = (
    _TRAINJOB_HEADER
    + """
# Two 2-node TrainJobs waited for in the triggerer and in the worker; the test closes the API
# server's listener while both train. Neither wait may fail or delete its job for that.
with DAG("rs_trainjob_outage", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    for deferrable in (True, False):
        TrainJobOperator(
            task_id="deferred" if deferrable else "in_worker", image="ghcr.io/acme/train:1", num_nodes=2,
            resources_per_node={"nvidia.com/gpu": 1}, deferrable=deferrable, retries=0, poll_interval=1,
            pod_template=work(20),
        )
"""
)

TRAINJOB_SYNC_TASK_KILL = (
    _TRAINJOB_HEADER
    + """
# Waits in the worker; the test SIGKILLs the task process mid-wait. The retry must reattach to
# the TrainJob of try 1 (still training when the retry starts), and no other may be created.
with DAG(
    "rs_trainjob_sync_task_kill", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False
) as dag:
    TrainJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", num_nodes=2, resources_per_node={"nvidia.com/gpu": 1},
        deferrable=False, retries=1, retry_delay=dt.timedelta(seconds=1), poll_interval=1,
        pod_template=work(30),
    )
"""
)

TRAINJOB_LONG_BOTH = (
    _TRAINJOB_HEADER
    + """
# One 2-node TrainJob training for ten minutes per mode: failed or killed from outside by the tests.
with DAG("rs_trainjob_long_both", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    for deferrable in (True, False):
        TrainJobOperator(
            task_id="deferred" if deferrable else "in_worker", image="ghcr.io/acme/train:1", num_nodes=2,
            resources_per_node={"nvidia.com/gpu": 1}, deferrable=deferrable, retries=0, poll_interval=1,
            pod_template=work(600),
        )
"""
)

TRAINJOB_TRIGGERER_KILL = (
    _TRAINJOB_HEADER
    + """
# Three deferred TrainJobs while the test SIGKILLs the triggerer and starts a new one: two fit, one
# training for 20 s (it ends while no triggerer runs), one for 40 s (it ends under the new one);
# the third is a 5-node gang on a 4-GPU pool, never admitted until its admission timeout, whose
# deadline must survive the restart.
with DAG(
    "rs_trainjob_triggerer_kill", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False
) as dag:
    for index, seconds in enumerate((20, 40)):
        TrainJobOperator(
            task_id=f"fits_{index}", image="ghcr.io/acme/train:1", num_nodes=1,
            resources_per_node={"nvidia.com/gpu": 1}, deferrable=True, retries=0, poll_interval=5,
            pod_template=work(seconds),
        )
    TrainJobOperator(
        task_id="never_admitted", image="ghcr.io/acme/train:1", num_nodes=5,
        resources_per_node={"nvidia.com/gpu": 1}, deferrable=True, admission_timeout=50, retries=0,
        poll_interval=5, pod_template=work(5),
    )
"""
)


# A running gang loses the node it packs onto (tests/realstack/test_disruptions.py): four 4-CPU
# replicas fill one 16-CPU node, and fit again on the other one.
def disruption_dag(dag_id: str, on_disruption: str, *, deferrable: bool, retries: int) -> str:
    return (
        _HEADER
        + f"""
from airflow_gang.retry import gang_retry_policy

with DAG("{dag_id}", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=3, resources={{"cpu": "4"}},
        deferrable={deferrable}, on_disruption="{on_disruption}", admission_timeout=120, poll_interval=5,
        checkpoint_dir="/ckpt/{{{{ dag.dag_id }}}}/{{{{ task.task_id }}}}/{{{{ run_id }}}}",
        retries={retries}, retry_delay=dt.timedelta(seconds=0),
        retry_policy=gang_retry_policy(admission_retry_delay=1, disruption_retry_delay=1),
        pod_template=work(12),
    )
"""
    )


DISRUPTION_WAIT = disruption_dag("rs_disruption_wait", "wait", deferrable=True, retries=0)
DISRUPTION_WAIT_IN_WORKER = disruption_dag(
    "rs_disruption_wait_in_worker", "wait", deferrable=False, retries=0
)
DISRUPTION_RETRY = disruption_dag("rs_disruption_retry", "retry", deferrable=True, retries=1)

# Three deferred 2-GPU gangs (20 s each) mapped on the 4-GPU pool: two run at once, one per node,
# while a node is drained (tests/realstack/test_disruptions.py).
DISRUPTION_DRAIN_SWEEP = (
    _HEADER
    + """
with DAG(
    "rs_disruption_drain_sweep", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False
) as dag:
    PyTorchJobOperator.partial(
        task_id="train", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        deferrable=True, on_disruption="wait", admission_timeout=180, retries=0, poll_interval=5,
        pod_template=work(20),
    ).expand(env=[{"SWEEP_INDEX": str(i)} for i in range(3)])
"""
)

DAG_FILES = {
    "rs_adopt_after_kill": ADOPT_AFTER_KILL,
    "rs_gang_sweep": GANG_SWEEP,
    "rs_gang_flag_sweep": GANG_FLAG_SWEEP,
    "rs_no_gang_sweep": NO_GANG_SWEEP,
    "rs_long_job": LONG_JOB,
    "rs_retry_after_timeout": RETRY_AFTER_TIMEOUT,
    "rs_replica_failure": REPLICA_FAILURE,
    "rs_triggerer_kill": TRIGGERER_KILL,
    "rs_sync_task_kill": SYNC_TASK_KILL,
    "rs_inline_credentials": INLINE_CREDENTIALS,
    "rs_clear_triggerer_down": CLEAR_TRIGGERER_DOWN,
    "rs_trainjob_long": TRAINJOB_LONG,
    "rs_trainjob_retry_after_timeout": TRAINJOB_RETRY_AFTER_TIMEOUT,
    "rs_trainjob_outage": TRAINJOB_OUTAGE,
    "rs_trainjob_sync_task_kill": TRAINJOB_SYNC_TASK_KILL,
    "rs_trainjob_long_both": TRAINJOB_LONG_BOTH,
    "rs_trainjob_triggerer_kill": TRAINJOB_TRIGGERER_KILL,
    "rs_disruption_wait": DISRUPTION_WAIT,
    "rs_disruption_wait_in_worker": DISRUPTION_WAIT_IN_WORKER,
    "rs_disruption_retry": DISRUPTION_RETRY,
    "rs_disruption_drain_sweep": DISRUPTION_DRAIN_SWEEP,
}
