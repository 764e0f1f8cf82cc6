"""The web inspector in a real browser (issue 32, item 4): Debian's headless Chromium,
driven by Selenium through Debian's chromedriver (nothing is downloaded), over a
Claude Code session from the shared data replayed into a SQLite store at a budget
that clears and compacts, served by uvicorn on a loopback port.

It checks what a person sees: the pages render, the bars add up to the trace's
totals (read back from the page and from the store), the ledger's filters hide and
show rows, "open the original" shows the log's text, the diff names what changed,
and no page scrolls sideways at 1280 or 400 pixels; behind ``ctxwise serve``, the
login form takes a key into a cookie no script can read, and logging out drops it.
It saves two screenshots (a turn, the timeline) in the test's tmp folder, and in
``$CTXWISE_ARTIFACTS`` when that names a folder. Without chromium, chromedriver or
selenium it skips, which fails under ``CI=true`` (tests/_ci_skips.py): CI installs
them (.ci/run).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ctxwise import EngineConfig
from ctxwise.cli._store import read_only_memory
from ctxwise.formats import read_transcript
from ctxwise.ledger import LedgerReader
from ctxwise.replay import replay
from ctxwise.server.inspect import StoreSource, local_app
from ctxwise.sessions import open_session_store

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def store(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("browser") / "store.db"
    t = read_transcript(data_dir / "transcripts" / "claude_code" / "subagent.jsonl", "claude-code")
    config = EngineConfig(store=f"sqlite:///{path}", costs={"gate": False})
    replay(t, budget=20_000, config=config, session_id="cc", repair=True, cost=True)
    return path


@pytest.fixture(scope="module")
def reader(store: Path) -> Iterator[LedgerReader]:
    sessions = open_session_store(f"sqlite:///{store}")
    try:
        yield LedgerReader.of_store(
            sessions, "cc", memory=read_only_memory(f"sqlite:///{store}", EngineConfig())[0]
        )
    finally:
        sessions.close()


@contextmanager
def _serve(app: Any) -> Iterator[str]:
    """``app`` on uvicorn on a free loopback port, in a thread; its base URL."""
    import uvicorn

    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


@pytest.fixture(scope="module")
def base_url(store: Path) -> Iterator[str]:
    url = f"sqlite:///{store}"
    with _serve(
        local_app(StoreSource(open_session_store(url), read_only_memory(url, EngineConfig())[0]))
    ) as base:
        yield base


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not CHROMIUM.is_file() or not CHROMEDRIVER.is_file():
        pytest.skip(
            f"needs Debian's chromium and chromium-driver ({CHROMIUM}, {CHROMEDRIVER}): "
            "apt-get install -y chromium chromium-driver"
        )
    webdriver = pytest.importorskip("selenium.webdriver", reason="needs selenium (dev extra)")
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager never downloads anything
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    profile = tmp_path_factory.mktemp("chromium-profile")
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def _width(driver: Any, width: int) -> None:
    driver.set_window_size(width, 900)
    inner = driver.execute_script("return window.innerWidth")
    assert abs(inner - width) <= 20, f"the window is {inner} px wide, asked for {width}"


def _no_sideways_scroll(driver: Any, where: str) -> None:
    for width in (1280, 400):
        _width(driver, width)
        scroll, client = driver.execute_script(
            "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        assert scroll <= client, f"{where} scrolls sideways at {width} px: {scroll} > {client}"
    _width(driver, 1280)


def _save(driver: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 1000 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    folder = os.environ.get("CTXWISE_ARTIFACTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(folder) / name)
    return path


def _go(driver: Any, element: Any) -> None:
    """Click ``element`` and wait for the page it leads to (a click returns before
    the next page has loaded, and the old page's elements would still be found)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    old = driver.find_element(By.TAG_NAME, "html")
    element.click()
    WebDriverWait(driver, 30).until(expected_conditions.staleness_of(old))
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )


def _visible(driver: Any) -> list[Any]:
    rows = driver.find_elements("css selector", "#ledger-table tbody tr")
    return [r for r in rows if r.is_displayed()]


