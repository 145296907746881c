"""TaskFlow decorators: ``@task.pytorchjob`` (`airflow_gang.decorators.pytorch_job`) and
``@task.trainjob`` (`airflow_gang.decorators.train_job`); what they share is in `replica_task`."""
