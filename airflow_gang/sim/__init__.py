"""Embedded Kubernetes cluster simulator: an API server plus controllers that are API clients.

The simulator never imports the provider (hooks, operators, spec); the provider never imports
the simulator. Tests and the CLI join the two.
"""
