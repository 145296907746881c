"""Kubeflow's PyTorchJob: its `JobKind` (``kind``), spec, templates, recipe and operator."""