def test_the_timeline(browser: Any, base_url: str, reader: LedgerReader, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    _width(browser, 1280)
    browser.get(f"{base_url}/")  # redirects to /inspect/
    assert browser.find_element(By.ID, "sessions").text.strip() == "cc"
    _go(browser, browser.find_element(By.LINK_TEXT, "cc"))
    assert "Session cc" in browser.find_element(By.TAG_NAME, "h1").text
    svg = browser.find_element(By.CSS_SELECTOR, "#timeline svg")
    assert int(svg.get_attribute("data-turns")) == reader.turns
    sent = {
        int(r.get_attribute("data-turn")): int(r.get_attribute("data-sent"))
        for r in svg.find_elements(By.CSS_SELECTOR, "rect.sent")
    }
    assert sent == {t.turn: t.tokens.total for t in reader.traces}
    # the markers: one per turn that cleared or compacted, at that turn
    cleared = {
        int(m.get_attribute("data-turn")) for m in svg.find_elements(By.CSS_SELECTOR, ".mark-clear")
    }
    compacted = {
        int(m.get_attribute("data-turn"))
        for m in svg.find_elements(By.CSS_SELECTOR, ".mark-compact")
    }
    assert cleared == {t.turn for t in reader.traces if t.cleared is not None} != set()
    assert compacted == {t.turn for t in reader.traces if t.compacted is not None} != set()
    # the full history is the ledger's: every message's tokens before its fate
    for row in browser.find_elements(By.CSS_SELECTOR, "#turns tbody tr"):
        turn = int(row.get_attribute("data-turn"))
        full = sum(e.tokens_before for e in reader.ledger(turn).messages)
        assert int(row.get_attribute("data-full")) == full
    _no_sideways_scroll(browser, "the timeline")
    _save(browser, tmp_path, "inspector-timeline.png")


def test_a_turn(browser: Any, base_url: str, reader: LedgerReader, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    # the latest turn: a summary, recalled memory, tool results, rules
    turn = reader.turns
    trace = reader.trace(turn)
    ledger = reader.ledger(turn)
    _width(browser, 1280)
    browser.get(f"{base_url}/inspect/turn?session=cc&turn={turn}")
    tokens = browser.find_element(By.ID, "tokens")
    assert int(tokens.get_attribute("data-total")) == trace.tokens.total
    assert int(tokens.get_attribute("data-available")) == trace.tokens.available
    rects = browser.find_elements(By.CSS_SELECTOR, "#tokens svg rect.part")
    drawn = {r.get_attribute("data-part"): int(r.get_attribute("data-tokens")) for r in rects}
    assert sum(drawn.values()) == trace.tokens.total
    assert {"summary", "memory", "rules"} <= set(drawn)
    legend = {
        li.get_attribute("data-part"): int(li.get_attribute("data-tokens"))
        for li in browser.find_elements(By.CSS_SELECTOR, "#parts li[data-part]")
    }
    assert sum(legend.values()) == trace.tokens.total
    # and as drawn: the bars' widths add up to the total's share of the scale
    bar = browser.find_element(By.CSS_SELECTOR, "#tokens svg.bar")
    widths = sum(r.rect["width"] for r in rects)
    scale = max(trace.tokens.available, trace.tokens.total)
    assert abs(widths - bar.rect["width"] * trace.tokens.total / scale) <= 2
    # the route and its scores
    assert browser.find_element(By.ID, "route").text.startswith("Route")
    _save(browser, tmp_path, "inspector-turn.png")

    # filters: by fate, by tool, by text
    rows = browser.find_elements(By.CSS_SELECTOR, "#ledger-table tbody tr")
    assert len(rows) == len(ledger.entries)
    counts = ledger.counts()
    fate = Select(browser.find_element(By.ID, "filter-fate"))
    fate.select_by_value("summarized")
    shown = _visible(browser)
    assert len(shown) == counts["summarized"] > 0
    assert {r.get_attribute("data-fate") for r in shown} == {"summarized"}
    fate.select_by_value("")
    assert len(_visible(browser)) == len(ledger.entries)
    tool = Select(browser.find_element(By.ID, "filter-tool"))
    tool.select_by_value("Bash")
    with_bash = [e for e in ledger.entries if "Bash" in e.tools]
    assert len(_visible(browser)) == len(with_bash) > 0
    tool.select_by_value("")
    text = browser.find_element(By.ID, "filter-text")
    text.send_keys("recalled from memory")
    recalled = [e for e in ledger.entries if e.fate == "recalled"]
    assert len(_visible(browser)) == len(recalled) > 0
    text.clear()
    text.send_keys("x")  # input event, then back to every row
    text.send_keys("\b")
    assert len(_visible(browser)) == len(ledger.entries)
    _no_sideways_scroll(browser, "a turn")

    # open the original of a summarized message: the log's text, archived
    fate.select_by_value("summarized")
    link = _visible(browser)[0].find_element(By.CSS_SELECTOR, "a.open")
    pointer = link.text
    _go(browser, link)
    shown_text = browser.find_element(By.ID, "original").text
    original = reader.original(pointer)
    assert original.gone is None and original.text
    assert " ".join(shown_text.split()) == " ".join(original.text.split())
    _no_sideways_scroll(browser, "an original")


def test_the_diff(browser: Any, base_url: str, reader: LedgerReader) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    compacted = next(t.turn for t in reader.traces if t.compacted is not None)
    diff = reader.diff(compacted - 1, compacted)
    _width(browser, 1280)
    browser.get(f"{base_url}/inspect/turn?session=cc&turn={compacted}")
    _go(browser, browser.find_element(By.PARTIAL_LINK_TEXT, "diff from"))
    assert browser.find_element(By.TAG_NAME, "h1").text == (
        f"Diff: turn {compacted - 1} → turn {compacted}"
    )
    assert browser.find_element(By.ID, "left-count").text == f"{len(diff.left)} message(s) left it"
    assert browser.find_element(By.ID, "entered-count").text.startswith(f"{len(diff.entered)} ")
    left = [
        int(r.get_attribute("data-position"))
        for r in browser.find_elements(By.CSS_SELECTOR, "#left tbody tr")
    ]
    assert left == list(diff.left) and left
    first = browser.find_element(By.ID, "first-change").text
    assert (
        "only appended" in first if diff.first_change is None else str(diff.first_change) in first
    )
    # any two turns, from the form
    Select(browser.find_element(By.ID, "diff-before")).select_by_value("1")
    _go(browser, browser.find_element(By.CSS_SELECTOR, "form.filters button"))
    assert browser.find_element(By.TAG_NAME, "h1").text == f"Diff: turn 1 → turn {compacted}"
    other = reader.diff(1, compacted)
    assert browser.find_element(By.ID, "left-count").text == f"{len(other.left)} message(s) left it"
    _no_sideways_scroll(browser, "the diff")


def test_bad_input_in_the_browser(browser: Any, base_url: str) -> None:
    from selenium.webdriver.common.by import By

    browser.get(f"{base_url}/inspect/turn?session=cc&turn=999")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Not found"
    assert "no turn" in browser.find_element(By.ID, "error-message").text or "999" in (
        browser.find_element(By.ID, "error-message").text
    )
    browser.get(f"{base_url}/inspect/original?session=cc&pointer=log:100000")
    assert browser.find_element(By.ID, "gone").text.startswith("Gone:")


def test_logging_in_behind_the_service(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    from ctxwise.server.app import create_app
    from ctxwise.server.keys import KeyStore
    from ctxwise.server.settings import ServeSettings

    store = f"sqlite:///{tmp_path}/svc.db"
    with KeyStore(store) as keys:
        _, key = keys.create("browsing", "a")
        with _serve(create_app(ServeSettings(store=store), keys=keys)) as base:
            import httpx

            r = httpx.post(
                f"{base}/v1/sessions/seen/turns",
                json={"messages": ["hello from the browser test"]},
                headers={"x-ctxwise-key": key},
            )
            assert r.status_code == 200, r.text
            browser.delete_all_cookies()
            browser.get(f"{base}/inspect/")
            assert browser.current_url == f"{base}/inspect/login"
            browser.find_element(By.ID, "key").send_keys("cwk_not_a_key")
            _go(browser, browser.find_element(By.CSS_SELECTOR, "form.login button"))
            assert "not valid" in browser.find_element(By.ID, "error-message").text
            browser.find_element(By.ID, "key").send_keys(key)
            _go(browser, browser.find_element(By.CSS_SELECTOR, "form.login button"))
            assert browser.find_element(By.ID, "sessions").text.strip() == "seen"
            # the key is in a cookie no script can read
            assert browser.execute_script("return document.cookie") == ""
            (cookie,) = browser.get_cookies()
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
            assert cookie["path"] == "/inspect"
            _go(browser, browser.find_element(By.LINK_TEXT, "log out"))
            assert browser.current_url == f"{base}/inspect/login"
            assert browser.get_cookies() == []
