"""How long the console takes to show: `python -m bench.console [--tries 10]`.

Starts `leafsearch serve` on a temporary data folder with one small index, then loads
`/_ui/` in headless Chromium (Debian's `chromium` and `chromium-driver`, through Selenium, as
tests/console does) `--tries` times, each in a new browser profile (nothing cached), and prints
the median and the slowest of: the page's load event (HTML, script and style fetched and run) and
the index list drawn (the page's first API answers rendered)."""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import httpx

from leafsearch.testing import Server
from tests.console.conftest import CHROMEDRIVER, CHROMIUM, FLAGS

ROWS = "return document.querySelectorAll('#indices-table tbody tr').length"
NAVIGATION = "return performance.getEntriesByType('navigation')[0].toJSON()"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.console", description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=10)
    args = parser.parse_args()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    loaded: list[float] = []
    listed: list[float] = []
    with Server() as server:
        httpx.put(f"{server.url}/logs/_doc/1?refresh=true", json={"message": "hello"}).raise_for_status()
        for _ in range(args.tries):
            with tempfile.TemporaryDirectory() as profile:
                options = webdriver.ChromeOptions()
                options.binary_location = CHROMIUM
                for flag in (*FLAGS, f"--user-data-dir={profile}"):
                    options.add_argument(flag)
                driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
                try:
                    started = time.perf_counter()
                    driver.get(f"{server.url}/_ui/")
                    WebDriverWait(driver, 30, poll_frequency=0.005).until(
                        lambda d: d.execute_script(
                            "return document.querySelectorAll('#indices-table tbody tr').length"
                        )
                    )
                    listed.append((time.perf_counter() - started) * 1000)
                    timing = driver.execute_script(
                        "return performance.getEntriesByType('navigation')[0].toJSON()"
                    )
                    loaded.append(timing["loadEventEnd"] - timing["startTime"])
                finally:
                    driver.quit()
    for name, values in (("load event", loaded), ("index list drawn", listed)):
        print(f"{name:<20} median {statistics.median(values):7.1f} ms   slowest {max(values):7.1f} ms")


if __name__ == "__main__":
    main()
