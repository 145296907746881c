"""airflow-gang: gang-scheduled Kubeflow PyTorchJobs on Volcano, from Airflow DAGs."""

from __future__ import annotations

from airflow_gang import moved

__version__ = "1.0.0"

moved.install()
