"""Airflow sensors of the airflow-gang provider."""
