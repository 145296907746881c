"""airflow-gang: gang-scheduled Kubeflow PyTorchJobs on Volcano, from Airflow DAGs."""

from __future__ import annotations

from airflow_gang import moved

__version__ = "0.1.0"

moved.install()
