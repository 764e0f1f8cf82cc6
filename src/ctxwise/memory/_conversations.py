"""The conversations a recall evaluation reads (see :mod:`ctxwise.memory.evaluation`
for the format): loading and checking them, converting LoCoMo, and turning their
turns into messages and memory items."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxwise._io import parse_json, read_text_file
from ctxwise.errors import FormatError, UsageError
from ctxwise.memory.store import (
    NewItem,
)
from ctxwise.memory.tiered import turn_items as tiered_turn_items
from ctxwise.messages import Message, TextBlock

__all__ = [
    "check_conversations",
    "conversation_name",
    "evidence_ids",
    "load_conversations",
    "locomo_to_generic",
    "skipped_question",
    "turn_items",
    "turn_messages",
]

_EVIDENCE = re.compile(r"D(\d+):(\d+)")
"""A LoCoMo evidence id, anywhere in an evidence string (upstream writes a few as
``"D8:6; D9:17"`` or ``"D30:05"``); read as ``D<session>:<turn>`` with the leading
zeros dropped, as the turns' own ``dia_id`` has them."""


def locomo_to_generic(
    data: Any, categories: Sequence[int] = (1, 2, 3, 4), *, captions: bool = True
) -> dict[str, Any]:
    """LoCoMo samples → the generic format.

    With ``captions`` (the default), a turn that shares an image carries the
    image's caption as LoCoMo gives it (``blip_caption``), as ``"text [shares
    <caption>]"``: the caption is part of what the turn said (LoCoMo's own
    baselines read it too). Its ``query`` field (the search that fetched the
    image when the data was made) is never used.

    Evidence ids are read as the data's README says: every ``D<s>:<t>`` in an
    evidence string, leading zeros dropped, ids that name no turn left out. A
    question none of whose ids names a turn is kept with no evidence (the
    evaluations skip it, count it and list it with its ``unresolved_evidence``);
    a question outside ``categories`` is left out and counted in ``excluded``
    (``{"category 5": n}``).
    """
    if not isinstance(data, list) or not all(isinstance(s, Mapping) for s in data):
        raise FormatError("locomo", "LoCoMo data is a list of samples")
    conversations = []
    excluded: dict[str, int] = {}
    for sample in data:
        conv = sample.get("conversation")
        if not isinstance(conv, Mapping):
            raise FormatError("locomo", "a sample has no 'conversation'")
        turns = []
        sessions = sorted(
            (int(m.group(1)), key)
            for key in conv
            if (m := re.fullmatch(r"session_(\d+)", key)) and isinstance(conv[key], list)
        )
        for number, key in sessions:
            date = conv.get(f"session_{number}_date_time")
            for turn in conv[key]:
                text = turn.get("text", "")
                caption = turn.get("blip_caption")
                shares = captions and isinstance(caption, str) and caption.strip()
                if shares and (text is None or isinstance(text, str)):  # others are refused
                    text = f"{text or ''} [shares {caption.strip()}]".lstrip()
                turns.append(
                    {
                        "id": turn["dia_id"],
                        "speaker": turn.get("speaker", ""),
                        "text": text,
                        "date": date,
                        "session": number,
                    }
                )
        ids = {t["id"] for t in turns}
        questions = []
        for qa in sample.get("qa", []):
            category = qa.get("category")
            if isinstance(category, str) and category.strip().isdigit():
                category = int(category)  # "1", as a file converted through strings has it
            if isinstance(category, bool) or category not in categories:
                key = f"category {category}"
                excluded[key] = excluded.get(key, 0) + 1
                continue
            raw = [str(r) for r in qa.get("evidence", [])]
            named = [f"D{int(s)}:{int(t)}" for r in raw for s, t in _EVIDENCE.findall(r)]
            evidence = sorted({e for e in named if e in ids})
            question: dict[str, Any] = {
                "question": qa["question"],
                "evidence": evidence,
                "category": str(category),
            }
            if not evidence:  # kept, so the evaluations count it and say why
                question["unresolved_evidence"] = raw
            questions.append(question)
        conversations.append(
            {"id": str(sample.get("sample_id")), "turns": turns, "questions": questions}
        )
    return {"conversations": conversations, "excluded": dict(sorted(excluded.items()))}


