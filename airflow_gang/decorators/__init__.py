"""TaskFlow decorators: ``@task.pytorchjob`` (`airflow_gang.decorators.pytorch_job`)."""
