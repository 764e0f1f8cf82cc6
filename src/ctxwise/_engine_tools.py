"""What an :class:`~ctxwise.engine.Engine` does with tool calls between turns: runs
ctxwise's own tools (tool search, ``fetch_more``, the memory tool) and trims or
stores the results of the caller's tools, recording each for the next turn's trace."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from ctxwise.config import EngineConfig
from ctxwise.errors import UsageError
from ctxwise.memory.store import Store, namespace_part
from ctxwise.memory_tool import MemoryTool, StoreMemory
from ctxwise.messages import ToolResultBlock, ToolUseBlock, block_text
from ctxwise.sessions import check_session_id
from ctxwise.tokens import TokenCounter
from ctxwise.tools.catalog import ToolCatalog
from ctxwise.tools.cursors import FETCH_MORE, ResultStore, fetch_more_result, page_text
from ctxwise.tools.trim import trim
from ctxwise.trace import ToolEventTrace
from ctxwise.turn import SessionView, TurnContext
from ctxwise.turn.tools import MEMORY_TOOL, loaded_tools

__all__ = ["EngineParts", "memory_tool_for", "run_tool", "tool_result"]


class EngineParts(Protocol):
    """What the tool calls use of an Engine."""

    config: EngineConfig
    counter: TokenCounter
    catalog: ToolCatalog | None
    results: ResultStore | None
    memory: Store | None
    memory_tool: MemoryTool | None
    _ctx: TurnContext

    def wait(self) -> None: ...

    def _load(self, session_id: str) -> SessionView: ...

    def _note(
        self,
        session_id: str,
        events: Sequence[ToolEventTrace],
        load: Sequence[tuple[str, str]] = (),
    ) -> None: ...


def run_tool(engine: EngineParts, session_id: str, call: ToolUseBlock) -> ToolResultBlock | None:
    check_session_id(session_id)
    if not isinstance(call, ToolUseBlock):
        raise UsageError(f"call is a ToolUseBlock, got {type(call).__name__}")
    session = engine._load(session_id)
    cat = engine.catalog
    load: list[tuple[str, str]] = []
    if cat is not None and engine.config.tools.mode == "client" and call.name == cat.search_name:
        outcome = cat.run_search(
            call.input,
            tool_use_id=call.id,
            loaded=loaded_tools(engine._ctx, session),
            provider=engine.config.render,
        )
        block = outcome.block
        load = [t.key for t in outcome.found]
        event = ToolEventTrace(
            tool_use_id=call.id,
            name=call.name,
            kind="search",
            tokens_after=engine.counter.count(block_text(block)),
            is_error=bool(block.is_error),
            found=[cat.wire_name(t) for t in outcome.found],
            detail=outcome.query if not block.is_error else block_text(block),
        )
    elif engine.results is not None and call.name == FETCH_MORE:
        block = fetch_more_result(
            engine.results, call.input, session_id=session_id, tool_use_id=call.id
        )
        event = ToolEventTrace(
            tool_use_id=call.id,
            name=call.name,
            kind="fetch_more",
            tokens_after=engine.counter.count(block_text(block)),
            is_error=bool(block.is_error),
            detail=block_text(block)[:200] if block.is_error else "",
        )
    elif call.name == MEMORY_TOOL["name"] and memory_tool_for(engine, session_id) is not None:
        tool = memory_tool_for(engine, session_id)
        assert tool is not None
        result = tool.execute(call.input)
        block = ToolResultBlock(call.id, result.text, is_error=result.is_error)
        command = call.input.get("command") if isinstance(call.input, Mapping) else None
        event = ToolEventTrace(
            tool_use_id=call.id,
            name=call.name,
            kind="memory",
            tokens_after=engine.counter.count(result.text),
            is_error=result.is_error,
            detail=str(command)[:40],
        )
    else:
        return None
    if block.is_error and (not isinstance(call.input, Mapping) or session.version == 0):
        # a malformed call, or a refused one on a session that does not exist yet,
        # writes nothing (no session is created for it)
        return block
    engine._note(session_id, [event], load)
    return block


def tool_result(
    engine: EngineParts,
    session_id: str,
    call: ToolUseBlock,
    result: str | Mapping[str, Any] | Sequence[Any],
    *,
    is_error: bool = False,
) -> ToolResultBlock:
    engine.wait()
    check_session_id(session_id)
    if not isinstance(call, ToolUseBlock):
        raise UsageError(f"call is a ToolUseBlock, got {type(call).__name__}")
    if isinstance(result, str):
        text = result
    else:
        try:
            text = json.dumps(result, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError) as e:
            raise UsageError(
                f"result is text or JSON data (a str, a mapping or a list), and this "
                f"{type(result).__name__} is not JSON-serialisable: {e} "
                "(convert it, e.g. str(value) or value.isoformat(), first)"
            ) from None
    most = engine.config.tool_results.max_chars
    if most and len(text) > most:
        raise UsageError(
            f"the result of tool {call.name[:64]!r} is {len(text):,} characters, over "
            f"the limit of {most:,}; raise it with tool_results.max_chars"
        )
    if is_error:
        return ToolResultBlock(call.id, text, is_error=True)
    before = engine.counter.count(text)
    events: list[ToolEventTrace] = []

    def note(
        kind: Literal["trimmed", "stored"], tokens_before: int, tokens_after: int, detail: str
    ) -> None:
        events.append(
            ToolEventTrace(
                tool_use_id=call.id,
                name=call.name,
                kind=kind,
                tokens_before=tokens_before,
                tokens_after=tokens_after,
                detail=detail,
            )
        )

    spec = engine.config.tool_results.trim.get(call.name)
    if spec is not None:
        cut = trim(
            text,
            fields=spec.fields or None,
            max_items=spec.max_items or None,
            max_tokens=spec.max_tokens or None,
            counter=engine.counter,
        )
        if cut.changed:
            text = cut.text
            note(
                "trimmed",
                before,
                cut.tokens_after,
                f"{len(cut.dropped_paths)} fields, {cut.dropped_items} items, "
                f"{cut.dropped_keys} keys, {cut.dropped_chars} characters cut",
            )
    limit = engine.config.tool_results.store_over
    if limit and engine.results is not None and engine.counter.count(text) > limit:
        was = engine.counter.count(text)
        try:
            data: Any = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested past the decoder
            data = text.splitlines()
        if isinstance(data, list):
            result_id, page = engine.results.put(data, session_id=session_id)
            text = page_text(page)
            note(
                "stored",
                was,
                engine.counter.count(text),
                f"{result_id}: {len(page.items)} of {page.total} items shown",
            )
        else:
            cut = trim(text, max_tokens=limit, counter=engine.counter)
            text = cut.text
            note("trimmed", was, cut.tokens_after, f"cut to {limit} tokens (nothing to page)")
    engine._note(session_id, events)
    return ToolResultBlock(call.id, text, is_error=False)


def memory_tool_for(engine: EngineParts, session_id: str) -> MemoryTool | None:
    if engine.memory_tool is not None:
        return engine.memory_tool
    cfg = engine.config.memory_tool
    if not cfg.enabled or cfg.backend != "store" or engine.memory is None:
        return None
    namespace = (engine.config.memory.namespace, "memory_tool", namespace_part(session_id))
    return MemoryTool(StoreMemory(engine.memory, namespace), max_file_bytes=cfg.max_file_bytes)
