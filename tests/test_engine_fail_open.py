"""Engine.note_fail_open: a request the proxy forwarded unchanged is listed in the
next turn's trace, once, on a real SQLite file across Engines."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxwise import Engine, EngineConfig
from ctxwise.errors import UsageError


def test_a_fail_open_is_in_the_next_trace_once(tmp_path: Path) -> None:
    cfg = EngineConfig(store=f"sqlite:///{tmp_path}/s.db")
    with Engine(cfg) as engine:
        engine.turn("s1", "Where is order 4417?")
        engine.note_fail_open("s1", route="/v1/messages", reason="RuntimeError: boom")
        engine.note_fail_open("s1", route="/v1/chat/completions", reason="KeyError: 'x'")
    with Engine(cfg) as later:  # the notes are in the store, not in one Engine
        trace = later.turn("s1", "And 4418?", warn_unanswered=False).trace
        assert [(f.route, f.reason) for f in trace.fail_open] == [
            ("/v1/messages", "RuntimeError: boom"),
            ("/v1/chat/completions", "KeyError: 'x'"),
        ]
        assert later.turn("s1", "Thanks.", warn_unanswered=False).trace.fail_open == []
        assert [len(t.fail_open) for t in later.traces("s1")] == [0, 2, 0]
        with pytest.raises(UsageError):
            later.note_fail_open("", route="/v1/messages", reason="x")
