"""airflow-gang: gang-scheduled Kubeflow PyTorchJobs on Volcano, from Airflow DAGs."""

from __future__ import annotations

__version__ = "0.1.0"
