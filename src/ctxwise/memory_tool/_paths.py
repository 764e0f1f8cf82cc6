"""The path grammar of the memory tool: what a path under ``/memories`` may be
(see :mod:`ctxwise.memory_tool` for every rule), and how errors quote what the
model sent."""

from __future__ import annotations

import re
import unicodedata
from typing import Literal, TypeAlias

from ctxwise.errors import UsageError

__all__ = [
    "MAX_ERROR_CHARS",
    "MAX_NAME_BYTES",
    "MAX_PATH_CHARS",
    "MAX_QUOTE_CHARS",
    "ROOT",
    "Kind",
    "Parts",
    "addressable",
    "bounded",
    "brief",
    "check_name",
    "check_path",
    "human_size",
    "parse_path",
    "quote",
    "show",
    "split_lines",
]

ROOT = "/memories"
MAX_PATH_CHARS = 1024
MAX_NAME_BYTES = 255
_DEVICE_NAMES = frozenset(
    {
        "CON",
        "PRN",
        "AUX",
        "NUL",
        "CONIN$",
        "CONOUT$",
        *(f"{p}{i}" for p in ("COM", "LPT") for i in range(10)),
    }
)
MAX_QUOTE_CHARS = 200
"""The most characters of a string the model sent that an error quotes back."""
MAX_ERROR_CHARS = 4_000
"""The most characters of an error result (a longer one is cut, saying so)."""
MAX_MATCH_LINES = 10
"""The most line numbers a str_replace error lists for an old_str found more than once."""
_NOT_PORTABLE = frozenset('<>:"|?*')

Parts: TypeAlias = tuple[str, ...]
Kind: TypeAlias = Literal["file", "dir"] | None

_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
# Characters that read as a dot but survive NFKC unchanged.
_DOT_LIKE = frozenset(
    "\u00b7\u0387\u05c3\u06d4\u0701\u0702\u0830\u1362\u166e\u1803\u1809\u2022\u2027"
    "\u2218\u2219\u22c5\u2e2e\u2e3c\u3002\ua4f8\ua60e\ua6f3\U00010a56\U0001da88"
)
# Characters that read as '/' or '\' but survive NFKC unchanged (those it changes,
# such as U+FF0F and U+FE68, are refused as normalization-changing): the symbols
# and strokes Unicode's confusables list for the two, the solidus operators and
# overlays. Letters that resemble a stroke (katakana NO, CJK 丿 and 丶) are words'
# letters, not refused.
_SLASH_LIKE = frozenset(
    "\u0337\u0338\u1735\u2041\u2044\u20e5\u20eb\u2215\u2216\u244a\u2571\u2572"
    "\u27cb\u27cd\u29f5\u29f6\u29f7\u29f8\u29f9\u2afb\u2afd\u2e4a\u3033\u31d3\u31d4"
    "\U0001d20f\U0001d23a\U0001d23b\U0001f67c\U0001f67d"
)


def quote(text: str, limit: int = MAX_QUOTE_CHARS) -> str:
    """``text`` whole when it is short, else its first ``limit`` characters and its length."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


def brief(value: object, limit: int = MAX_QUOTE_CHARS) -> str:
    """``repr(value)``, cut as :func:`quote` cuts; for a value ``repr`` cannot show
    (an integer over 4,300 digits, a list nested too deeply), its type."""
    if isinstance(value, str):  # the repr of a cut string: escapes can make it 10x longer
        text = repr(value[: limit + 1])
        if len(value) <= limit and len(text) <= limit:
            return text
        return f"{text[:limit]}… ({len(value):,} characters)"
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        what = "an integer" if isinstance(value, int) else f"a {type(value).__name__}"
        return f"{what} too large to show"
    return quote(text, limit)


def bounded(text: str) -> str:
    """An error result's text, cut at :data:`MAX_ERROR_CHARS` (saying so)."""
    if len(text) <= MAX_ERROR_CHARS:
        return text
    return f"{text[:MAX_ERROR_CHARS]}… (error cut: {len(text):,} characters)"


def check_path(path: object) -> Parts:
    """The segments of a memory path below ``/memories`` (``()`` for the root
    itself), or a :class:`UsageError` saying why the path is refused."""
    return parse_path(path, "path")


