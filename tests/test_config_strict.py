"""EngineConfig built in code raises ConfigError like a file does, and no value is
coerced: ``true`` is not 1, ``"100"`` is not 100, ``"off"`` is not false."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxwise.config import (
    ClearingConfig,
    EngineConfig,
    MemoryConfig,
    RouterConfig,
    TrimConfig,
    config_from_dict,
    load_config,
)
from ctxwise.errors import ConfigError, CtxwiseError


@pytest.mark.parametrize(
    ("kwargs", "where"),
    [
        ({"budget": 0}, "budget"),
        ({"budget": True}, "budget"),
        ({"budget": "100"}, "budget"),
        ({"clearing": {"enabled": "off"}}, "clearing.enabled"),
        ({"memory": {"k": 2.0}}, "memory.k"),
        ({"reserve": 10, "budget": 10}, "reserve"),
    ],
)
def test_direct_construction_is_a_config_error_naming_the_key(
    kwargs: dict[str, Any], where: str
) -> None:
    with pytest.raises(ConfigError, match=f"EngineConfig: .*{where}"):
        EngineConfig(**kwargs)
    with pytest.raises(ConfigError, match=f"EngineConfig: .*{where}"):
        EngineConfig.model_validate(kwargs)
    with pytest.raises(ConfigError, match=f"^here: .*{where}"):
        config_from_dict(kwargs, source="here")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ClearingConfig(trigger=2), "ClearingConfig: trigger: "),
        (lambda: MemoryConfig(k=0), "MemoryConfig: k: "),
        (lambda: TrimConfig(max_items=-1), "TrimConfig: max_items: "),
        (lambda: MemoryConfig(bogus=1), "MemoryConfig: bogus: unknown key"),
        (lambda: RouterConfig(), "RouterConfig: give exactly one of 'file' or 'keywords'"),
    ],
)
def test_a_section_built_on_its_own_is_a_config_error_too(build: Any, message: str) -> None:
    with pytest.raises(CtxwiseError) as caught:
        build()
    assert isinstance(caught.value, ConfigError)
    assert str(caught.value).startswith(message)


def test_inside_an_engine_config_a_section_error_keeps_the_whole_key_path() -> None:
    with pytest.raises(ConfigError, match=r"^EngineConfig: clearing\.trigger: "):
        EngineConfig(clearing={"trigger": 2})
    with pytest.raises(ConfigError, match=r"^EngineConfig: tool_results\.trim\.x\.max_items: "):
        EngineConfig(tool_results={"trim": {"x": {"max_items": -1}}})
    with pytest.raises(ConfigError, match=r"^EngineConfig: router: give exactly one"):
        EngineConfig(router={"file": "a.json", "keywords": {"a": ["x"]}})
    # a section already built is checked when it is built, under its own name
    with pytest.raises(ConfigError, match=r"^ClearingConfig: trigger: "):
        EngineConfig(clearing=ClearingConfig(trigger=2))
    # and a good one still nests after a bad one failed
    assert EngineConfig(clearing=ClearingConfig(trigger=0.5)).clearing.trigger == 0.5


@pytest.mark.parametrize(
    ("toml", "where"),
    [
        ("budget = true\n", "budget"),
        ('budget = "100"\n', "budget"),
        ('[clearing]\nenabled = "off"\n', "clearing.enabled"),
        ("[facts]\nrules = 1\n", "facts.rules"),
        ("[clearing]\ntrigger = true\n", "clearing.trigger"),
    ],
)
def test_a_file_value_of_the_wrong_type_is_not_coerced(
    tmp_path: Path, toml: str, where: str
) -> None:
    path = tmp_path / "ctxwise.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=where) as caught:
        load_config(path)
    assert str(path) in str(caught.value)


def test_ints_are_still_floats_and_sections_still_nest() -> None:
    cfg = EngineConfig(clearing=ClearingConfig(trigger=1), context_share=0)
    assert cfg.clearing.trigger == 1.0 and cfg.context_share == 0.0
    nested = EngineConfig.model_validate({"clearing": {"trigger": 1, "keep_last": 0}})
    assert nested.clearing.keep_last == 0
    assert EngineConfig.model_validate(nested.model_dump()) == nested
