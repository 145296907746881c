"""Kubeflow Trainer v2's TrainJob: its `JobKind` (``kind``), spec, recipe and operator."""
