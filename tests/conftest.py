"""Shared fixtures and fakes for the test suite."""

from __future__ import annotations
