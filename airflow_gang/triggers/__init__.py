"""Airflow triggers of the airflow-gang provider."""
