"""The assembly spec file: sections and a budget, as YAML or JSON.

Schema (unknown keys and a key given twice are errors, so a typo never passes
silently)::

    budget: 4000            # required unless given on the command line; > 0
    reserve: 0              # tokens of the budget kept free (optional)
    counter: char           # char | word | tiktoken (optional; default char)
    order: given            # given | recall (optional)
    sections:
      - name: system        # unique, required
        content: "..."      # the text; or `file: path` relative to the spec
        priority: 100       # higher wins (default 0)
        pinned: true        # always kept (default false)
        truncatable: false  # may be cut on a word boundary (default false)
        stable: true        # same every turn: goes in the cached prefix (default false)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ctxwise._io import parse_json, read_text_file
from ctxwise.assembly import Budget, Section
from ctxwise.errors import SpecError

__all__ = ["AssemblySpec", "SectionSpec", "load_spec"]


class SectionSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    content: str | None = None
    file: str | None = None
    # finite: a NaN or infinite priority cannot be ranked (Section refuses it)
    priority: float = Field(default=0, allow_inf_nan=False)
    pinned: bool = False
    truncatable: bool = False
    stable: bool = False

    @model_validator(mode="after")
    def _one_content(self) -> SectionSpec:
        if (self.content is None) == (self.file is None):
            raise ValueError("give exactly one of 'content' or 'file'")
        return self


class AssemblySpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    budget: int | None = Field(default=None, gt=0, strict=True)
    reserve: int = Field(default=0, ge=0, strict=True)
    counter: Literal["char", "word", "tiktoken"] = "char"
    order: Literal["given", "recall"] = "given"
    sections: list[SectionSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> AssemblySpec:
        names = [s.name for s in self.sections]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate section names: {', '.join(dupes)}")
        return self

    def to_sections(self, base: Path, source: str | None = None) -> list[Section]:
        """The sections, a ``file`` read relative to ``base``; an error names
        ``source`` (the spec file), else ``base``."""
        out = []
        for s in self.sections:
            if s.file is not None:
                content = _read_section_file(base, s.name, s.file, source or str(base))
            else:
                assert s.content is not None
                content = s.content
            out.append(Section(s.name, content, s.priority, s.pinned, s.truncatable, s.stable))
        return out

    def to_budget(self, override: int | None = None) -> Budget:
        tokens = override if override is not None else self.budget
        if tokens is None:
            raise SpecError("spec", "no budget: set 'budget' in the spec or pass --budget")
        return Budget(tokens, self.reserve)


def _read_section_file(base: Path, name: str, file: str, spec: str) -> str:
    def error(source: str, detail: str) -> SpecError:
        return SpecError(spec, f"section {name!r}: {file}: {detail}")

    return read_text_file(base / file, "a text file", error)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "spec"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {err['msg']}{more}"


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps
    the last silently, so a second ``budget:`` replaced the first)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # << merges may override: that is what they are for
            key = self.construct_object(key_node, deep=deep)
            try:
                twice = key in seen
                seen.add(key)
            except TypeError:  # unhashable: the base constructor says so
                continue
            if twice:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
        return super().construct_mapping(node, deep=deep)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


# a spec is a few kilobytes (its sections' text lives in their files): a larger
# file is a mistake, and parsing YAML that size would take minutes
MAX_SPEC_BYTES = 16 * 2**20


def load_spec(path: str | Path) -> tuple[AssemblySpec, list[Section]]:
    """Read and validate a spec file; sections come back with file contents loaded.
    The spec and every section file must be regular files (a FIFO or a device such
    as ``/dev/urandom`` is refused before it is read, with :class:`SpecError`); the
    spec itself holds at most ``MAX_SPEC_BYTES`` (16 MiB)."""
    p = Path(path)
    text = read_text_file(p, "a YAML or JSON spec", SpecError, max_bytes=MAX_SPEC_BYTES)
    data: Any
    try:
        if p.suffix == ".json":
            data = parse_json(text, object_pairs_hook=_unique_keys)
        else:
            data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader
    except json.JSONDecodeError as exc:
        raise SpecError(str(p), f"invalid JSON at line {exc.lineno}: {exc.msg}") from None
    except RecursionError:
        raise SpecError(str(p), "nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise SpecError(
            str(p), f"invalid YAML{at}: {getattr(exc, 'problem', None) or exc}"
        ) from None
    except ValueError as exc:  # a duplicate JSON key, an int past int()'s digits
        raise SpecError(
            str(p), f"invalid {'JSON' if p.suffix == '.json' else 'YAML'}: {exc}"
        ) from None
    if not isinstance(data, dict):
        raise SpecError(str(p), "a spec is a mapping with 'sections' (and 'budget')")
    try:
        spec = AssemblySpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(str(p), _first_error(exc)) from None
    return spec, spec.to_sections(p.parent, str(p))
