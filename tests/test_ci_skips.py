"""With CI=true every kind of skip these tests use fails, naming what was missing."""

from __future__ import annotations

import re

import pytest

from tests import _ci_skips

pytest_plugins = ["pytester"]

SUITE = {
    "test_kinds": """
        import pytest

        def test_body():
            pytest.skip("no PostgreSQL: set CTXWISE_PG_DSN")

        def test_extra():
            pytest.importorskip("ctxwise_no_such_module", reason="needs the postgres extra")

        @pytest.mark.skipif(True, reason="needs the ann extra (usearch)")
        def test_marker():
            pass

        @pytest.fixture
        def data_dir():
            pytest.skip("shared data not found at ../shared/data")

        def test_fixture(data_dir):
            pass

        def test_platform():
            pytest.skip("no /dev/stdout")

        @pytest.mark.xfail(reason="a known bug", strict=True)
        def test_xfail():
            assert False

        def test_passes():
            pass
    """,
    "test_module_level": """
        import pytest

        pytest.importorskip("ctxwise_no_such_module", reason="needs the lexical extra")

        def test_never_collected():
            pass
    """,
}


def run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str, *files: str
) -> pytest.RunResult:
    monkeypatch.setenv("CI", ci)
    pytester.makepyfile(**{name: SUITE[name] for name in files or SUITE})
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rA", plugins=[_ci_skips])


def test_without_ci_skips_stay_skips(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(pytester, monkeypatch, "")
    result.assert_outcomes(passed=1, skipped=6, xfailed=1)
    assert result.ret == pytest.ExitCode.OK


def test_with_ci_every_skip_fails_and_says_why(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(pytester, monkeypatch, "true", "test_kinds")
    # skips in the body fail the call; a skipif marker or a skipping fixture fails the
    # setup (an error); the allowed platform skip and the xfail stay what they are.
    result.assert_outcomes(passed=1, failed=2, errors=2, skipped=1, xfailed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    for reason in (
        "no PostgreSQL: set CTXWISE_PG_DSN",
        "needs the postgres extra",
        "needs the ann extra (usearch)",
        "shared data not found at ../shared/data",
    ):
        # in the short summary too, so a CI log's last screen names what was missing
        result.stdout.re_match_lines(
            [rf"(FAILED|ERROR) \S+ - Failed: CI=true, so this skip fails: {re.escape(reason)} "]
        )
    result.stdout.fnmatch_lines(["SKIPPED*no /dev/stdout"])


def test_with_ci_a_module_level_skip_fails_collection(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(pytester, monkeypatch, "true", "test_module_level")
    result.assert_outcomes(errors=1)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["ERROR test_module_level.py - CI=true, so this skip fails: needs the lexical extra*"]
    )


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("1", True), ("", False)])
def test_ci_reads_the_environment_at_run_time(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: bool
) -> None:
    monkeypatch.setenv("CI", value)
    assert _ci_skips.ci() is expected


def test_allowed_skips_say_why() -> None:
    assert all(why.strip() for why in _ci_skips.ALLOWED.values())