def parse_path(path: object, param: str) -> Parts:
    if not isinstance(path, str):
        raise UsageError(f"Error: `{param}` must be a string path under {ROOT}, got {brief(path)}.")
    shown = brief(path)
    fix = f"Use a path like {ROOT}/notes.md."
    if len(path) > MAX_PATH_CHARS:
        raise UsageError(f"Error: the path is longer than {MAX_PATH_CHARS} characters. {fix}")
    if "\x00" in path:
        raise UsageError(f"Error: the path {shown} contains a NUL byte. {fix}")
    if "\\" in path:
        raise UsageError(
            f"Error: the path {shown} contains a backslash; separate folders with '/'."
        )
    if _PERCENT_ESCAPE.search(path):
        raise UsageError(
            f"Error: the path {shown} contains a percent escape; write the characters "
            f"themselves (paths are not URL-encoded). {fix}"
        )
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise UsageError(
            f"Error: the path {shown} is outside {ROOT}; every path starts with {ROOT}/. {fix}"
        )
    rest = path[len(ROOT) + 1 :]
    if rest.endswith("/"):
        rest = rest[:-1]
    if not rest:
        if path not in (ROOT, ROOT + "/"):
            raise UsageError(f"Error: the path {shown} has an empty segment ('//'); remove it.")
        return ()
    parts = tuple(rest.split("/"))
    for name in parts:
        check_name(name, shown)
    return parts


def check_name(name: str, shown: str) -> None:
    if not name:
        raise UsageError(f"Error: the path {shown} has an empty segment ('//'); remove it.")
    if name.startswith("."):
        raise UsageError(
            f"Error: the path {shown} has the segment {brief(name)}: names may not start with '.' "
            f"('.' and '..' are not allowed). Name the file without the leading dot."
        )
    if name[0].isspace() or name[-1].isspace() or name.endswith("."):
        raise UsageError(
            f"Error: the path {shown} has the segment {brief(name)}, which starts or ends with a "
            f"space or ends with a dot (invisible in a listing, and dropped by some file "
            f"systems, so two names would be one file); remove them."
        )
    stem = name.split(".", 1)[0].rstrip(" ").upper()
    if stem in _DEVICE_NAMES:
        raise UsageError(
            f"Error: the path {shown} has the segment {brief(name)}: {stem} is a device name on "
            f"Windows (CON, PRN, AUX, NUL, CONIN$, CONOUT$, COM0-9, LPT0-9, with any extension "
            f"and in any case), so the file could not be written or copied there; choose "
            f"another name."
        )
    bad = sorted({ch for ch in name if ch in _NOT_PORTABLE})
    if bad:
        raise UsageError(
            f"Error: the path {shown} has the segment {brief(name)} with {' '.join(bad)}, which "
            f"Windows file names cannot hold; use letters, digits, '-', '_' or '.'."
        )
    if unicodedata.normalize("NFKC", name) != name:
        raise UsageError(
            f"Error: the path {shown} has the segment {brief(name)}, which Unicode normalization "
            f"changes (look-alike or compatibility characters); use plain characters."
        )
    for ch in name:
        if ch in _SLASH_LIKE:
            raise UsageError(
                f"Error: the path {shown} contains {ch!r} (U+{ord(ch):04X}), which looks like "
                f"a slash or backslash; separate folders with '/' only, and name them with "
                f"letters, digits, '-', '_' or '.'."
            )
        if ch in _DOT_LIKE:
            raise UsageError(
                f"Error: the path {shown} contains {ch!r} (U+{ord(ch):04X}), which looks like "
                f"a dot; use '.' only inside a name, such as notes.md."
            )
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            raise UsageError(
                f"Error: the path {shown} contains the control or invisible character "
                f"U+{ord(ch):04X}; use visible characters only."
            )
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise UsageError(f"Error: a name in {shown} is longer than {MAX_NAME_BYTES} bytes.")


def addressable(name: str) -> bool:
    """Whether a memory path can name ``name`` (a listing shows nothing else: a name
    with a newline would forge rows, one that is not Unicode cannot be sent)."""
    try:
        check_name(name, repr(name))
    except UsageError:
        return False
    return True


def show(parts: Parts) -> str:
    return "/".join((ROOT, *parts))


def human_size(n: int) -> str:
    if n < 1024:
        return f"{n}B"
    value = float(n)
    for unit in "KMG":
        value /= 1024
        if value < 1024 or unit == "G":
            break
    return f"{value:.1f}".removesuffix(".0") + unit


def split_lines(content: str) -> list[str]:
    """Lines split on LF (a CR stays), without the empty tail of a final newline."""
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines
