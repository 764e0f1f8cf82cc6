"""ctxwise: the context layer for LLM agents.

On every turn ctxwise decides what enters the model's context window: it counts
tokens, reads and writes provider transcript formats, and assembles sections
under a token budget with a report of every decision.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

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
from ctxwise.spec import AssemblySpec, load_spec
from ctxwise.tokens import (
    AnthropicCounter,
    CharCounter,
    TiktokenCounter,
    TokenCounter,
    WordCounter,
    get_counter,
    truncate_to_tokens,
)

try:
    __version__ = version("ctxwise")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

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
