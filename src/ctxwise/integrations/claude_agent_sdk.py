"""Claude Agent SDK integration (extra ``claude-agent-sdk``): the policy gates, rules and
case facts of a ctxwise :class:`~ctxwise.engine.Engine` session inside a Claude Code run.

The Claude Code CLI owns the history in an Agent SDK run, so ctxwise cannot render the
window there. What the SDK (``claude_agent_sdk`` 0.2.x, bundling Claude Code 2.1.x)
lets a program do, and what :class:`CtxwiseHooks` does with it:

- ``ClaudeAgentOptions(can_use_tool=...)``: asked when the CLI's permission rules say
  "ask". :meth:`CtxwiseHooks.can_use_tool` answers ``PermissionResultDeny(message=...)``
  naming the rule when :meth:`Engine.check_tool <ctxwise.engine.Engine.check_tool>`
  blocks the call; the model gets the message as the tool's error result.
- ``hooks={"PreToolUse": [HookMatcher(...)]}``: called before *every* tool call, also
  under ``permission_mode="bypassPermissions"`` or ``allowed_tools``, where
  ``can_use_tool`` is never asked. :meth:`CtxwiseHooks.pre_tool_use` answers
  ``hookSpecificOutput.permissionDecision: "deny"`` with the same message as
  ``permissionDecisionReason``, and ``{}`` (no opinion) when the gates allow the call,
  so the CLI's own permission flow still runs.
- ``PreCompact``: the CLI summarizes the history itself. The hook output has no
  ``hookSpecificOutput`` for this event (Claude Code 2.1.332 rejects one); the
  callback's ``systemMessage`` is what the CLI appends to its summary request as
  "Additional Instructions". :meth:`CtxwiseHooks.pre_compact` puts the session's
  standing rules and case facts there, word for word, with the instruction to keep
  them (optionally archiving the CLI transcript first).
- ``SessionStart`` with ``source == "compact"`` (not in the SDK's ``HookEvent`` type,
  but the CLI dispatches it to SDK callbacks): :meth:`CtxwiseHooks.session_start`
  re-injects the rules and facts as ``hookSpecificOutput.additionalContext``, which
  reaches the model in the first request after the compaction, whatever the summary
  kept.
- ``UserPromptSubmit``, ``PostToolUse`` and ``Stop`` (``record=True``): the user's
  prompts, each tool call with its result and the final answer are recorded into the
  Engine session (:meth:`Engine.record <ctxwise.engine.Engine.record>`), so rules the
  user states become rules (and gate rules, with a gate vocabulary), case facts are
  extracted and a prerequisite tool's result satisfies the gate that waits for it.

Rules and facts are the Engine session's, plus those found in the CLI transcript the
way :mod:`ctxwise.integrations.claude_code_hooks` finds them
(:func:`~ctxwise.integrations.claude_code_hooks.standing_context`), so they are there
even with ``record=False``.

**Fails closed.** A gate that cannot be evaluated (a broken rule, a session that does
not load, a payload without a tool name) denies the call and says why; a session the
Engine has never seen is checked against the configured gates with no case facts.
The other hooks never stop the CLI: a failure there is logged
(``logging.getLogger("ctxwise.integrations.claude_agent_sdk")``) and answered ``{}``.

    hooks = CtxwiseHooks(engine, "case-4417")
    options = hooks.options(ClaudeAgentOptions(model="claude-sonnet-4-5"))
    async with ClaudeSDKClient(options) as client:
        await client.query("Refund order 4417")
        async for message in client.receive_response():
            ...
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from ctxwise.engine import Engine
from ctxwise.errors import IntegrationError, UnknownSessionError, UsageError
from ctxwise.integrations._framework import require_framework
from ctxwise.integrations.claude_code_hooks import (
    ADDITIONAL_CONTEXT_CAP,
    _capped,
    archive_transcript,
    keep_instructions,
    standing_context,
)
from ctxwise.memory.facts import CaseFacts
from ctxwise.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from ctxwise.policy import Allowed, Blocked
from ctxwise.sessions.store import check_session_id

FRAMEWORK = "claude-agent-sdk"
SUPPORTED = ">=0.2.189,<0.3"

require_framework(FRAMEWORK, SUPPORTED, "claude-agent-sdk", "the Claude Agent SDK integration")

from claude_agent_sdk import (  # noqa: E402 - after the version check
    ClaudeAgentOptions,
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    PermissionResult,
    PermissionResultAllow,
    PermissionResultDeny,
    ToolPermissionContext,
)
from claude_agent_sdk.types import HookEvent  # noqa: E402

__all__ = ["FRAMEWORK", "SUPPORTED", "CtxwiseHooks", "deny_message", "mcp_tool_name"]

_log = logging.getLogger(__name__)

_MCP = "mcp__"


def mcp_tool_name(name: str) -> str | None:
    """The tool's own name in an MCP tool name (``mcp__shop__issue_refund`` →
    ``issue_refund``), or ``None`` for a name that is not ``mcp__<server>__<tool>``."""
    if not name.startswith(_MCP):
        return None
    _, sep, tool = name[len(_MCP) :].partition("__")
    return tool if sep and tool else None


def deny_message(decision: Blocked) -> str:
    """What the model reads for a blocked call: the tool, the rule's name, its reason."""
    return (
        f"ctxwise policy gate: {decision.tool} was not run; rule {decision.rule.name!r} "
        f"blocks it: {decision.reason}"
    )


