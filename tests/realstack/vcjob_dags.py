"""The DAG files of the real-stack Volcano Job scenarios (tests/realstack/test_vcjobs.py), written
into the stack's dags folder by conftest.py beside tests/realstack/dags.py's.

Each is a file users could copy: the job arguments are `VolcanoJobOperator`'s, and the simulated
work is set through the script runtime's pod annotations (duration, exit code, log).
"""

from __future__ import annotations

from tests.realstack.dags import WORK_FUNCTION

_HEADER = (
    """
import datetime as dt
from airflow.sdk import DAG
from airflow_gang.operators.volcano_job import VolcanoJobOperator
"""
    + WORK_FUNCTION
)


def vcjob_sweep_dag(dag_id: str, admission_timeout: float, min_available: int | None) -> str:
    """Six deferrable 4-pod Volcano Jobs (master + 3 workers, 1 GPU each, 2 s) mapped on the
    4-GPU pool, retries=0; ``min_available=None`` is one gang of four, 1 is not a gang."""
    return (
        _HEADER
        + f"""
with DAG("{dag_id}", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    VolcanoJobOperator.partial(
        task_id="train", image="ghcr.io/acme/train:1", workers=3, resources={{"nvidia.com/gpu": 1}},
        min_available={min_available}, deferrable=True, admission_timeout={admission_timeout},
        retries=0, poll_interval=30, pod_template=work(2),
    ).expand(env=[{{"SWEEP_INDEX": str(i)}} for i in range(6)])
"""
    )


# One whole gang at a time: Volcano places a job only when all four pods fit.
VCJOB_GANG_SWEEP = vcjob_sweep_dag("rs_vcjob_gang_sweep", 300, None)
# minAvailable 1: Volcano places the jobs' pods a few at a time; the pods of each wait for
# WORLD_SIZE of them, so jobs holding part of the pool deadlock until their admission timeouts.
VCJOB_NO_GANG_SWEEP = vcjob_sweep_dag("rs_vcjob_no_gang_sweep", 12, 1)

VCJOB_MAX_RETRY = (
    _HEADER
    + """
OUT_OF_MEMORY = "loading shard 7\\nRuntimeError: CUDA error: out of memory"

# The master exits with code 3 (its worker would train for a minute): PodFailed -> RestartJob
# restarts the whole job twice, then Volcano fails it (maxRetry 2).
with DAG("rs_vcjob_max_retry", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    VolcanoJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", resources={"nvidia.com/gpu": 1},
        tasks=[
            {"name": "master", "replicas": 1, "pod_template": work(1, exit_code=3, log=OUT_OF_MEMORY)},
            {"name": "worker", "replicas": 1, "pod_template": work(60)},
        ],
        plugins={"pytorch": ["--master=master", "--worker=worker"], "svc": [], "env": []},
        policies=[{"event": "PodFailed", "action": "RestartJob"}], max_retry=2,
        deferrable=True, retries=0, poll_interval=30,
    )
"""
)

VCJOB_RETRY_AFTER_TIMEOUT = (
    _HEADER
    + """
# The pool is busy when try 1 queues: its admission timeout deletes its job, try 2 (a new job)
# gets the gang.
with DAG(
    "rs_vcjob_retry_after_timeout", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False
) as dag:
    VolcanoJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=3, resources={"nvidia.com/gpu": 1},
        deferrable=True, admission_timeout=8, retries=1, retry_delay=dt.timedelta(seconds=1),
        poll_interval=30, pod_template=work(2),
    )
"""
)

VCJOB_LONG = (
    _HEADER
    + """
# A deferred 2-pod Volcano Job training for ten minutes: marked failed from outside by the test.
with DAG("rs_vcjob_long", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    VolcanoJobOperator(
        task_id="deferred", image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1},
        deferrable=True, retries=0, poll_interval=1, pod_template=work(600),
    )
"""
)

VCJOB_DAG_FILES = {
    "rs_vcjob_gang_sweep": VCJOB_GANG_SWEEP,
    "rs_vcjob_no_gang_sweep": VCJOB_NO_GANG_SWEEP,
    "rs_vcjob_max_retry": VCJOB_MAX_RETRY,
    "rs_vcjob_retry_after_timeout": VCJOB_RETRY_AFTER_TIMEOUT,
    "rs_vcjob_long": VCJOB_LONG,
}
