"""The simulator's version (its own module: the controllers read it without importing the cluster)."""

__version__ = "1.0.0"
