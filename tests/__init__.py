"""The test suite: one package per layer of docs/design.md; shared fakes and helpers in ``tests._support``."""
