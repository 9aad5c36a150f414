"""A headless Chromium driven through ChromeDriver (Debian's `chromium` and `chromium-driver`),
for the console's tests. Without them the browser tests skip, unless
`LEAFSEARCH_REQUIRE_BROWSER=1` (set by `.ci/run`, which installs both) makes that a failure.

`LEAFSEARCH_SCREENSHOTS=<folder>` keeps a screenshot of each view the tests reach (the ones in
docs/console/ were taken so)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
#: How long a view may take to show what a test waits for (the node runs the suite beside it).
WAIT_SECONDS = 60

# The flags Chromium needs on this kind of machine: as root, without a screen, and with no
# connection to any other host (it would try Google's at every start).
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
)


def downloads(tmp_path: Path) -> Path:
    """Where the browser of a test saves files."""
    return tmp_path / "downloads"


@pytest.fixture(scope="session")
def browser_available() -> None:
    present = os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)
    try:
        import selenium  # noqa: F401 - only whether it is installed
    except ImportError:
        present = False
    if not present:
        if os.environ.get("LEAFSEARCH_REQUIRE_BROWSER") == "1":
            pytest.fail("LEAFSEARCH_REQUIRE_BROWSER=1 but chromium, chromedriver or selenium is missing")
        pytest.skip("needs Debian's chromium and chromium-driver and the selenium package")


@pytest.fixture
def browser(browser_available: None, tmp_path: Path) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    # What the console saves (an export) lands in `downloads(tmp_path)`.
    options.add_experimental_option(
        "prefs",
        {"download.default_directory": str(downloads(tmp_path)), "download.prompt_for_download": False},
    )
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def screenshot() -> Callable[[Any, str], None]:
    folder = os.environ.get("LEAFSEARCH_SCREENSHOTS")

    def take(driver: Any, name: str) -> None:
        if folder:
            driver.save_screenshot(str(Path(folder) / f"{name}.png"))

    return take
