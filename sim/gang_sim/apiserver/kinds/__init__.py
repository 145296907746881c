"""What is particular to each served kind: strategies, admission webhooks and hand-written schemas.

The generic machinery (``../registry.py``, ``../operations.py``, ``../admission.py``,
``../openapi.py``) serves every kind alike; the rows of ``../resources.py`` name the hooks and
schemas kept here, which reproduce what kube-apiserver and the projects' webhooks do:

- ``core.py``: built-in kinds (pods, services, namespaces, nodes, PriorityClasses...) as
  kube-apiserver's strategies and admission plugins (Priority, namespace lifecycle) default,
  admit and validate them;
- ``batch.py``: batch/v1 Jobs, kube-apiserver's Job strategy;
- ``policy.py``: PodDisruptionBudgets (policy/v1), their strategy and printer columns;
- ``webhooks.py``: the training-operator's PyTorchJob webhook and Volcano's PodGroup webhooks;
- ``trainer_webhooks.py``: Kubeflow Trainer v2's TrainJob and JobSet's webhooks;
- ``volcano_job_webhooks.py``: Volcano's mutating and validating webhooks for its ``Job`` (vcjob);
- ``schemas.py``, ``trainer_schemas.py`` (built from ``schema_parts.py``): the custom
  resources' openAPIV3Schemas, written by hand from the upstream CRDs (training-operator v1.9,
  Volcano, Trainer v2.3.0, JobSet v0.12.0) and never stricter than they are.
"""
