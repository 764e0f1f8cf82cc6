"""Rule-based fact extraction: the kinds, the rules per kind, :class:`FactExtractor`
and its :data:`PRESETS` (what each kind reads is described in
:mod:`ctxwise.memory.facts`, which re-exports every public name here).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from types import MappingProxyType
from typing import Protocol

from ctxwise.errors import UsageError
from ctxwise.memory._prose import prose_only

__all__ = [
    "DEFAULT_EXTRACTOR",
    "DEFAULT_KINDS",
    "KINDS",
    "MAX_TEXT_CHARS",
    "PRESETS",
    "Extraction",
    "Extractor",
    "FactExtractor",
    "check_optional",
    "check_text",
    "words",
]

MAX_TEXT_CHARS = 1_000_000
"""The longest text extraction, rule capture or a fact value accepts."""

KINDS: tuple[str, ...] = (
    "order_id",
    "reservation_id",
    "user_id",
    "amount",
    "date",
    "status",
    "tracking_number",
    "flight_number",
    "email",
)
"""The keys :class:`FactExtractor` emits."""

DEFAULT_KINDS: tuple[str, ...] = ("date", "email")
"""The kinds a :class:`FactExtractor` looks for unless told otherwise: the generic ones."""


def words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def check_text(text: object, what: str) -> str:
    if not isinstance(text, str):
        raise UsageError(f"{what} must be a string, got {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise UsageError(f"{what} is {len(text):,} characters; the limit is {MAX_TEXT_CHARS:,}")
    return text


def check_optional(value: object, what: str) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{what} must be a non-empty string or None, got {value!r}")


@dataclass(frozen=True, slots=True)
class Extraction:
    """A fact found in text: ``key``, normalized ``value``, and ``text[start:end]``."""

    key: str
    value: str
    start: int
    end: int

    @property
    def span(self) -> tuple[int, int]:
        return (self.start, self.end)


class Extractor(Protocol):
    """Anything that finds facts in text (:class:`FactExtractor` is the built-in one).

    :meth:`CaseFacts.update_from_messages` gives an extractor tool results only when
    it has a ``tool_output`` attribute that is ``True``; one without the attribute
    reads user and assistant text only, like the default.
    """

    def extract(self, text: str) -> Sequence[Extraction]: ...


# --------------------------------------------------------------------------- extraction

_I = re.IGNORECASE
_WS = re.compile(r"\s+")
_APOS = "['’]"

# A chain of tokens after a cue: connectors are skipped, values are taken.
_PUNCT_CONNECTOR = r"\*\*|[:#(\[\"'`*“”‘’=\-–—>]"
_LIST_SEPARATOR = re.compile(
    r"(?:\*\*|->|[,;/&(\[\"'`*“”‘’\-–—•)\]→]|\band\b|\bor\b|\bplus\b|\bthen\b|"
    r"\d{1,2}[.)](?=\s))",
    _I,
)
_ID_NOUNS = frozenset({"id", "ids", "number", "numbers", "no", "no.", "num", "code", "codes"})


def _connector(words: str, punct: str = "") -> re.Pattern[str]:
    return re.compile(
        rf"(?:{_PUNCT_CONNECTOR}|[{punct}?]|\d{{1,2}}[.)](?=\s)|\b(?:{words})\b\.?)", _I
    )


@dataclass(frozen=True, slots=True)
class _Hit:
    start: int
    end: int
    noun: bool  # an id noun ("ID", "number", "#", ":", …) came between the cue and the value
    bare: bool  # only punctuation came between the cue and the value


def _follow(
    text: str,
    pos: int,
    value: re.Pattern[str],
    connector: re.Pattern[str],
    *,
    max_connectors: int = 6,
    max_gap: int = 60,
    max_items: int = 20,
) -> list[_Hit]:
    """Values after ``pos``: the first through at most ``max_connectors`` connector
    tokens, then more as a list, each after at least one list separator."""
    hits: list[_Hit] = []
    i = gap_start = pos
    steps, noun, bare, listing, separated = 0, False, True, False, False
    n = len(text)
    while i < n and len(hits) < max_items and steps <= max_connectors and i - gap_start <= max_gap:
        ws = _WS.match(text, i)
        if ws:
            i = ws.end()
            continue
        if listing:
            m = value.match(text, i) if separated else None
            if m is None:
                sep = _LIST_SEPARATOR.match(text, i)
                if sep is None:
                    break
                separated, steps, i = True, steps + 1, sep.end()
                continue
        else:
            sep = connector.match(text, i)
            if sep is not None:
                tok = sep.group().lower().rstrip(".")
                if tok in _ID_NOUNS or tok in {"#", ":"}:
                    noun = True
                if tok[:1].isalpha():
                    bare = False
                steps, i = steps + 1, sep.end()
                continue
            m = value.match(text, i)
            if m is None:
                break
        group = m.lastindex or 0
        hits.append(_Hit(m.start(group), m.end(group), noun, bare))
        i = gap_start = m.end()
        steps, listing, separated = 0, True, False
    return hits


def _scan(
    pattern: re.Pattern[str], fast: re.Pattern[str], text: str, low: str
) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text)``, found faster: every match of ``pattern`` starts
    where ``fast`` (case-sensitive, literal-led, run on the lowercase ``low``)
    matches, so only those places are tried. Falls back to a plain scan when
    lowercasing changed the text's length (rare non-ASCII letters)."""
    if len(low) != len(text):
        yield from pattern.finditer(text)
        return
    pos = 0
    while (c := fast.search(low, pos)) is not None:
        m = pattern.match(text, c.start())
        if m is None:
            pos = c.start() + 1  # a real match may start inside a failed candidate
            continue
        yield m
        pos = max(m.end(), c.start() + 1)