def _refused(tool: str, exc: BaseException) -> str:
    return (
        f"ctxwise policy gate: {tool or '(no tool name)'} was not run; the gates could not "
        f"be evaluated ({type(exc).__name__}: {exc}), so the call is refused"
    )


def _result_text(response: Any) -> str:
    """A tool's ``tool_response`` as text: a string as it is, MCP content blocks as
    their text, anything else as JSON."""
    if isinstance(response, str):
        return response
    if isinstance(response, Mapping) and isinstance(response.get("content"), list):
        response = response["content"]
    if isinstance(response, list) and all(
        isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
        for b in response
    ):
        return "\n".join(str(b["text"]) for b in response)
    return json.dumps(response, ensure_ascii=False, default=str, sort_keys=True)


def _payload(input_data: Any) -> Mapping[str, Any]:
    """A hook's input as a mapping: anything else reads as an empty payload (no tool
    name, no prompt), so a malformed call is refused or ignored, never an exception
    inside the CLI's hook dispatch."""
    return cast("Mapping[str, Any]", input_data) if isinstance(input_data, Mapping) else {}


def _merge(first: str, second: str) -> str:
    """``first`` followed by the lines of ``second`` it does not have (a header once)."""
    if not first:
        return second
    have = set(first.splitlines())
    extra = [line for line in second.splitlines() if line not in have]
    return "\n".join([first, *extra]) if extra else first


