"""The ``settings.json`` hooks ctxwise installs for Claude Code (see
:mod:`ctxwise.integrations.claude_code_hooks`)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ctxwise._io import (
    parse_json,
    read_user_file,
    replace_file,
)
from ctxwise.errors import FormatError, OutputError, UsageError

__all__ = [
    "DEFAULT_HOOK_TIMEOUT",
    "HOOK_EVENTS",
    "SUBAGENT_TOOLS",
    "InstallResult",
    "hook_settings",
    "install_settings",
    "merge_settings",
]

DEFAULT_HOOK_TIMEOUT = 30
"""The ``timeout`` (seconds) :func:`hook_settings` gives each hook: well above
:data:`DEFAULT_DEADLINE`, so Claude Code never has to kill a ctxwise hook."""

SUBAGENT_TOOLS = ("Agent", "Task")
"""The subagent tool's names: ``Agent`` now, ``Task`` before."""

HOOK_EVENTS = ("subagent-context", "subagent-start", "pre-compact", "session-start")
"""The ``ctxwise hook`` commands Claude Code runs."""


def hook_settings(
    command: str = "ctxwise",
    *,
    subagent: Literal["pre-tool-use", "subagent-start"] = "pre-tool-use",
    timeout: int = DEFAULT_HOOK_TIMEOUT,
) -> dict[str, Any]:
    """The ``settings.json`` snippet registering the hooks.

    ``subagent`` picks how subagents get their context: ``updatedInput`` on the
    ``PreToolUse`` of ``Agent|Task`` (the default), or ``additionalContext`` on
    ``SubagentStart`` (for versions that ignore ``updatedInput`` for that tool).
    Only one, so a subagent never gets the context twice.
    """

    def entry(matcher: str, event: str) -> dict[str, Any]:
        return {
            "matcher": matcher,
            "hooks": [
                {"type": "command", "command": f"{command} hook {event}", "timeout": timeout}
            ],
        }

    hooks: dict[str, Any] = {}
    if subagent == "pre-tool-use":
        hooks["PreToolUse"] = [entry("|".join(SUBAGENT_TOOLS), "subagent-context")]
    elif subagent == "subagent-start":
        hooks["SubagentStart"] = [entry("", "subagent-start")]
    else:
        raise UsageError(f"subagent is 'pre-tool-use' or 'subagent-start', not {subagent!r}")
    hooks["PreCompact"] = [entry("manual|auto", "pre-compact")]
    hooks["SessionStart"] = [entry("compact", "session-start")]
    return {"hooks": hooks}


def _commands(groups: Sequence[Any]) -> set[str]:
    return {
        h["command"]
        for g in groups
        if isinstance(g, Mapping)
        for h in (g.get("hooks") or [])
        if isinstance(h, Mapping) and isinstance(h.get("command"), str)
    }


_SUBAGENT_HOOKS = ("subagent-context", "subagent-start")


def _ctxwise_event(command: object) -> str | None:
    """The ``ctxwise hook`` event a registered command runs (``… hook pre-compact``),
    whatever runs ctxwise (``ctxwise``, ``uvx ctxwise``, a path), else None."""
    if not isinstance(command, str):
        return None
    return next((e for e in HOOK_EVENTS if command.endswith(f" hook {e}")), None)


def _drop_replaced_hooks(hooks: dict[str, Any], snippet: Mapping[str, Any]) -> None:
    """Remove the ctxwise hooks the snippet replaces: its other way of giving
    subagents context (``hook subagent-context`` when the snippet registers ``hook
    subagent-start``, and the other way round), so a subagent gets its context
    once; and a ctxwise hook the snippet registers with another command (``uvx
    ctxwise`` after ``/old/bin/ctxwise``), so it does not run twice. Other hooks
    are kept."""
    commands = _commands([g for groups in snippet["hooks"].values() for g in groups])
    new = {e: c for c in commands if (e := _ctxwise_event(c)) is not None}
    wanted = set(new) & set(_SUBAGENT_HOOKS)
    other = set(_SUBAGENT_HOOKS) - wanted if len(wanted) == 1 else set()

    def replaced(h: object) -> bool:
        if not isinstance(h, Mapping):
            return False
        event = _ctxwise_event(h.get("command"))
        return event in other or (event in new and h["command"] != new[event])

    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue  # reported by merge_settings when the snippet touches it
        kept_groups = []
        for g in groups:
            inner = g.get("hooks") if isinstance(g, Mapping) else None
            if isinstance(inner, list):
                kept = [h for h in inner if not replaced(h)]
                if not kept and inner:
                    continue
                g = {**g, "hooks": kept}
            kept_groups.append(g)
        if kept_groups != groups:
            if kept_groups:
                hooks[event] = kept_groups
            else:
                del hooks[event]