def _digit(s: str) -> bool:
    return any(c.isdigit() for c in s)


def _alpha(s: str) -> bool:
    return any(c.isalpha() for c in s)


# reservation ids --------------------------------------------------------------

_RES_CUE = re.compile(
    r"\b(reservations?|bookings?|confirmations?|record\s+locators?|locators?|PNRs?)\b", _I
)
_BEFORE_FLIGHT = re.compile(r"\W{0,3}\s*flights?\b", _I)
_RES_VALUE = re.compile(r"([A-Z0-9]{6})(?![A-Za-z0-9_@])")
_RES_CONNECT = _connector(
    r"ids?|numbers?|nos?|nums?|codes?|is|are|was|were|with|the|of|it['’]s|its|it|being|"
    r"under|your|my|you|have|has|here|they|that|profile|following|listed|reference|ref"
)
_CAPS_STOP = words(
    """PLEASE CANCEL THANKS URGENT REFUND UPDATE CHANGE BEFORE ALWAYS AGENT HUMAN
    STATUS NUMBER FLIGHT TICKET CHARGE PAYPAL STRIPE CREDIT ASAP ACTIVE CLOSED
    BOOKED TODAY FRIDAY MONDAY SUNDAY ECONOMY RETURN NOTICE DOUBLE SINGLE"""
)


def _reservations(text: str, low: str) -> Iterator[Extraction]:
    if not any(w in low for w in ("reservation", "booking", "confirmation", "locator", "pnr")):
        return
    for cue in _RES_CUE.finditer(text):
        shouting = cue.group(1).isupper() and len(cue.group(1)) > 3
        listing = False
        for hit in _follow(text, cue.end(), _RES_VALUE, _RES_CONNECT):
            token = text[hit.start : hit.end]
            if not _alpha(token):
                continue
            if not _digit(token) and (
                shouting or token in _CAPS_STOP or not (hit.noun or hit.bare or listing)
            ):
                break
            if _BEFORE_FLIGHT.match(text, hit.end):  # "booking the HAT102 flight"
                break
            listing = True
            yield Extraction("reservation_id", token, hit.start, hit.end)


# user ids ------------------------------------------------------------------------

