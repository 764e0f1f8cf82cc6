"""Integrations with agent frameworks and tools (each behind its own extra)."""

# Each integration is reached through its own module (ctxwise.integrations.langgraph),
# so importing this package never needs an extra.
__all__: list[str] = []