def merge_settings(
    existing: Mapping[str, Any], snippet: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """``existing`` with the snippet's hook groups added, and the events changed.

    Every other key and hook is kept as it is; a group whose command is already
    registered for that event is not added again (installing twice changes nothing).
    ctxwise's other subagent hook (``subagent-context`` vs ``subagent-start``) is
    removed, so switching ``--subagent`` replaces it rather than adding a second,
    and so is a ctxwise hook registered with another command (installing with a
    new ``--command`` replaces the old one).

    Raises:
        UsageError: ``hooks`` or one of its events is not of the documented shape.
    """
    merged = json.loads(json.dumps(existing))
    hooks = merged.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise UsageError(f"'hooks' in the settings is {type(hooks).__name__}, not an object")
    _drop_replaced_hooks(hooks, snippet)
    added: list[str] = []
    for event, groups in snippet["hooks"].items():
        current = hooks.setdefault(event, [])
        if not isinstance(current, list):
            raise UsageError(f"'hooks.{event}' in the settings is not a list")
        have = _commands(current)
        new = [g for g in groups if not _commands([g]) <= have]
        if new:
            current.extend(json.loads(json.dumps(new)))
            added.append(event)
    if merged != existing:
        raw = existing.get("hooks")
        before: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        added += [e for e in before if e not in hooks or hooks[e] != before[e]]
        added = list(dict.fromkeys(added))
    return merged, added


@dataclass(frozen=True, slots=True)
class InstallResult:
    """The settings file, its new text, the events whose hooks changed (added to, or
    ctxwise's other subagent hook taken out), and whether it was written."""

    path: Path
    text: str
    added: tuple[str, ...]
    written: bool


def install_settings(
    path: str | Path, snippet: Mapping[str, Any], *, dry_run: bool = False
) -> InstallResult:
    """Merge ``snippet`` into the settings file at ``path`` (created when missing).

    The file is written atomically (a temporary file in the same folder, then
    renamed over it), and only when something was added and ``dry_run`` is false.
    A symbolic link at ``path`` is kept: the file it names is the one replaced.

    Raises:
        FormatError: the file does not read, is not valid UTF-8 JSON or not a JSON
            object; it is left untouched.
        OutputError: the file cannot be written (its folder is a file, …).
        UsageError: its ``hooks`` are not of the documented shape.
    """
    p = Path(path)
    existing: Any = {}
    if p.exists():
        blob = read_user_file(
            p, "a settings file", lambda where, why: FormatError(where, f"{why}; left unchanged")
        )
        try:
            raw = blob.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(
                str(p), f"is not UTF-8 text (byte {exc.start}: {exc.reason}); left unchanged"
            ) from None
        if raw.strip():
            try:
                existing = parse_json(raw)
            except json.JSONDecodeError as exc:
                raise FormatError(str(p), f"is not valid JSON ({exc}); left unchanged") from None
            except RecursionError:
                raise FormatError(str(p), "is JSON nested too deeply; left unchanged") from None
        if not isinstance(existing, dict):
            raise FormatError(str(p), "is not a JSON object; left unchanged")
    merged, added = merge_settings(existing, snippet)
    try:  # 1e400 reads as inf, which json.dumps writes as Infinity: not JSON
        text = json.dumps(merged, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    except ValueError:
        raise FormatError(
            str(p), "holds a number too large for JSON (or NaN); left unchanged"
        ) from None
    write = bool(added) and not dry_run
    if write:  # atomically, keeping the file's mode: the one writer in ctxwise._io
        target = Path(os.path.realpath(p))  # replace_file would replace a link itself
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            replace_file(target, text.encode("utf-8"), target.stat() if target.exists() else None)
        except OSError as exc:
            raise OutputError(str(p), f"{exc.strerror or exc}; left unchanged") from None
    return InstallResult(p, text, tuple(added), write)
