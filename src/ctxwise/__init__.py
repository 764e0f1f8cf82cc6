"""ctxwise: the context layer for LLM agents.

On every turn ctxwise decides what enters the model's context window: it counts
tokens, reads and writes provider transcript formats, and assembles sections
under a token budget with a report of every decision.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxwise._version import __version__
from ctxwise.assembly import (
    Assembly,
    Budget,
    Section,
    SectionReport,
    SectionStatus,
    assemble,
    order_for_recall,
)
from ctxwise.composition import Composition, CompositionItem, composition
from ctxwise.errors import (
    BackendError,
    BudgetError,
    CtxwiseError,
    FormatError,
    MissingDependencyError,
    PinnedOverflowError,
    ProviderError,
    SpecError,
    TokenizerUnavailableError,
    UnknownFormatError,
    UsageError,
)
from ctxwise.formats import detect_format, read_transcript, read_transcripts
from ctxwise.messages import (
    CompactBoundary,
    ContentBlock,
    MediaBlock,
    Message,
    OpaqueBlock,
    PairingProblem,
    ProblemKind,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transcript,
)
from ctxwise.tokens import (
    AnthropicCounter,
    CharCounter,
    TiktokenCounter,
    TokenCounter,
    WordCounter,
    get_counter,
    truncate_to_tokens,
)

if TYPE_CHECKING:
    from ctxwise.spec import AssemblySpec, load_spec

# The spec loader pulls in pydantic and yaml; load it on first use so that
# `import ctxwise` (and every CLI command but `assemble`) starts fast.
_LAZY = {"AssemblySpec": "ctxwise.spec", "load_spec": "ctxwise.spec"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ctxwise' has no attribute {name!r}")


__all__ = [
    "AnthropicCounter",
    "Assembly",
    "AssemblySpec",
    "BackendError",
    "Budget",
    "BudgetError",
    "CharCounter",
    "CompactBoundary",
    "Composition",
    "CompositionItem",
    "ContentBlock",
    "CtxwiseError",
    "FormatError",
    "MediaBlock",
    "Message",
    "MissingDependencyError",
    "OpaqueBlock",
    "PairingProblem",
    "PinnedOverflowError",
    "ProblemKind",
    "ProviderError",
    "Section",
    "SectionReport",
    "SectionStatus",
    "SpecError",
    "TextBlock",
    "ThinkingBlock",
    "TiktokenCounter",
    "TokenCounter",
    "TokenizerUnavailableError",
    "ToolResultBlock",
    "ToolUseBlock",
    "Transcript",
    "UnknownFormatError",
    "UsageError",
    "WordCounter",
    "__version__",
    "assemble",
    "composition",
    "detect_format",
    "get_counter",
    "load_spec",
    "order_for_recall",
    "read_transcript",
    "read_transcripts",
    "truncate_to_tokens",
]
