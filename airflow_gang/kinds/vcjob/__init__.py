"""Volcano's own Job (``batch.volcano.sh/v1alpha1``, ``vcjob``): `airflow_gang.kinds.vcjob.kind`."""
