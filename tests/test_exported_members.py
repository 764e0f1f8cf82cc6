"""Every public name is exported, and __all__ is sorted and complete."""

from __future__ import annotations

import ctxwise


def test_all_is_sorted_and_unique() -> None:
    assert list(ctxwise.__all__) == sorted(set(ctxwise.__all__))


def test_all_names_exist() -> None:
    for name in ctxwise.__all__:
        assert hasattr(ctxwise, name), name


def test_public_members_are_exported() -> None:
    exported = set(ctxwise.__all__)
    public = {
        name
        for name, value in vars(ctxwise).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("ctxwise")
    }
    assert public <= exported, public - exported
