"""Simulated cluster controllers (Volcano, kube-scheduler, training-operator, kubelet...).

Each controller is an ordinary Kubernetes API client (list + watch over HTTP); none may import
the API server's internals. One package per component, each modelling one upstream project:

- ``core/``: kube-scheduler and kube-controller-manager's Pod and Node controllers (node
  lifecycle, taint eviction, pod GC, disruption);
- ``batch/``: the batch/v1 Job controller;
- ``kubelet/``: the kubelet of each node and the pod runtimes;
- ``volcano/``: the Volcano scheduler;
- ``training_operator/``: the Kubeflow training-operator (PyTorchJob);
- ``trainer/``: Kubeflow Trainer v2 and the JobSet controller.

Components never import each other (an import-linter contract); what two of them need is
here, as client-go and controller-runtime hold it for real controllers: ``client.py`` (REST over
the official client's connection), ``informer.py`` (list-watch caches), ``kinds.py``,
``runner.py`` (the reconcile loop), ``object_controller.py`` (per-object reconcilers),
``manager.py`` (running a set of controllers), ``event_recorder.py``, ``concurrency.py``,
``retrying.py``, ``clock.py``, ``ownership.py``, ``metav1_conditions.py``, ``capacity.py``
(resource arithmetic both schedulers share) and ``creation_batch.py`` (the pods of jobs
submitted together, interleaved).
"""