_PAYMENT_PREFIX = re.compile(
    r"^(?:credit_card|debit_card|gift_card|certificate|paypal|bank_account|card|voucher)_", _I
)
_USER_CUE = re.compile(
    r"\b(?:(?P<explicit>user\s*-?\s*(?:id|name)|customer\s+(?:id|number)|"
    r"account\s+(?:id|name|number)|member(?:ship)?\s+(?:id|number)|(?:user\s+)?profile\s+id|"
    r"(?:my|your)\s+id)|user|login|customer|account|(?:user\s+)?profile)\b",
    _I,
)
_USER_VALUE = re.compile(r"([A-Za-z0-9](?:[A-Za-z0-9_-]|\.(?=[A-Za-z0-9]))*)(?![\w@-]|\.\w)")
_USER_CONNECT = _connector(
    r"ids?|names?|is|was|it['’]s|it|which|should|would|be|under|as|my|your|the|of|with|"
    r"registered|number",
    punct=",",
)
_SELF_CUE = re.compile(
    rf"\b(?:I{_APOS}m|I\s+am|this\s+is|it{_APOS}s|it\s+is|here\s+it\s+is|that{_APOS}s)\b", _I
)
_USER_FAST = re.compile(r"user|login|customer|account|member|profile|my|your")
_SELF_FAST = re.compile(r"i['’]m|i\s+am|this\s+is|it['’]s|it\s+is|here\s+it\s+is|that['’]s")
_SELF_VALUE = re.compile(r"[\"'`“‘]?([a-z][a-z0-9]*(?:[._][a-z0-9]+)+)(?![\w@-]|\.\w)")


def _user_id_shaped(token: str, *, explicit: bool) -> bool:
    """A login-style id: lowercase letters with ``_``/``.``/``-`` and digits ("mia_li_3668").

    After an explicit cue ("user id", "username", …) the digits may be missing
    ("john.smith") or the id may be all digits ("884213"). All-uppercase codes
    ("ZFA04Y") are booking codes, not user ids; payment-method ids are not either.
    """
    if len(token) < 3 or _PAYMENT_PREFIX.match(token):
        return False
    digit = any(c.isdigit() for c in token)
    lower = any(c.islower() for c in token)
    joined = any(c in "_.-" for c in token)
    if explicit:
        return (lower and (digit or joined)) or (token.isdigit() and len(token) >= 4)
    return lower and digit and joined


def _user_ids(text: str, low: str) -> Iterator[Extraction]:
    cued = any(w in low for w in ("user", "login", "customer", "account", "profile")) or (
        "id" in low and ("my" in low or "your" in low)
    )
    for cue in _scan(_USER_CUE, _USER_FAST, text, low) if cued else ():
        hits = _follow(text, cue.end(), _USER_VALUE, _USER_CONNECT, max_connectors=5, max_items=1)
        if hits:
            token = text[hits[0].start : hits[0].end]
            if _user_id_shaped(token, explicit=cue.group("explicit") is not None):
                yield Extraction("user_id", token, hits[0].start, hits[0].end)
    for cue in _scan(_SELF_CUE, _SELF_FAST, text, low):
        m = _SELF_VALUE.match(text, _skip_space(text, cue.end(), extra=":"))
        if m and _user_id_shaped(m.group(1), explicit=False):
            yield Extraction("user_id", m.group(1), m.start(1), m.end(1))


def _skip_space(text: str, i: int, *, extra: str = "") -> int:
    while i < len(text) and (text[i].isspace() or text[i] in extra):
        i += 1
    return i


# order ids -----------------------------------------------------------------------

_ORDER_CUE = re.compile(r"\borders?\b", _I)
_ORDER_VALUE = re.compile(r"#?([A-Za-z]{0,3}\d[A-Za-z0-9]*(?:-[A-Za-z0-9]+)*)(?![\w@-]|\.\w)")
_ORDER_FAST = re.compile("order")
_HASH = re.compile("#")
_ORDER_CONNECT = _connector(r"ids?|numbers?|nos?|nums?|is|was|the|with|reference|ref|code")
_ORDER_HASH = re.compile(r"(?<![\w#])#([A-Z]{1,3}\d{4,})(?![\w-])")
_DATE_LIKE = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}$|^\d{3}-\d{3}-\d{4}$")
_YEAR = re.compile(r"^(?:19|20)\d\d$")


