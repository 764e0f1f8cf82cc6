"""Integrations with agent frameworks and tools (each behind its own extra)."""
