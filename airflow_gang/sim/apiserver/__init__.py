"""Kubernetes REST API subset served over real HTTP (FastAPI + uvicorn)."""
