"""The exception tree.

One root, two branches::

    CtxwiseError
    ├── UsageError              the caller's mistake: fix the input and call again
    │   ├── BudgetError             a budget that cannot hold anything
    │   ├── PinnedOverflowError     pinned sections alone exceed the budget
    │   ├── SpecError               a malformed assembly spec file
    │   ├── FormatError             a transcript or payload that does not decode
    │   │   └── UnknownFormatError      a format name or file shape ctxwise does not know
    │   ├── OutputError             an output path that cannot be written (a folder, no folder)
    │   └── MissingDependencyError  an optional extra is not installed
    └── BackendError            the environment failed: fix it, not the input
        ├── TokenizerUnavailableError   an exact tokenizer cannot load offline
        └── ProviderError               an LLM provider call failed

Every subclass carries structured fields so a program can react without parsing
the message. The CLI maps every ``CtxwiseError`` to exit code 2 and one line.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "BackendError",
    "BudgetError",
    "CtxwiseError",
    "FormatError",
    "MissingDependencyError",
    "OutputError",
    "PinnedOverflowError",
    "ProviderError",
    "SpecError",
    "TokenizerUnavailableError",
    "UnknownFormatError",
    "UsageError",
]


class CtxwiseError(Exception):
    """Root of every error ctxwise raises on purpose."""


class UsageError(CtxwiseError):
    """The caller asked for something that cannot be done as asked."""


class BackendError(CtxwiseError):
    """Something outside the caller's input failed (a file, a service, a library)."""


class BudgetError(UsageError):
    """A token budget that is zero, negative, or smaller than its reserve."""

    def __init__(self, budget: int, detail: str) -> None:
        self.budget = budget
        self.detail = detail
        super().__init__(f"invalid budget {budget}: {detail}")


class PinnedOverflowError(UsageError):
    """Pinned sections alone need more tokens than the budget allows."""

    def __init__(self, budget: int, pinned_tokens: int, sections: Sequence[str]) -> None:
        self.budget = budget
        self.pinned_tokens = pinned_tokens
        self.sections = tuple(sections)
        names = ", ".join(self.sections)
        super().__init__(
            f"pinned sections need {pinned_tokens} tokens but the budget is {budget} "
            f"(pinned: {names}); raise the budget or unpin a section"
        )


class SpecError(UsageError):
    """An assembly spec (YAML or JSON) that does not validate."""

    def __init__(self, source: str, detail: str) -> None:
        self.source = source
        self.detail = detail
        super().__init__(f"{source}: {detail}")


class FormatError(UsageError):
    """A transcript, request or response that does not decode in its format."""

    def __init__(self, source: str, detail: str, *, line: int | None = None) -> None:
        self.source = source
        self.detail = detail
        self.line = line
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {detail}")


class UnknownFormatError(FormatError):
    """A format name that is not supported, or a file whose format cannot be detected."""


class OutputError(UsageError):
    """An output file that cannot be written: a directory, a missing folder, a
    failed write. The original file is then unchanged."""

    def __init__(self, path: str, detail: str) -> None:
        self.path = path
        self.detail = detail
        super().__init__(f"cannot write {path}: {detail}")

    def __reduce__(self) -> tuple[type[OutputError], tuple[str, str]]:
        return (type(self), (self.path, self.detail))


class MissingDependencyError(UsageError, ImportError):
    """An optional dependency is needed; the message names the install command."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        self.package = package
        self.extra = extra
        self.purpose = purpose
        super().__init__(f"{purpose} needs the '{package}' package: pip install 'ctxwise[{extra}]'")


class TokenizerUnavailableError(BackendError):
    """An exact tokenizer's data cannot be loaded on this (offline) machine."""

    def __init__(self, encoding: str, detail: str) -> None:
        self.encoding = encoding
        self.detail = detail
        super().__init__(f"tokenizer {encoding!r} unavailable: {detail}")


class ProviderError(BackendError):
    """A call to an LLM provider failed (network, auth, rate limit, bad response)."""

    def __init__(self, provider: str, detail: str, *, status: int | None = None) -> None:
        self.provider = provider
        self.detail = detail
        self.status = status
        code = f" (HTTP {status})" if status is not None else ""
        super().__init__(f"{provider} call failed{code}: {detail}")