def _orders(text: str, low: str) -> Iterator[Extraction]:
    for cue in _scan(_ORDER_CUE, _ORDER_FAST, text, low) if "order" in low else ():
        for hit in _follow(text, cue.end(), _ORDER_VALUE, _ORDER_CONNECT):
            token = text[hit.start : hit.end]
            if len(token) < 4 or _DATE_LIKE.match(token):
                break
            if _YEAR.match(token) and not hit.noun:
                break
            yield Extraction("order_id", token, hit.start, hit.end)
    for m in _anchored(_ORDER_HASH, _HASH, text) if "#" in text else ():
        yield Extraction("order_id", m.group(1), m.start(1), m.end(1))


# tracking numbers ----------------------------------------------------------------

_TRACK_CUE = re.compile(r"\btracking\b", _I)
_TRACK_VALUE = re.compile(r"([A-Za-z0-9]{8,40})(?![\w@-]|\.\w)")
_TRACK_CONNECT = _connector(r"ids?|numbers?|nos?|nums?|codes?|is|are|was|the|your|my")
_UPS = re.compile(r"(?<![\w])(1Z[0-9A-Z]{16})(?![\w])")


def _tracking(text: str, low: str) -> Iterator[Extraction]:
    for cue in _TRACK_CUE.finditer(text) if "tracking" in low else ():
        for hit in _follow(text, cue.end(), _TRACK_VALUE, _TRACK_CONNECT):
            token = text[hit.start : hit.end]
            if _digit(token):
                yield Extraction("tracking_number", token, hit.start, hit.end)
    for m in _UPS.finditer(text) if "1Z" in text else ():
        yield Extraction("tracking_number", m.group(1), m.start(1), m.end(1))


# flight numbers ------------------------------------------------------------------

_FLIGHT_CUE = re.compile(r"\bflights?\b", _I)
_FLIGHT_VALUE = re.compile(r"((?:[A-Z]{2,3}|[A-Z]\d|\d[A-Z]) ?\d{1,4})(?![\w@]|\.\d)")
_FLIGHT_BEFORE = re.compile(
    r"(?<![\w@])((?:[A-Z]{2,3}|[A-Z]\d|\d[A-Z])\d{1,4})(?:\*\*)?\s+(?i:flights?)\b"
)
_FLIGHT_CONNECT = _connector(r"numbers?|nos?|nums?|is|are|was|were|the")


def _flights(text: str, low: str) -> Iterator[Extraction]:
    if "flight" not in low:
        return
    for cue in _FLIGHT_CUE.finditer(text):
        for hit in _follow(text, cue.end(), _FLIGHT_VALUE, _FLIGHT_CONNECT, max_connectors=3):
            token = text[hit.start : hit.end]
            yield Extraction("flight_number", token.replace(" ", ""), hit.start, hit.end)
    for m in _FLIGHT_BEFORE.finditer(text):  # "the HAT102 flight"
        yield Extraction("flight_number", m.group(1), m.start(1), m.end(1))


# amounts --------------------------------------------------------------------------

_NUM = r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d{1,2})?|\d+(?:\.\d{1,2})?)(?!\d|[.,]\d)"
_CODES = "USD|EUR|GBP|CAD|AUD|NZD|CHF|SEK|NOK|DKK|INR|SGD|HKD|MXN|BRL|ZAR"
_CODE_ANY = re.compile(_CODES)
_SYMBOLS = {"$": "USD", "us$": "USD", "€": "EUR", "£": "GBP"}
_WORDS = {"dollar": "USD", "dollars": "USD", "euro": "EUR", "euros": "EUR"}
_AMOUNTS = (
    re.compile(rf"(?<![\w$€£])(?P<code>US\$|\$|€|£) ?{_NUM}"),
    re.compile(rf"(?<![\w.,$€£]){_NUM} ?(?P<code>{_CODES}|€|(?i:dollars?|euros?))(?![\w])"),
    re.compile(rf"(?<![\w])(?P<code>{_CODES}) ?{_NUM}"),
)


