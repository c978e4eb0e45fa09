"""What the two browser tests share: skipping (or failing in CI) on a missing tool, a quiet static server
on 127.0.0.1, and Debian's Chromium under Playwright.

tests/test_book_render.py opens the chapters as Jupyter renders them (nbconvert); tests/test_book_site.py
opens the MyST website. Neither may download anything: Chromium is Debian's, never ``playwright install``.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import sys
import threading
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def need(condition: bool, what: str, remedy: str = "run scripts/setup.sh") -> None:
    """Skip the test when ``condition`` is false, or fail it under ``DFL_REQUIRE_ALL=1`` (CI)."""
    if condition:
        return
    if os.environ.get("DFL_REQUIRE_ALL") == "1":
        pytest.fail(f"{what} is missing (DFL_REQUIRE_ALL=1); {remedy}")
    pytest.skip(f"{what} is missing; {remedy}")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):  # the browser dropped a request it no
            super().handle_error(request, client_address)  # longer needed (a page being closed)


def serve(folder: Path) -> tuple[QuietServer, str]:
    """A static server of ``folder`` on 127.0.0.1: ``(server, base URL)``; call ``server.shutdown()``."""
    server = QuietServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@contextlib.contextmanager
def chromium():
    """Debian's Chromium, headless, launched by Playwright (skips, or fails in CI, when it is missing)."""
    need(CHROMIUM.exists(), "Debian's chromium (/usr/bin/chromium)")
    from playwright.sync_api import sync_playwright  # the book extra; only the browser tests need it

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
