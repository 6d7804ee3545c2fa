"""Fake vllm package path (see tests/fakes/README.md)."""
__version__ = "0.0-fake"
