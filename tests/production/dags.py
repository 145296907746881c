"""The DAG files of the production-shaped tests beyond the real-stack sweep: tasks that wait in
their Celery worker (``deferrable=False``) while the test kills that worker."""

from __future__ import annotations

from tests.realstack.dags import _HEADER

WORKER_LOSS_RETRY = "pr_worker_loss_retry"
WORKER_LOSS_NO_RETRY = "pr_worker_loss_no_retry"


def worker_wait_dag(dag_id: str, retries: int, seconds: int) -> str:
    """One 1-GPU job waited for in the worker: the test SIGKILLs the Celery worker running it."""
    return (
        _HEADER
        + f"""
with DAG("{dag_id}", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(
        task_id="train", image="ghcr.io/acme/train:1", workers=1, resources={{"nvidia.com/gpu": 1}},
        deferrable=False, retries={retries}, retry_delay=dt.timedelta(seconds=1),
        pod_template=work({seconds}),
    )
"""
    )


DAG_FILES = {
    # Still training when the retry starts (the loss is noticed after the heartbeat timeout).
    WORKER_LOSS_RETRY: worker_wait_dag(WORKER_LOSS_RETRY, retries=1, seconds=75),
    # Would train for ten minutes: only the orphan reaper ends it.
    WORKER_LOSS_NO_RETRY: worker_wait_dag(WORKER_LOSS_NO_RETRY, retries=0, seconds=600),
}
