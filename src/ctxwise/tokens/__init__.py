"""Token counting.

Every counter satisfies :class:`TokenCounter`: ``count(text)`` for a string and
``count_messages(messages)`` for a conversation. ``count_messages`` is the sum of
each block's text count (tool inputs as compact JSON, see
:func:`ctxwise.messages.block_text`) plus a per-message overhead and a per-request
overhead that each backend documents:

========================== =================== ===================== =================
backend                    count(text)         per message           per request
========================== =================== ===================== =================
CharCounter                ceil(len × (1+m)/4) 4 (role + framing)    0
WordCounter                round(words × 1.3)  4                     0
TiktokenCounter            exact BPE length    3 (OpenAI cookbook)   3 (reply priming)
OpenAIChatCounter          exact BPE length    3 + role, name + 1    3 (reply priming)
CalibratedAnthropicCounter fitted linear model fitted, by block kind 0
========================== =================== ===================== =================

:class:`OpenAIChatCounter` (:mod:`ctxwise.tokens.openai`) adds the overheads
OpenAI documents for names and tool definitions;
:class:`CalibratedAnthropicCounter` (:mod:`ctxwise.tokens.anthropic`) estimates
Anthropic's counts from a local tokenization with coefficients fit on recorded
usage. :func:`counter_for_model` picks one from a model name (the Engine's default,
``counter = "auto"``), :func:`counter_error` says how far each one was from the
provider's counts, and :func:`default_safety_margin` (:func:`calibrated_margin` once a
session has calibrated) turns that into the margin a
budget keeps by default.

Counters that ask a provider's API live with the provider adapters
(:class:`ctxwise.providers.AnthropicCounter`); this module holds no provider code.

Images and documents have no text; estimators count them as
``media_tokens`` (default 1,600, the cost of a ~1.15 megapixel image on Claude),
except a plain-text document (Anthropic's ``text`` and ``content`` sources), which
is counted as its text.
"""

from ctxwise.tokens._base import _LRU as _LRU
from ctxwise.tokens._base import (
    DEFAULT_MARKER,
    MEDIA_TOKENS,
    CharCounter,
    TiktokenBackend,
    TiktokenCounter,
    TokenCounter,
    WordCounter,
    truncate_to_tokens,
)
from ctxwise.tokens._base import _TextCounter as _TextCounter
from ctxwise.tokens.anthropic import (
    AnthropicCalibration,
    AnthropicTokenizer,
    CalibratedAnthropicCounter,
)
from ctxwise.tokens.models import (
    CounterAccuracy,
    anthropic_counter,
    calibrated_margin,
    check_counter_name,
    counter_error,
    counter_for_model,
    default_safety_margin,
    get_counter,
    is_claude_model,
    provider_of,
)
from ctxwise.tokens.openai import OpenAIChatCounter, OpenAIToolOverheads, openai_encoding

__all__ = [
    "DEFAULT_MARKER",
    "MEDIA_TOKENS",
    "AnthropicCalibration",
    "AnthropicTokenizer",
    "CalibratedAnthropicCounter",
    "CharCounter",
    "CounterAccuracy",
    "OpenAIChatCounter",
    "OpenAIToolOverheads",
    "TiktokenBackend",
    "TiktokenCounter",
    "TokenCounter",
    "WordCounter",
    "anthropic_counter",
    "calibrated_margin",
    "check_counter_name",
    "counter_error",
    "counter_for_model",
    "default_safety_margin",
    "get_counter",
    "is_claude_model",
    "openai_encoding",
    "provider_of",
    "truncate_to_tokens",
]
