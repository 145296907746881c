"""Simulated cluster controllers (Volcano, kube-scheduler, training-operator, kubelet).

Each controller is an ordinary Kubernetes API client (list + watch over HTTP); none may import
the API server's internals.
"""