class CtxwiseHooks:
    """The ``can_use_tool`` callback and hook callbacks of one ctxwise session.

    Args:
        engine: the :class:`~ctxwise.engine.Engine` whose gates, rules and facts apply.
        session_id: the ctxwise session (not the CLI's session id, which changes with
            every run unless it is resumed).
        record: record prompts, tool calls with their results and final answers into
            the session (``UserPromptSubmit``, ``PostToolUse``, ``Stop`` hooks).
        archive_dir: when given, :meth:`pre_compact` first copies the CLI transcript
            to ``<archive_dir>/<cli session id>/<UTC timestamp>.jsonl``.
        extractor: the fact extractor preset for the CLI transcript
            (``prose`` | ``support``).
        cap: characters of ``additionalContext`` :meth:`session_start` gives (whole
            lines; Claude Code takes :data:`ADDITIONAL_CONTEXT_CAP` inline).

    Raises:
        IntegrationError: (reason ``"config"``) ``engine`` is not an Engine, or the
            session id or ``cap`` is not valid.
    """

    def __init__(
        self,
        engine: Engine,
        session_id: str,
        *,
        record: bool = True,
        archive_dir: str | Path | None = None,
        extractor: str = "prose",
        cap: int = ADDITIONAL_CONTEXT_CAP,
    ) -> None:
        if not isinstance(engine, Engine):
            raise IntegrationError(
                FRAMEWORK, "config", f"engine must be a ctxwise Engine, got {type(engine).__name__}"
            )
        try:
            check_session_id(session_id)
        except UsageError as exc:
            raise IntegrationError(FRAMEWORK, "config", str(exc)) from exc
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 200:
            raise IntegrationError(FRAMEWORK, "config", f"cap must be an int >= 200, got {cap!r}")
        if extractor not in ("prose", "support"):
            raise IntegrationError(
                FRAMEWORK, "config", f"extractor is 'prose' or 'support', not {extractor!r}"
            )
        self.engine = engine
        self.session_id = session_id
        self.record = record
        self.archive_dir = Path(archive_dir) if archive_dir is not None else None
        self.extractor = extractor
        self.cap = cap
        self.archived: list[Path] = []
        """The transcript copies :meth:`pre_compact` wrote, in order."""

    # ------------------------------------------------------------------ the gate

    def check(self, tool_name: str, tool_input: Any) -> Allowed | Blocked | str:
        """The gates' decision for a call, or the refusal text when they cannot be
        evaluated. An MCP tool (``mcp__<server>__<tool>``) is checked under its full
        name and under the tool's own name; either blocking blocks it."""
        try:
            if not isinstance(tool_input, Mapping):  # fail closed: cannot be checked
                raise UsageError(f"its tool input is a {type(tool_input).__name__}, not an object")
            names = [tool_name]
            bare = mcp_tool_name(tool_name) if isinstance(tool_name, str) else None
            if bare is not None:
                names.append(bare)
            decision: Allowed | Blocked = Allowed(tool_name)
            for name in names:
                decision = self._check_one(name, tool_input)
                if isinstance(decision, Blocked):
                    return decision
            return decision
        except Exception as exc:  # a gate that cannot be evaluated refuses the call
            return _refused(tool_name if isinstance(tool_name, str) else "", exc)

    def _check_one(self, name: str, tool_input: Any) -> Allowed | Blocked:
        try:
            return self.engine.check_tool(self.session_id, name, tool_input)
        except UnknownSessionError:
            return self.engine.gate.check(name, tool_input, CaseFacts())

    async def can_use_tool(
        self, tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResult:
        """The ``can_use_tool`` callback: deny a gated call with a message naming the rule."""
        decision = self.check(tool_name, tool_input)
        if isinstance(decision, str):
            return PermissionResultDeny(message=decision)
        if isinstance(decision, Blocked):
            return PermissionResultDeny(message=deny_message(decision))
        return PermissionResultAllow()

    async def pre_tool_use(
        self, input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """The ``PreToolUse`` callback: ``permissionDecision: "deny"`` for a gated call,
        ``{}`` (no opinion) for one the gates allow."""
        data = _payload(input_data)
        name = data.get("tool_name")
        if not isinstance(name, str) or not name:
            reason = _refused("", UsageError("the PreToolUse payload has no tool_name"))
        else:
            decision = self.check(name, data.get("tool_input", {}))
            if isinstance(decision, str):
                reason = decision
            elif isinstance(decision, Blocked):
                reason = deny_message(decision)
            else:
                return {}
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }

    # ------------------------------------------------------------------ recording

    def _record(self, messages: list[Message], what: str) -> None:
        try:
            self.engine.record(self.session_id, messages)
        except Exception as exc:  # never stop the CLI over a recording
            _log.warning("could not record %s into session %r: %s", what, self.session_id, exc)

    async def user_prompt_submit(
        self, input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """The ``UserPromptSubmit`` callback: record the prompt (its rules and facts)."""
        prompt = _payload(input_data).get("prompt")
        if self.record and isinstance(prompt, str) and prompt.strip():
            self._record([Message.text_message("user", prompt)], "a prompt")
        return {}

    async def post_tool_use(
        self, input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """The ``PostToolUse`` callback: record the call and its result, so a
        prerequisite tool's result satisfies the rule waiting for it."""
        data = _payload(input_data)
        name, call_id = data.get("tool_name"), data.get("tool_use_id") or tool_use_id
        tool_input = data.get("tool_input")
        if not self.record or not isinstance(name, str) or not isinstance(call_id, str):
            return {}
        if not isinstance(tool_input, Mapping):
            tool_input = {}
        text = _result_text(data.get("tool_response"))
        # the gate knows an MCP tool by its own name; the session records that name
        recorded = mcp_tool_name(name) or name
        self._record(
            [
                Message("assistant", (ToolUseBlock(call_id, recorded, dict(tool_input)),)),
                Message("user", (ToolResultBlock(call_id, text),)),
            ],
            f"the result of {name}",
        )
        return {}

    async def stop(
        self, input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """The ``Stop`` callback: record the model's final answer."""
        text = _payload(input_data).get("last_assistant_message")
        if self.record and isinstance(text, str) and text.strip():
            self._record([Message("assistant", (TextBlock(text),))], "the final answer")
        return {}

    # ------------------------------------------------------------------ compaction

    def standing(self, transcript_path: str | None = None) -> tuple[str, str]:
        """The session's rules and case facts, rendered, each followed by those of the
        CLI transcript it does not have (``""`` when there are none)."""
        rules = facts = ""
        try:
            rules = self.engine.rules(self.session_id).render()
            facts = self.engine.facts(self.session_id).render()
        except UnknownSessionError:
            pass
        if transcript_path and Path(transcript_path).is_file():
            from ctxwise.formats import read_transcript

            try:
                found = standing_context(
                    read_transcript(transcript_path, "claude-code"), extractor=self.extractor
                )
            except Exception as exc:  # an unreadable transcript leaves the session's own
                _log.warning("could not read the transcript %s: %s", transcript_path, exc)
            else:
                rules, facts = _merge(rules, found[0]), _merge(facts, found[1])
        return rules, facts

    async def pre_compact(
        self, input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """The ``PreCompact`` callback: the rules and facts the CLI's summary must keep,
        as ``systemMessage`` (the CLI appends it to the summary request's instructions);
        ``{}`` when there are none."""
        data = _payload(input_data)
        path = data.get("transcript_path")
        path = path if isinstance(path, str) else None
        if self.archive_dir is not None and path and Path(path).is_file():
            cli_session = str(data.get("session_id") or self.session_id)
            try:
                self.archived.append(archive_transcript(path, self.archive_dir, cli_session))
            except Exception as exc:  # the rules still go to the summary
                _log.warning("PreCompact archive for session %r failed: %s", self.session_id, exc)
        try:
            text = keep_instructions(*self.standing(path))
        except Exception as exc:  # the CLI compacts with its default instructions
            _log.warning("PreCompact for session %r failed: %s", self.session_id, exc)
            return {}
        return {"systemMessage": text} if text else {}

    async def session_start(
        self, input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """The ``SessionStart`` callback: after a compaction (``source == "compact"``),
        the rules and facts again, as ``additionalContext``; ``{}`` otherwise."""
        data = _payload(input_data)
        if data.get("source") != "compact":
            return {}
        path = data.get("transcript_path")
        try:
            parts = [x for x in self.standing(path if isinstance(path, str) else None) if x]
        except Exception as exc:
            _log.warning("SessionStart for session %r failed: %s", self.session_id, exc)
            return {}
        if not parts:
            return {}
        head = "ctxwise: standing rules and case facts from before the compaction."
        return {
            "hookSpecificOutput": {
                "hookEventName": "SessionStart",
                "additionalContext": _capped("\n\n".join([head, *parts]), self.cap),
            }
        }

    # ------------------------------------------------------------------ wiring

    def hooks(self) -> dict[HookEvent, list[HookMatcher]]:
        """``ClaudeAgentOptions.hooks`` for every callback. The ``PreToolUse`` matcher
        has ``on_failure="block"``: a callback the CLI cannot get an answer from (a
        timeout) blocks the call too."""
        out: dict[str, list[HookMatcher]] = {
            "PreToolUse": [HookMatcher(hooks=[self.pre_tool_use], on_failure="block")],
            "PreCompact": [HookMatcher(hooks=[self.pre_compact])],
            "SessionStart": [HookMatcher(matcher="compact", hooks=[self.session_start])],
        }
        if self.record:
            out["UserPromptSubmit"] = [HookMatcher(hooks=[self.user_prompt_submit])]
            out["PostToolUse"] = [HookMatcher(hooks=[self.post_tool_use])]
            out["Stop"] = [HookMatcher(hooks=[self.stop])]
        # SessionStart is dispatched by the CLI but missing from the SDK's HookEvent
        return cast("dict[HookEvent, list[HookMatcher]]", out)

    def options(self, options: ClaudeAgentOptions | None = None) -> ClaudeAgentOptions:
        """A copy of ``options`` with :meth:`hooks` added after its own hooks and
        :meth:`can_use_tool` as its ``can_use_tool``. An existing ``can_use_tool`` is
        kept behind the gates: it is asked only about calls the gates allow."""
        base = options if options is not None else ClaudeAgentOptions()
        if not isinstance(base, ClaudeAgentOptions):
            raise IntegrationError(
                FRAMEWORK,
                "config",
                f"options must be ClaudeAgentOptions, got {type(base).__name__}",
            )
        merged: dict[HookEvent, list[HookMatcher]] = {
            k: list(v) for k, v in (base.hooks or {}).items()
        }
        for event, matchers in self.hooks().items():
            merged.setdefault(event, []).extend(matchers)
        theirs = base.can_use_tool
        if theirs is None:
            return replace(base, hooks=merged, can_use_tool=self.can_use_tool)

        async def gated(
            tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
        ) -> PermissionResult:
            mine = await self.can_use_tool(tool_name, tool_input, context)
            if isinstance(mine, PermissionResultDeny):
                return mine
            return await theirs(tool_name, tool_input, context)

        return replace(base, hooks=merged, can_use_tool=gated)
