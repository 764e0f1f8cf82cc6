"""What every persisted-schema model shares: one strict model config, an exact
``version`` check, and one line naming the field path of a validation error.

The persisted formats (the router file, policy gates, case facts and rules) are
read through pydantic models defined beside their owners; their owners turn a
:class:`pydantic.ValidationError` into a :class:`~ctxwise.errors.FormatError`
whose detail is :func:`describe` of it, e.g. ``rules[2].tools: Input should be
a valid list``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

__all__ = ["IdText", "PersistedModel", "as_dict", "describe", "field_path", "versions"]


class PersistedModel(BaseModel):
    """Frozen, unknown keys rejected, no coercion (``"1"`` is not a number, a
    tuple is not a JSON list): what JSON could have held, and nothing else."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


def versions(*supported: int, what: str = "version") -> BeforeValidator:
    """The check for a ``version`` field (before its ``Literal`` of the same
    values): exactly one of ``supported``, as an integer (``True`` and ``1.0``
    equal 1 but are not it), else ``unsupported version 99 (this ctxwise reads 1, 2)``."""
    reads = ", ".join(map(str, supported))

    def check(value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, int) or value not in supported:
            raise ValueError(f"unsupported {what} {value!r} (this ctxwise reads {reads})")
        return value

    return BeforeValidator(check)


def _id_text(value: object) -> object:
    """An integer id written by hand (``4417``) reads as its text, as it always did."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


IdText = Annotated[str, BeforeValidator(_id_text)]
"""A string, or an integer read as its decimal text."""


def as_dict(data: object) -> object:
    """A mapping as a ``dict`` (a strict model takes only a dict); anything else as is."""
    if isinstance(data, Mapping) and not isinstance(data, dict):
        return dict(data)
    return data


def field_path(loc: Sequence[int | str], tags: Collection[str] = ()) -> str:
    """``("rules", 2, "forbid", "tools")`` → ``rules[2].tools``: list indexes in
    brackets, and the tag a discriminated union adds after an index left out."""
    out = ""
    prev: int | str | None = None
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not (isinstance(prev, int) and part in tags):
            out += f".{part}" if out else part
        prev = part
    return out


def describe(exc: ValidationError, *, tags: Collection[str] = (), kind: str = "kind") -> str:
    """One line for a validation error: the first error's field path and message
    (``"(top level)"`` when it has none), and how many more there are.

    ``tags`` are the tags of the discriminated unions in the model (left out of
    the path); a bad or missing tag is reported at the ``kind`` field."""
    errors = exc.errors(include_url=False)
    err = errors[0]
    where = field_path(err["loc"], tags)
    kind_type = err["type"]
    msg = str(err["msg"])
    if kind_type == "extra_forbidden":
        msg = "unknown key"
    elif kind_type == "missing":
        msg = "missing"
    elif kind_type in ("union_tag_invalid", "union_tag_not_found"):
        where = f"{where}.{kind}" if where else kind
        ctx: Mapping[str, Any] = err.get("ctx") or {}
        known = ", ".join(sorted(tags)) or str(ctx.get("expected_tags", ""))
        if kind_type == "union_tag_invalid":
            msg = f"unknown {kind} {ctx.get('tag')!r} (known: {known})"
        else:
            msg = f"missing (known: {known})"
    elif kind_type == "value_error":
        msg = msg.removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where or '(top level)'}: {msg}{more}"