def _amounts(text: str, low: str) -> Iterator[Extraction]:
    symbol = "$" in text or "€" in text or "£" in text
    has_code = _CODE_ANY.search(text) is not None
    word = "dollar" in low or "euro" in low
    gates = (symbol, has_code or word or "€" in text, has_code)
    for pattern, gate in zip(_AMOUNTS, gates, strict=True):
        if not gate:
            continue
        for m in pattern.finditer(text):
            raw = m.group("code")
            code = _SYMBOLS.get(raw.lower()) or _WORDS.get(raw.lower()) or raw
            number = Decimal(m.group("num").replace(",", "")).quantize(Decimal("0.01"))
            yield Extraction("amount", f"{code} {number}", m.start(), m.end())


# dates ----------------------------------------------------------------------------

_MONTH_TABLE = (
    ("January", "Jan"),
    ("February", "Feb"),
    ("March", "Mar"),
    ("April", "Apr"),
    ("May",),
    ("June", "Jun"),
    ("July", "Jul"),
    ("August", "Aug"),
    ("September", "Sep", "Sept"),
    ("October", "Oct"),
    ("November", "Nov"),
    ("December", "Dec"),
)
_MONTHS = {name: i + 1 for i, names in enumerate(_MONTH_TABLE) for name in names}
_MONTH_NAMES = tuple(names[0] for names in _MONTH_TABLE)
_MONTH_PREFIXES = tuple(names[0][:3] for names in _MONTH_TABLE)
_MON = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR_PART = r"(?:,?\s+(?P<year>(?:19|20)\d\d))?"
_DATES = (
    re.compile(
        r"(?<![\w./-])(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})(?![/-]|\.\d)(?=T\d|\W|$)"
    ),
    re.compile(r"(?<![\w./-])(?P<year>\d{4})/(?P<month>\d{1,2})/(?P<day>\d{1,2})(?![\w/-])"),
    re.compile(rf"\b(?P<mon>{_MON})\.?\s+{_DAY}{_YEAR_PART}(?![\w:])"),
    re.compile(rf"(?<![\w.]){_DAY}\s+(?:of\s+)?(?P<mon>{_MON})\b\.?{_YEAR_PART}(?![\w:])"),
    re.compile(r"(?<![\w./-])(?P<a>\d{1,2})/(?P<b>\d{1,2})/(?P<year>\d{4})(?![\w/-])"),
)
_ISO_ANCHOR = re.compile(r"-\d\d-")
_SLASH_ANCHOR = re.compile(r"/\d{1,2}/")
_MONTH_ANCHOR = re.compile("|".join(_MONTH_PREFIXES))
_BIRTH = re.compile(r"\b(?:birth|born|dob|birthday|b-day)\b", _I)


def _valid(year: int, month: int, day: int) -> bool:
    try:
        date(year, month, day)
    except ValueError:
        return False
    return True


def _date_value(m: re.Match[str]) -> str | None:
    groups = m.groupdict()
    year = int(groups["year"]) if groups.get("year") else None
    if groups.get("a"):  # d/m/y or m/d/y
        a, b = int(groups["a"]), int(groups["b"])
        if year is None:
            return None
        options = {(m_, d_) for m_, d_ in ((a, b), (b, a)) if _valid(year, m_, d_)}
        if len(options) == 1:
            month, day = options.pop()
            return f"{year:04d}-{month:02d}-{day:02d}"
        return m.group() if options else None
    month = _MONTHS[groups["mon"]] if groups.get("mon") else int(groups["month"])
    day = int(groups["day"])
    if year is None:
        return f"{_MONTH_NAMES[month - 1]} {day}" if _valid(2000, month, day) else None
    return f"{year:04d}-{month:02d}-{day:02d}" if _valid(year, month, day) else None


def _ends_with_day(text: str, i: int) -> bool:
    """``text[:i]`` ends with a day: a digit, maybe followed by st/nd/rd/th."""
    if text[i - 2 : i] in ("st", "nd", "rd", "th"):
        i -= 2
    return i > 0 and text[i - 1].isdecimal()


