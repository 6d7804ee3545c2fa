"""Fake vllm package path (see tests/fakes/README.md)."""
