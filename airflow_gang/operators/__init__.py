"""Airflow operators of the airflow-gang provider."""