def _day_before(text: str, pos: int) -> bool:
    """``text[:pos]`` ends like ``_DATES[3]`` before its month: a day, whitespace,
    and maybe "of" and whitespace."""
    i = pos
    while i > 0 and text[i - 1].isspace():
        i -= 1
    if i == pos:
        return False
    if _ends_with_day(text, i):
        return True
    if text[i - 2 : i] != "of":
        return False
    j = i - 2
    while j > 0 and text[j - 1].isspace():
        j -= 1
    return j < i - 2 and _ends_with_day(text, j)


def _anchored(
    pattern: re.Pattern[str], anchor: re.Pattern[str], text: str, *, back: int = 0
) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text)`` where every match starts ``back`` characters
    before a match of the literal-led ``anchor``: only those places are tried."""
    pos, end = 0, 0
    while (a := anchor.search(text, pos)) is not None:
        pos = a.start() + 1
        start = a.start() - back
        if start >= end and (m := pattern.match(text, start)) is not None:
            end = max(m.end(), start + 1)
            yield m


def _date_matches(text: str) -> Iterator[re.Match[str]]:
    """Every match of the :data:`_DATES` patterns, pattern by pattern, each pattern
    tried only where its anchor (``-dd-``, ``/d/``, a month name) occurs."""
    iso, slash, named, day_first, numeric = _DATES
    if _ISO_ANCHOR.search(text):
        yield from _anchored(iso, _ISO_ANCHOR, text, back=4)
    has_slash = _SLASH_ANCHOR.search(text) is not None
    if has_slash:
        yield from slash.finditer(text)
    if _MONTH_ANCHOR.search(text):
        yield from _anchored(named, _MONTH_ANCHOR, text)
        months = [c.start() for c in _MONTH_ANCHOR.finditer(text)]
        if any(_day_before(text, p) for p in months):
            yield from day_first.finditer(text)
    if has_slash:
        yield from numeric.finditer(text)


def _dates(text: str, low: str) -> Iterator[Extraction]:
    for m in _date_matches(text):
        if _BIRTH.search(text, max(0, m.start() - 30), m.start()):
            continue
        value = _date_value(m)
        if value:
            yield Extraction("date", value, m.start(), m.end())


# statuses -------------------------------------------------------------------------

_STATUS = re.compile(r"\b(delivered|pending|cancell?ed|shipped|processed|refunded)\b", _I)
_STATUS_SUBJECT = re.compile(
    r"\b(?:orders?|reservations?|bookings?|packages?|parcels?|shipments?|refunds?|returns?|"
    r"exchanges?)\b|#[A-Z]{1,3}\d{4,}",
    _I,
)
_STATUS_NEAR_BLOCK = re.compile(  # within 25 characters before the status word
    rf"\b(?:not|never|be|want|wants|wanted|like|need|needs|please|should|get|got|can|could|"
    rf"will|would|may|might|must)\b|n{_APOS}t\b|{_APOS}(?:d|ll)\b",
    _I,
)
_STATUS_SENTENCE_BLOCK = re.compile(r"\b(?:if|whether|unless|once|until|when)\b", _I)
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")
_STATUS_VALUES = {"canceled": "cancelled"}
_STATUS_STEMS = ("delivered", "pending", "cancel", "shipped", "processed", "refunded")
_STATUS_WORDS = frozenset(
    {"delivered", "pending", "cancelled", "canceled", "shipped", "processed", "refunded"}
)


_SENTENCE_SPAN = 400  # a "sentence" is looked for at most this far either side


def _sentence_bounds(text: str, pos: int) -> tuple[int, int]:
    lo = max(0, pos - _SENTENCE_SPAN)
    start = lo
    for m in _SENTENCE_END.finditer(text, lo, pos):
        start = m.end()
    end_m = _SENTENCE_END.search(text, pos, pos + _SENTENCE_SPAN)
    return start, (end_m.end() if end_m else min(len(text), pos + _SENTENCE_SPAN))


def _statuses(text: str, low: str) -> Iterator[Extraction]:
    if not any(w in low for w in _STATUS_STEMS):
        return
    for m in _STATUS.finditer(text):
        start, end = _sentence_bounds(text, m.start())
        sentence = text[start:end]
        if sentence.rstrip().endswith("?"):
            continue
        if _STATUS_NEAR_BLOCK.search(text, max(start, m.start() - 25), m.start()):
            continue
        if _STATUS_SENTENCE_BLOCK.search(text, start, m.start()):
            continue
        lo, hi = max(start, m.start() - 80), min(end, m.end() + 80)
        if not _STATUS_SUBJECT.search(text, lo, hi):
            continue
        word = m.group(1).lower()
        yield Extraction("status", _STATUS_VALUES.get(word, word), m.start(1), m.end(1))


# e-mail and JSON fields -----------------------------------------------------------

_EMAIL = re.compile(
    r"(?<![\w.+-])([A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,})(?![\w-])"
)


_EMAIL_DOMAIN = re.compile(r"@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")


def _emails(text: str, low: str) -> Iterator[Extraction]:
    for m in _EMAIL.finditer(text) if "@" in text and _EMAIL_DOMAIN.search(text) else ():
        yield Extraction("email", m.group(1), m.start(1), m.end(1))


_JSON_FIELD = re.compile(
    r"[\"'](?P<field>user_id|customer_id|reservation_id|order_id|tracking_ids?|"
    r"tracking_numbers?|status)[\"']\s*:\s*\[?\s*[\"'](?P<value>[^\"'\n]{1,100})[\"']"
)
_JSON_KEYS = {
    "user_id": "user_id",
    "customer_id": "user_id",
    "reservation_id": "reservation_id",
    "order_id": "order_id",
    "tracking_id": "tracking_number",
    "tracking_ids": "tracking_number",
    "tracking_number": "tracking_number",
    "tracking_numbers": "tracking_number",
    "status": "status",
}
_JSON_NAMES_CASE = re.compile(r"[\"'](?:order_id|reservation_id)[\"']\s*:")


def _json_fields(text: str, low: str) -> Iterator[Extraction]:
    if "_id" not in text and "tracking" not in text and "status" not in text:
        return
    names_case = bool(_JSON_NAMES_CASE.search(text))
    for m in _JSON_FIELD.finditer(text):
        key = _JSON_KEYS[m.group("field")]
        value = m.group("value").strip()
        if not value:
            continue
        if key == "status":
            if not names_case or value.lower() not in _STATUS_WORDS:
                continue
            value = _STATUS_VALUES.get(value.lower(), value.lower())
        elif key == "order_id":
            value = value.lstrip("#")
        yield Extraction(key, value, m.start("value"), m.end("value"))


# Each rule first checks, with plain substring tests on the text and its lowercase
# copy, that its cue or anchor occurs at all: a regex that starts with \b or a
# lookbehind scans far more slowly than a substring test, and most texts (code,
# logs) hold no cue. The checks are necessary conditions of the rules' patterns,
# so they change no result; they cut extraction time severalfold on Claude Code
# sessions.
_RULES: dict[str, Callable[[str, str], Iterator[Extraction]]] = {
    "email": _emails,
    "user_id": _user_ids,
    "order_id": _orders,
    "reservation_id": _reservations,
    "tracking_number": _tracking,
    "flight_number": _flights,
    "amount": _amounts,
    "date": _dates,
    "status": _statuses,
}
_PRIORITY = {kind: i for i, kind in enumerate(_RULES)}
_STRUCTURED_KINDS = frozenset({"email"})


class FactExtractor:
    """Rule-based extraction of facts from conversation text (see the module doc).

    ``kinds`` limits the extractor to some of :data:`KINDS`; the default is
    :data:`DEFAULT_KINDS` (dates and e-mail addresses, the kinds that mean the same
    in any conversation). ``code=False`` (the default) blanks Markdown code fences,
    inline code spans and ``<bash-input>`` before scanning; ``tool_output=False``
    (the default) tells :meth:`CaseFacts.update_from_messages` to skip tool results.
    Harness text (``<system-reminder>``, ``<local-command-stdout>``, a compaction
    prompt, …) is blanked whatever the flags. Spans always refer to the text given.
    :meth:`preset` builds the named configurations in :data:`PRESETS`.

    :meth:`extract` returns extractions in text order; where two rules claim
    overlapping text, the longer (then the earlier-listed kind) wins. An extractor
    is immutable; two with the same kinds and flags are equal.
    """

    __slots__ = ("_code", "_kinds", "_tool_output")

    def __init__(
        self,
        kinds: Iterable[str] | None = None,
        *,
        tool_output: bool = False,
        code: bool = False,
    ) -> None:
        if isinstance(kinds, str):
            raise UsageError(f"kinds must be a list of kind names, not the string {kinds!r}")
        chosen = tuple(DEFAULT_KINDS if kinds is None else kinds)
        unknown = sorted(set(chosen) - set(KINDS), key=str)
        if unknown:
            raise UsageError(f"unknown fact kinds {unknown}; known: {', '.join(KINDS)}")
        if not chosen:
            raise UsageError("a FactExtractor needs at least one kind")
        for name, flag in (("tool_output", tool_output), ("code", code)):
            if not isinstance(flag, bool):
                raise UsageError(f"{name} must be True or False, got {flag!r}")
        self._kinds: tuple[str, ...] = tuple(k for k in _RULES if k in chosen)
        self._tool_output = tool_output
        self._code = code

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds this extractor looks for, in rule order."""
        return self._kinds

    @property
    def tool_output(self) -> bool:
        """Whether tool results are read by :meth:`CaseFacts.update_from_messages`
        (harness output in user text never is)."""
        return self._tool_output

    @property
    def code(self) -> bool:
        """Whether code (fences, inline code spans, ``<bash-input>``) is read."""
        return self._code

    @classmethod
    def preset(cls, name: str) -> FactExtractor:
        """The extractor named ``name`` in :data:`PRESETS` (``"prose"``, ``"support"``)."""
        found = PRESETS.get(name) if isinstance(name, str) else None
        if found is None:
            raise UsageError(f"unknown fact extractor preset {name!r}; known: {', '.join(PRESETS)}")
        return found

    def _key(self) -> tuple[tuple[str, ...], bool, bool]:
        return (self._kinds, self._tool_output, self._code)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FactExtractor):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"FactExtractor(kinds={list(self._kinds)!r}, "
            f"tool_output={self._tool_output}, code={self._code})"
        )

    def extract(self, text: str) -> list[Extraction]:
        text = prose_only(check_text(text, "text"), code=self._code)
        structured = text.lstrip()[:1] in ("{", "[")
        low = text.lower()
        found: list[Extraction] = [e for e in _json_fields(text, low) if e.key in self._kinds]
        for kind in self._kinds:
            if structured and kind not in _STRUCTURED_KINDS:
                continue
            found.extend(_RULES[kind](text, low))
        found.sort(key=lambda e: (e.start, -(e.end - e.start), _PRIORITY[e.key]))
        kept: list[Extraction] = []
        for e in found:
            if kept and e.start < kept[-1].end:
                continue
            kept.append(e)
        return kept


PRESETS: Mapping[str, FactExtractor] = MappingProxyType(
    {
        "prose": FactExtractor(),
        "support": FactExtractor(KINDS, tool_output=True, code=True),
    }
)
"""Named extractors, for :meth:`FactExtractor.preset`:

- ``"prose"`` (the default everywhere): :data:`DEFAULT_KINDS` from what the user
  and the assistant wrote, without code or tool output.
- ``"support"``: every kind in :data:`KINDS`, from everything, tool results
  included (JSON ones by field name): a customer-support or booking agent, whose
  ids, amounts and statuses come back from its tools.
"""

DEFAULT_EXTRACTOR = PRESETS["prose"]
"""The extractor used when none is given: the ``"prose"`` preset."""