def load_conversations(path: str | Path, format: str = "auto") -> dict[str, Any]:
    """Read a generic or LoCoMo file (``format``: auto, generic, locomo), checked by
    :func:`check_conversations`.

    Raises:
        FormatError: the file is not JSON, or not conversations of that format (the
            message names the first conversation, turn or question that is wrong).
        UsageError: an unknown ``format``.
    """
    text = read_text_file(path, "a JSON file", FormatError)
    try:
        data = parse_json(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise FormatError(str(path), f"invalid JSON: {exc}") from None
    if format == "auto":
        format = "generic" if isinstance(data, Mapping) and "conversations" in data else "locomo"
    if format == "locomo":
        try:
            out = locomo_to_generic(data)
        except FormatError as exc:  # said of LoCoMo data: say it of the file
            raise FormatError(
                str(path), f"not LoCoMo or generic conversations: {exc.detail}"
            ) from None
        except (KeyError, TypeError, AttributeError) as exc:  # a malformed sample
            raise FormatError(
                str(path), f"not LoCoMo or generic conversations ({type(exc).__name__}: {exc})"
            ) from None
    elif format != "generic":
        raise UsageError(f"unknown format {format!r}; choose auto, generic or locomo")
    else:
        if not isinstance(data, Mapping) or not isinstance(data.get("conversations"), list):
            raise FormatError(str(path), "the generic format is {'conversations': [...]}")
        out = dict(data)
    check_conversations(out, str(path))
    return out


def check_conversations(data: Mapping[str, Any], source: str) -> None:
    """Raise :class:`FormatError` unless ``data`` is the generic format: a non-empty
    list of conversations, each with its own ``id``, ``turns`` and ``questions``.

    - A turn is an object with an ``id`` (a non-empty string or an integer, no two
      alike in a conversation) and a string or null as ``text``; at least one turn
      of a conversation has text to remember.
    - A question is an object with a ``question`` (not blank) and a list of turn ids as
      ``evidence``, each naming a turn of the conversation (turn ids and evidence
      ids compare as strings). A question without evidence is valid: the
      evaluations skip it and count it as ``skipped``.
    """
    convs = data.get("conversations")
    if not isinstance(convs, list) or not convs:
        raise FormatError(source, "holds no conversations")
    seen: set[str] = set()
    for n, conv in enumerate(convs, 1):
        if not isinstance(conv, Mapping):
            raise FormatError(source, f"conversation {n} is not an object")
        turns, questions = conv.get("turns"), conv.get("questions", [])
        if not isinstance(turns, list) or not all(
            isinstance(t, Mapping) and isinstance(t.get("id"), str | int) for t in turns
        ):
            raise FormatError(source, f"conversation {n}: 'turns' is a list of {{'id', 'text'}}")
        if not isinstance(questions, list) or not all(
            isinstance(q, Mapping)
            and isinstance(q.get("question"), str)
            and isinstance(q.get("evidence", []), list)
            and all(isinstance(e, str | int) for e in q.get("evidence", []))
            for q in questions
        ):
            raise FormatError(
                source,
                f"conversation {n}: 'questions' is a list of "
                "{'question': text, 'evidence': [turn ids]}",
            )
        name = conversation_name(conv, n)
        if name in seen:
            raise FormatError(source, f"two conversations have the id {name!r}")

        seen.add(name)
        ids: set[str] = set()
        for t in turns:
            tid = str(t["id"])
            if isinstance(t["id"], bool) or not tid.strip():
                raise FormatError(
                    source,
                    f"conversation {name!r}: a turn's id is a non-empty string or an"
                    f" integer, got {t['id']!r}",
                )
            text = t.get("text")
            if text is not None and not isinstance(text, str):
                raise FormatError(
                    source,
                    f"conversation {name!r}: turn {tid!r} has a {type(text).__name__} as"
                    " its text, not a string",
                )
            if tid in ids:
                raise FormatError(
                    source,
                    f"conversation {name!r}: two turns have the id {tid!r} (the second"
                    " would replace the first, and evidence could not tell them apart)",
                )
            ids.add(tid)
        if not turn_items(conv):
            raise FormatError(source, f"conversation {name!r} has no turns to remember")
        for qn, q in enumerate(questions, 1):
            if not q["question"].strip():
                raise FormatError(
                    source, f"conversation {name!r}: question {qn} has no text to recall with"
                )
            for e in q.get("evidence", []):
                if str(e) not in ids:
                    raise FormatError(
                        source,
                        f"conversation {name!r}: question {qn}'s evidence names"
                        f" unknown turn {str(e)!r}",
                    )


def conversation_name(conversation: Mapping[str, Any], position: int) -> str:
    """A conversation's name: its ``id`` as a string, or ``conversation-<position>``
    (1-based) without one; the evaluation remembers it in ``eval/<name>``."""
    return str(conversation.get("id", f"conversation-{position}"))


def evidence_ids(question: Mapping[str, Any]) -> set[str]:
    """A question's evidence turn ids, as strings (turn ids compare as strings)."""
    return {str(e) for e in question.get("evidence", [])}


def skipped_question(conversation: str, number: int, question: Mapping[str, Any]) -> dict[str, Any]:
    """What an evaluation reports of a question it left out for want of evidence:
    its ``conversation``, its 1-based ``question`` number there, its ``text`` (at
    most 200 characters) and the ``reason``."""
    unresolved = question.get("unresolved_evidence")
    if unresolved:
        reason = "its evidence names no turn of the conversation: " + ", ".join(
            repr(str(e))[:40] for e in unresolved[:5]
        )
    else:
        reason = "it has no evidence"
    text = str(question.get("question", ""))
    return {
        "conversation": conversation,
        "question": number,
        "text": text if len(text) <= 200 else text[:199] + "…",
        "reason": reason,
    }


def turn_messages(conversation: Mapping[str, Any]) -> list[Message]:
    """A generic-format conversation as messages: each turn a user message with
    the turn's id, its date as the timestamp and its speaker as ``extra["name"]``
    (a turn whose text is missing or null has none)."""
    out = []
    for t in conversation["turns"]:
        speaker = t.get("speaker")
        date = t.get("date")
        out.append(
            Message(
                "user",
                (TextBlock(t.get("text") or ""),),
                plain=True,
                id=str(t["id"]),
                timestamp=str(date) if date is not None else None,
                extra={"name": speaker} if isinstance(speaker, str) and speaker else {},
            )
        )
    return out


def turn_items(conversation: Mapping[str, Any]) -> list[NewItem]:
    """What the evaluation remembers of a generic-format conversation: what
    :class:`~ctxwise.memory.TieredMemory` remembers of the same turns
    (:func:`~ctxwise.memory.tiered.turn_items` of :func:`turn_messages`): one item
    per non-empty turn, text ``"speaker: text"``, id = the turn id."""
    return tiered_turn_items(turn_messages(conversation))
