"""A process that drives Engine turns, for the concurrency tests (spawned, so it
must be importable on its own)."""

from __future__ import annotations

from ctxwise.config import EngineConfig
from ctxwise.engine import Engine
from ctxwise.messages import Message


def drive(store: str, session_id: str, tag: str, turns: int) -> int:
    """Run ``turns`` turns, each adding one user message ``f"{tag}-{j}"``; returns
    how many attempts they took in all (more than ``turns`` when they raced)."""
    attempts = 0
    with Engine(EngineConfig(store=store, budget=50_000), max_attempts=50) as engine:
        for j in range(turns):
            result = engine.turn(session_id, [Message.text_message("user", f"{tag}-{j}")])
            attempts += result.trace.attempts
    return attempts
