"""Handoffs: what crosses to a subagent, and what comes back.

- :mod:`ctxwise.handoff.chunks`: a transcript cut into verbatim chunks (a user
  message, an assistant reply, a tool call with its result);
- :mod:`ctxwise.handoff.scoring`: would a subagent need this chunk (hybrid recall
  offline by default, or a model's yes-probability);
- :mod:`ctxwise.handoff.select`: :func:`select_context` packs the chunks a task
  needs, verbatim and in order, under a token budget, with a report of what was
  left out;
- :mod:`ctxwise.handoff.escalation`: a brief for a person taking a case over,
  from the case facts and the transcript, every line quoted or extracted;
- :mod:`ctxwise.handoff.evaluation`: evidence recall of a selection on
  conversations with evidence-labelled questions, beside recency, BM25 and the
  whole transcript.
"""

from ctxwise.handoff.chunks import Chunk, chunk_transcript
from ctxwise.handoff.escalation import EscalationBrief, escalation_brief
from ctxwise.handoff.scoring import ChunkScorer, HybridScorer, LLMScorer
from ctxwise.handoff.select import (
    DEFAULT_BUDGET,
    DEFAULT_RECENT_SHARE,
    SIZE_EXPONENT,
    Handoff,
    Selected,
    identifiers,
    select_context,
)

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_RECENT_SHARE",
    "SIZE_EXPONENT",
    "Chunk",
    "ChunkScorer",
    "EscalationBrief",
    "Handoff",
    "HybridScorer",
    "LLMScorer",
    "Selected",
    "chunk_transcript",
    "escalation_brief",
    "identifiers",
    "select_context",
]
