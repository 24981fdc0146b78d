"""The console's recorded-session pages in a real browser (Debian's Chromium under Playwright).

Sessions are recorded by real runs (scripted model, subprocess sandbox, SQLite store); the console's
routes are served by uvicorn on a free port. One server and one browser for the module.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.console._support import (
    HOSTILE,
    TOKEN,
    browser,
    in_thread,
    record_child,
    recorded_replies,
    run_agent,
    screenshot,
    serve_console,
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    folder = tmp_path_factory.mktemp("console")
    url = f"sqlite:///{folder / 'sessions.db'}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CODEACT_HOME", str(folder / "home"))
        for name in ("CODEACT_MODEL", "CODEACT_STORE", "CODEACT_PROFILE"):
            mp.delenv(name, raising=False)
        for ask, reply in (  # a conversation: two user messages in one session, the oldest session
            (
                "Which shelves do we have?",
                "Thought: Listing the shelves.\n```python\nshelves = ['A', 'B']\nsystem.finish(shelves)\n```",
            ),
            ("And which one is <b>empty</b>?", "```python\nprint(shelves)\n```\n"),
        ):
            turn = run_agent(url, folder, [reply, '```python\nsystem.finish("B")\n```'], blueprint="audit",
                             session_id="conv-1", input=ask)  # fmt: skip
            assert turn.status == "completed", turn
        main = run_agent(url, folder, recorded_replies(), session_id="shop-run-1")
        assert main.status == "completed", main
        other = run_agent(url, folder, ['```python\nsystem.finish("none")\n```'], blueprint="audit")
        in_thread(lambda: asyncio.run(record_child(url, main.session_id)))
        asked = run_agent(
            url, folder, ['I need to know the shelf.\n```python\nsystem.ask_user("Which shelf: <A> or B?")\n```'],
            blueprint="audit", session_id="asks-1",
        )  # fmt: skip
        assert asked.status == "paused", asked
        yield url, main.session_id, other.session_id


@pytest.fixture(scope="module")
def base(recorded: tuple[str, str, str]) -> Iterator[str]:
    with serve_console(recorded[0]) as url:
        yield url


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with browser() as b:
        yield b


@pytest.fixture
def page(chromium: Any, base: str) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1366, "height": 800})
    context.set_default_timeout(8000)
    p = context.new_page()
    p.goto(f"{base}/?token={TOKEN}")
    yield p
    context.close()


def test_a_token_link_becomes_an_http_only_cookie_and_leaves_the_address(chromium: Any, base: str) -> None:
    context = chromium.new_context()
    p = context.new_page()
    p.goto(f"{base}/?token={TOKEN}&status=completed")
    assert p.url == f"{base}/?status=completed"
    cookie = next(c for c in context.cookies() if c["name"] == "codeact_token")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert p.evaluate("document.cookie") == ""  # not readable from scripts
    assert TOKEN not in p.content()
    context.close()


def test_without_a_token_the_login_form_lets_one_in(chromium: Any, base: str, recorded: tuple[str, str, str]) -> None:
    context = chromium.new_context()
    p = context.new_page()
    response = p.goto(f"{base}/sessions/{recorded[1]}")
    assert response is not None and response.status == 401
    p.get_by_label("API token").fill("wrong")
    p.keyboard.press("Enter")
    assert "not valid" in p.locator("[role=alert]").inner_text()
    p.get_by_label("API token").fill(TOKEN)
    p.get_by_role("button", name="Log in").click()
    p.wait_for_url(f"{base}/sessions/{recorded[1]}")
    assert p.locator("h1").inner_text() == recorded[1]
    screenshot_login = context.new_page()
    screenshot_login.goto(f"{base}/login")
    screenshot(screenshot_login, "login.png")
    context.close()


def test_the_sessions_list_shows_newest_first_and_filters(page: Any, base: str, recorded: tuple[str, str, str]) -> None:
    _, main, other = recorded
    rows = page.locator("table.sessions tbody tr")
    assert rows.count() == 5
    assert rows.nth(0).locator("td").first.inner_text() == "asks-1"  # started last
    assert rows.nth(1).locator("td").first.inner_text() == f"{main}.analyst.1"
    assert rows.nth(2).locator("td").first.inner_text() == other
    assert rows.nth(1).locator("td").nth(8).inner_text() == "321"
    first = [c.inner_text() for c in rows.nth(3).locator("td").all()]
    assert first[0] == main and first[2] == "shop" and first[4] == "completed" and first[5] == "4"
    assert first[1] == "How many A-1 are in stock?"  # the title: the first user message
    assert first[3].startswith("scripted/")
    assert int(first[8]) > 0  # tokens summed over the rounds' model calls
    conversation = [c.inner_text() for c in rows.nth(4).locator("td").all()]
    assert conversation[:3] == ["conv-1", "Which shelves do we have?", "audit"]
    screenshot(page, "sessions.png")
    page.select_option("#f-blueprint", "shop")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r"[?&]blueprint=shop"))  # count() does not wait for the new page
    assert page.locator("table.sessions tbody tr").count() == 1
    page.goto(f"{base}/?status=paused")
    assert [r.locator("td").first.inner_text() for r in page.locator("table.sessions tbody tr").all()] == ["asks-1"]
    page.goto(f"{base}/?status=failed")
    assert page.locator("table.sessions").count() == 0
    assert "No sessions match" in page.inner_text("main")


def test_a_recorded_session_shows_its_rounds_calls_error_line_and_artifact(
    page: Any, recorded: tuple[str, str, str]
) -> None:
    page.get_by_role("link", name=recorded[1], exact=True).click()
    page.wait_for_url(re.compile(f"/sessions/{re.escape(recorded[1])}$"))  # count() does not wait for the page
    rounds = page.locator("#rounds article.round")
    assert rounds.count() == 4
    first = rounds.nth(0)
    assert "I look the stock up first" in first.locator(".thought").inner_text()
    assert "def units(sku):" in first.locator("pre.src").inner_text()
    call = first.locator("li.call")
    assert call.locator("code.op").inner_text() == "inventory.stock"
    assert '"A-1"' in call.locator("dl.args").inner_text()
    assert call.locator(".call-result pre").inner_text() == "3"
    assert "A-1: 3 units" in first.locator(".stdout").inner_text()
    assert re.search(r"n\s+added", first.locator(".variables").inner_text())
    broken = rounds.nth(1)
    assert "ZeroDivisionError" in broken.locator(".round-error").inner_text()
    error_line = broken.locator(".err-line")
    assert error_line.count() == 1 and "ratio = n / shelves" in error_line.inner_text()
    screenshot(page, "session.png")
    page.get_by_role("link", name=f"{recorded[1]}.analyst.1", exact=True).click()  # the sub-agent's session
    page.wait_for_url(re.compile(f"/sessions/{re.escape(recorded[1])}\\.analyst\\.1$"))
    image = page.locator("#round-1 .artifacts img")
    assert image.get_attribute("alt") == "figure-1.png"
    assert image.evaluate("img => img.complete && img.naturalWidth") == 48
    assert page.locator("#round-1 .artifacts a[download]", has_text="stock.csv").count() == 1
    assert page.locator("a.parent").inner_text() == recorded[1]
    page.evaluate("window.scrollTo(0, 300)")
    screenshot(page, "session-artifact.png")


def test_a_conversation_shows_each_user_message_before_the_rounds_it_started(page: Any, base: str) -> None:
    page.goto(f"{base}/sessions/conv-1")
    rounds = page.locator("#rounds article.round")
    assert rounds.count() == 3
    assert [m.inner_text() for m in rounds.nth(0).locator(".user-message pre").all()] == ["Which shelves do we have?"]
    assert rounds.nth(1).locator(".user-message").count() == 1
    second = rounds.nth(1).locator(".user-message pre").inner_text()
    assert second == "And which one is <b>empty</b>?"  # text, not markup
    assert rounds.nth(2).locator(".user-message").count() == 0  # the second message's second round
    assert "['A', 'B']" in rounds.nth(1).locator(".stdout").inner_text()  # its first round used the first's variable
    assert page.locator("main b").count() == 0


def test_a_hostile_variable_renders_as_text(page: Any, recorded: tuple[str, str, str]) -> None:
    page.goto(page.url.split("?")[0].rstrip("/") + f"/sessions/{recorded[1]}")
    third = page.locator("#round-3")
    assert HOSTILE in third.locator(".stdout pre").inner_text()
    assert "<script>" in third.locator(".variables").inner_text()
    assert page.evaluate("window.__pwned === undefined")
    assert page.locator("#round-3 script, #round-3 img[src=x]").count() == 0


def test_a_question_the_agent_asked_shows_on_its_paused_session(page: Any, base: str) -> None:
    page.goto(f"{base}/sessions/asks-1")
    assert page.locator(".question pre").inner_text() == "Which shelf: <A> or B?"
    assert page.locator("#session-status").inner_text() == "paused"


def test_keyboard_reaches_the_sessions_and_expands_output(page: Any, recorded: tuple[str, str, str]) -> None:
    page.keyboard.press("Tab")  # the skip link first
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    for _ in range(12):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent") == recorded[1]:
            break
    else:
        raise AssertionError("the session link is not reachable with Tab")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(f"/sessions/{recorded[1]}$"))
    assert page.locator("#rounds article.round").count() == 4


def test_artifacts_and_pages_need_access(base: str, recorded: tuple[str, str, str]) -> None:
    artifact = f"{base}/sessions/{recorded[1]}.analyst.1/rounds/1/artifacts/0"
    with pytest.raises(urllib.error.HTTPError) as denied:
        urllib.request.urlopen(artifact, timeout=10)
    assert denied.value.code == 401
    denied.value.close()
    request = urllib.request.Request(artifact, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.headers["Content-Type"] == "image/png"
        assert answer.read().startswith(b"\x89PNG")
    with urllib.request.urlopen(
        urllib.request.Request(artifact + "?download=1", headers=request.headers), timeout=10
    ) as answer:
        assert answer.headers["Content-Disposition"].startswith("attachment")
    page = urllib.request.Request(f"{base}/sessions/{recorded[1]}", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(page, timeout=10) as answer:
        html = answer.read().decode()
        assert "script-src 'self'" in answer.headers["Content-Security-Policy"]
    assert TOKEN not in html and "&lt;script&gt;" in html and HOSTILE not in html


def test_docs_screenshots_exist() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "console"
    assert (docs / "session.png").exists()


def test_a_session_run_elsewhere_is_followed_live_from_the_store(
    chromium: Any, base: str, recorded: tuple[str, str, str], tmp_path: Path
) -> None:
    """A run this server does not manage (``codeact run``, a queue worker) is followed through the store."""
    import threading

    from tests.console._support import Inventory

    gate = threading.Event()
    Inventory.gate = gate
    replies = [
        'First a note.\n```python\nfirst = 1\nprint("one")\n```',
        'Now the truck.\n```python\nr = await inventory.wait(what="truck")\nprint(r)\n```',
        "Done.\n```python\nsystem.finish(r)\n```",
    ]
    result: list[Any] = []
    worker = threading.Thread(
        target=lambda: result.append(run_agent(recorded[0], tmp_path, replies, session_id="elsewhere-1")), daemon=True
    )
    worker.start()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    page_url = f"{base}/sessions/elsewhere-1"
    for _ in range(300):  # until round 1 is recorded (the run then waits for the gate)
        try:
            with urllib.request.urlopen(urllib.request.Request(page_url, headers=headers), timeout=10) as answer:
                if 'id="round-1"' in answer.read().decode():
                    break
        except urllib.error.HTTPError as exc:
            exc.close()
        time.sleep(0.1)
    context = chromium.new_context()
    context.set_default_timeout(20_000)
    try:
        p = context.new_page()
        p.goto(f"{page_url}?token={TOKEN}")
        assert p.locator("#rounds article.round").count() == 1
        assert "Running" in p.locator("#live-status").inner_text()
        p.evaluate("window.__same_page = true")
        gate.set()
        p.locator("#round-3").wait_for()
        assert "truck: ready" in p.locator("#round-2 .stdout").inner_text()
        # The status comes as its own event after the round's.
        p.locator("#session-status:text-is('completed')").wait_for()  # no wait_for_function: CSP refuses eval
        assert p.evaluate("window.__same_page === true")
    finally:
        gate.set()
        Inventory.gate = None
        context.close()
        worker.join(60)
    assert result and result[0].status == "completed"


def test_the_favicon_is_served_and_no_warning_is_logged(base: str, caplog: pytest.LogCaptureFixture) -> None:
    """Browsers ask for /favicon.ico on every page; it was a 404 logged as WARNING each time (issue 35)."""
    with caplog.at_level(logging.INFO), urllib.request.urlopen(f"{base}/favicon.ico", timeout=10) as answer:
        assert answer.headers["Content-Type"] == "image/svg+xml"
        assert answer.read().startswith(b"<svg")
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_the_pages_fit_1400_px_and_show_answers_and_thoughts_as_text(
    chromium: Any, base: str, recorded: tuple[str, str, str]
) -> None:
    """At 1400 px the sessions table overflowed, the answer read as raw ``{"$control": ...}`` JSON and a
    thought said "Thought:" under its "Thought" heading (issue 35 item 10)."""
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(8000)
    page = context.new_page()
    try:
        page.goto(f"{base}/?token={TOKEN}")
        assert page.evaluate("document.documentElement.scrollWidth") <= 1400
        page.goto(f"{base}/sessions/conv-1")
        assert page.evaluate("document.documentElement.scrollWidth") <= 1400
        text = page.locator("main").inner_text()
        assert "$control" not in text
        assert 'finished the run with: "B"' in text and "ANSWER" in text.upper()  # what system.finish said
        thoughts = page.locator(".thought pre").all_inner_texts()
        assert "Listing the shelves." in thoughts  # the model wrote "Thought: Listing the shelves."
        for thought in thoughts:
            assert not thought.lstrip().lower().startswith("thought:"), thought
    finally:
        context.close()
