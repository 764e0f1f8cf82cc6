"""Engine configs the project was not built on: each bad one is a ConfigError
naming the key, from a file and from code alike, before anything is opened."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxwise import EngineConfig
from ctxwise.config import SourceConfig, load_config
from ctxwise.errors import ConfigError


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_priority_that_is_not_finite_is_refused_by_key(tmp_path: Path, value: str) -> None:
    path = tmp_path / "ctxwise.toml"
    path.write_text(f'store = "memory"\n[sources.faq]\ntext = "x"\npriority = {value}\n')
    with pytest.raises(ConfigError, match=r"sources\.faq\.priority: .*finite"):
        load_config(path)
    with pytest.raises(ConfigError, match=r"SourceConfig: priority: .*finite"):
        SourceConfig(text="x", priority=float(value))
    with pytest.raises(ConfigError, match=r"sources\.faq\.priority"):
        EngineConfig(sources={"faq": {"text": "x", "priority": float(value)}})
