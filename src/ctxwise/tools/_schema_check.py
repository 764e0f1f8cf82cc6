"""Checking a tool's input schema and text fields (the catalog's definitions)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from ctxwise.errors import MissingDependencyError, ToolCatalogError
from ctxwise.tools.trim import json_depth

_MAX_NESTING = 64
"""How deep objects and arrays may nest in an input schema (jsonschema recurses)."""
_DRAFT_2020_URI = "https://json-schema.org/draft/2020-12/schema"


def _check_schema(schema: Any, tool: str, server: str | None) -> dict[str, Any]:
    if not isinstance(schema, Mapping):
        raise ToolCatalogError(
            "invalid_schema", tool=tool, server=server, detail="the input schema is not an object"
        )
    if schema.get("type") != "object":
        raise ToolCatalogError(
            "invalid_schema",
            tool=tool,
            server=server,
            detail=f'the input schema\'s type must be "object", not {schema.get("type")!r}',
        )
    try:
        from jsonschema.exceptions import SchemaError
        from jsonschema.validators import validator_for
    except ImportError as e:  # pragma: no cover - a core dependency
        raise MissingDependencyError("jsonschema", "", "checking tool schemas") from e
    body = dict(schema)

    def refuse(detail: str) -> ToolCatalogError:
        return ToolCatalogError("invalid_schema", tool=tool, server=server, detail=detail)

    if json_depth(body, _MAX_NESTING) > _MAX_NESTING:
        raise refuse(f"nested more than {_MAX_NESTING} levels deep")
    cls: Any = validator_for(body, default=cast(Any, None))  # None: an unknown $schema
    if cls is None:
        if "$schema" in body:
            raise refuse(f"unknown $schema {body['$schema']!r}")
        cls = _draft_2020()
        body = _draft4_bounds(body)
    try:
        cls.check_schema(body)
    except SchemaError as e:
        where = "/".join(str(p) for p in e.path) or "the root"
        raise refuse(f"not valid JSON Schema at {where}: {e.message}") from None
    except RecursionError:  # pragma: no cover - bounded by _MAX_NESTING
        raise refuse("nested too deeply") from None
    dangling = _dangling_ref(body, cls)
    if dangling is not None:
        raise refuse(dangling)
    return body


def _dangling_ref(body: dict[str, Any], cls: Any) -> str | None:
    """What is wrong with the first ``$ref`` of ``body`` that does not resolve, or
    ``None`` when every one does.

    References resolve with jsonschema's own ``referencing`` registry: the schema
    itself and the known metaschemas, nothing fetched from the network (a remote
    ``$ref`` is dangling here). Only real subschemas of ``cls``'s draft are
    walked, so a ``"$ref"`` key inside ``enum`` or ``default`` data is not one.
    """
    from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped, unused-ignore]
    from referencing.exceptions import NoSuchAnchor, PointerToNowhere, Unresolvable
    from referencing.jsonschema import specification_with

    spec = specification_with(
        cls.META_SCHEMA.get("$schema", ""), default=specification_with(_DRAFT_2020_URI)
    )
    root = spec.create_resource(body)
    stack = [(root, REGISTRY.resolver_with_root(root))]
    while stack:
        resource, resolver = stack.pop()
        resolver = resolver.in_subresource(resource)
        contents = resource.contents
        ref = contents.get("$ref") if isinstance(contents, Mapping) else None
        if isinstance(ref, str):
            try:
                resolver.lookup(ref)
            except (PointerToNowhere, NoSuchAnchor):
                return f"$ref {ref!r} points to nothing in the schema"
            except Unresolvable:
                return f"$ref {ref!r} names a schema that is not here (none is fetched)"
        stack.extend((sub, resolver) for sub in resource.subresources())
    return None


_SUBSCHEMA = frozenset(
    {
        "additionalItems",
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
"""Keywords whose value is one subschema (in any draft)."""
_SUBSCHEMA_LISTS = frozenset({"allOf", "anyOf", "items", "oneOf", "prefixItems"})
"""Keywords whose value is a list of subschemas (``items`` as draft 4 to 2019-09 allow)."""
_SUBSCHEMA_MAPS = frozenset(
    {"$defs", "definitions", "dependencies", "dependentSchemas", "patternProperties", "properties"}
)
"""Keywords whose value maps names to subschemas (a name is never read as a keyword)."""
_DRAFT4_BOUNDS = (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum"))


def _draft4_bounds(schema: Any) -> Any:
    """``schema`` (a subschema of one that names no ``$schema``) with draft 4's
    boolean ``exclusiveMinimum`` / ``exclusiveMaximum`` read as draft 4 reads them
    and written in the 2020-12 form the providers take: ``{"minimum": 0,
    "exclusiveMinimum": true}`` (more than 0) becomes ``{"exclusiveMinimum": 0}``,
    and ``false`` (the bound is inclusive) is dropped. A boolean with no numeric
    ``minimum`` / ``maximum`` beside it is left for the check to refuse, as draft 4's
    metaschema does. Only subschemas are walked, never data such as ``enum`` or
    ``default``; a schema without the boolean form comes back equal to itself."""
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SUBSCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {name: _draft4_bounds(sub) for name, sub in value.items()}
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            out[key] = [_draft4_bounds(sub) for sub in value]
        elif key in _SUBSCHEMA:
            out[key] = _draft4_bounds(value)
        else:
            out[key] = value
    for flag, limit in _DRAFT4_BOUNDS:
        exclusive, bound = out.get(flag), out.get(limit)
        if not isinstance(exclusive, bool):
            continue
        if isinstance(bound, bool) or not isinstance(bound, int | float):
            continue
        if exclusive:  # the bound moves to the flag's place; the inclusive one goes
            out = {flag if k == flag else k: bound if k == flag else v for k, v in out.items()}
            del out[limit]
        else:
            del out[flag]
    return out


def _draft_2020() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator


def _check_text(value: Any, what: str, tool: str, server: str | None) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ToolCatalogError(
            "bad_definition", tool=tool, server=server, detail=f"{what} must be a string"
        )
    return value
