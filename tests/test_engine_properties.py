"""Engine invariants over generated sessions: the budget is never exceeded, tool
pairs stay whole in every request, and stated rules are pinned in every request
after they were stated (or the turn is refused with a typed error, unchanged)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwise.config import EngineConfig
from ctxwise.engine import Engine
from ctxwise.errors import CompactionBudgetError, PinnedOverflowError
from ctxwise.formats import anthropic, openai
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock

RULES = ("Never call me before 9am.", "Always reply in French.", "Stop sending me newsletters.")
WORDS = ["order", "refund", "parcel", "build", "test"]
WORDS += ["deploy", "error", "cache", "window", "token"]

step = st.one_of(
    st.tuples(st.just("ask"), st.integers(1, 60), st.sampled_from((None, *RULES))),
    st.tuples(st.just("tool"), st.integers(1, 3), st.integers(1, 800)),
)


def _text(n: int, seed: int) -> str:
    return " ".join(WORDS[(seed + i) % len(WORDS)] for i in range(n))


@settings(max_examples=40)
@given(
    steps=st.lists(step, min_size=1, max_size=25),
    budget=st.integers(300, 3000),
    render=st.sampled_from(("anthropic", "openai")),
    context=st.sampled_from(("user", "system")),
)
def test_every_request_fits_pairs_and_pins(
    steps: list[tuple[str, int, object]], budget: int, render: str, context: str
) -> None:
    cfg = EngineConfig(store="memory", budget=budget, render=render, context=context)  # type: ignore[arg-type]
    stated: list[str] = []
    with Engine(cfg) as engine:
        pending: list[Message] = []
        for i, (kind, a, b) in enumerate(steps):
            if kind == "ask":
                text = _text(a, i) + "." + (f" {b}" if b else "")
                pending.append(Message.text_message("user", text))
            else:
                if not pending and engine.sessions.version("s") == 0:
                    pending.append(Message.text_message("user", "Start."))
                calls = tuple(ToolUseBlock(f"t{i}_{k}", "lookup", {"k": k}) for k in range(a))
                size = int(str(b))
                results = tuple(ToolResultBlock(c.id, _text(size, k)) for k, c in enumerate(calls))
                pending += [Message("assistant", calls), Message("user", results)]
            try:
                result = engine.turn("s", pending)
            except (PinnedOverflowError, CompactionBudgetError):
                version = engine.sessions.version("s")
                pending = []
                assert engine.sessions.version("s") == version
                continue
            stated += [r for r in RULES if any(r in m.text for m in pending)]
            pending = [Message.text_message("assistant", "Done.")]
            trace = result.trace
            assert trace.tokens.total <= trace.tokens.available
            decoded = (
                anthropic.decode_request(result.request)
                if render == "anthropic"
                else openai.decode_request(result.request)
            )
            assert decoded.problems(render) == []  # type: ignore[arg-type]
            system = "\n".join(
                b.text
                for m in decoded.messages
                if m.role == "system"
                for b in m.content
                if isinstance(b, TextBlock)
            )
            for rule in stated:
                assert f"- {rule}" in system
