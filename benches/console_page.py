"""Loads the console's status page (and the next page) in Debian's chromium, logged in, and
prints what the browser measured: bytes transferred for the document and its subresources, the
time to first contentful paint and to DOMContentLoaded (p50, p99), and how many rows the page
drew. Before each load, the baseline: GET /v1/status, the whole list as JSON, timed here, so both
see the same moments of the machine. Called by benches/console.sh (CONSOLE_URL, CONSOLE_TOKEN,
CONSOLE_LOADS); SE_OFFLINE keeps Selenium from downloading anything. Under
ROUNDTABLE_BENCH_SMOKE=1 a figure the browser did not report, or a missing next page, fails it."""

import math
import os
import sys
import time
import urllib.request

os.environ["SE_OFFLINE"] = "true"

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

BASE = os.environ["CONSOLE_URL"].rstrip("/")
TOKEN = os.environ["CONSOLE_TOKEN"]
LOADS = int(os.environ.get("CONSOLE_LOADS", "5"))
SMOKE = os.environ.get("ROUNDTABLE_BENCH_SMOKE") == "1"


def p50_p99(values):
    """Nearest-rank p50 and p99 in ms, or the reason there are none (a failure in a smoke run)."""
    values = sorted(v for v in values if v is not None)
    if not values:
        if SMOKE:
            sys.exit("the browser reported no such figure")
        return "not reported"
    rank = lambda q: values[max(1, math.ceil(q * len(values))) - 1]
    return f"p50 {rank(0.50):.0f} ms, p99 {rank(0.99):.0f} ms"


def baseline():
    """GET /v1/status, the whole list: ms to the last byte, and its size."""
    request = urllib.request.Request(f"{BASE}/v1/status", headers={"Authorization": f"Bearer {TOKEN}"})
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=60) as answer:
        size = len(answer.read())
    return (time.monotonic() - started) * 1000, size
# The paint entry is recorded after the load may already have returned: wait for it (2 s at most).
MEASURE = """
const done = arguments[arguments.length - 1];
const report = () => {
  const nav = performance.getEntriesByType('navigation')[0];
  const paint = performance.getEntriesByType('paint').find(p => p.name === 'first-contentful-paint');
  const resources = performance.getEntriesByType('resource');
  return {
    document: nav.transferSize, decoded: nav.decodedBodySize,
    subresources: resources.reduce((sum, r) => sum + r.transferSize, 0),
    fcp: paint ? paint.startTime : null, dcl: nav.domContentLoadedEventEnd,
    rows: document.querySelectorAll('#status tbody tr').length,
  };
};
const started = Date.now();
(function wait() {
  const found = report();
  if (found.fcp !== null || Date.now() - started > 2000) { done(found); } else { setTimeout(wait, 50); }
})();
"""

options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,900", "--no-first-run", "--disable-cache"]:
    options.add_argument(argument)
driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
driver.set_script_timeout(10)
try:
    driver.get(f"{BASE}/ui/login")
    field = driver.find_element(By.ID, "token")
    field.send_keys(TOKEN)
    field.send_keys(Keys.ENTER)
    baselines = []
    for page, path in [("first page", "/ui/"), ("next page", None)]:
        if path is None:
            links = driver.find_elements(By.CSS_SELECTOR, "a[rel=next]")
            if not links:
                print(f"{page}: no next link (not paginated?)")
                if SMOKE:
                    sys.exit("the first page has no next link")
                break
            path = links[0].get_attribute("href")[len(BASE):]
        runs = []
        for _ in range(LOADS):
            baselines.append(baseline())
            driver.get(f"{BASE}{path}")
            runs.append(driver.execute_async_script(MEASURE))
        print(f"{page} ({path}): {runs[0]['rows']} rows; document {runs[0]['decoded']} bytes "
              f"({runs[0]['document']} transferred), subresources {runs[-1]['subresources']} bytes; "
              f"first contentful paint {p50_p99(r['fcp'] for r in runs)}, "
              f"DOMContentLoaded {p50_p99(r['dcl'] for r in runs)}")
    print(f"baseline: GET /v1/status, the whole list as JSON ({baselines[-1][1]} bytes), "
          f"{len(baselines)} requests taking turns with the loads above: {p50_p99(t for t, _ in baselines)}")
finally:
    driver.quit()
