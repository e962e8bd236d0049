"""Loads the console's status page (and the next page) in Debian's chromium, logged in, and
prints what the browser measured: bytes transferred for the document and its subresources, the
time to first contentful paint and to DOMContentLoaded, and how many rows the page drew. Called by
benches/console.sh; SE_OFFLINE keeps Selenium from downloading anything."""

import os
import statistics

os.environ["SE_OFFLINE"] = "true"

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

BASE = os.environ["CONSOLE_URL"].rstrip("/")
TOKEN = os.environ["CONSOLE_TOKEN"]
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
    for page, path in [("first page", "/ui/"), ("next page", None)]:
        if path is None:
            links = driver.find_elements(By.CSS_SELECTOR, "a[rel=next]")
            if not links:
                print(f"{page}: no next link (not paginated?)")
                break
            path = links[0].get_attribute("href")[len(BASE):]
        runs = []
        for _ in range(5):
            driver.get(f"{BASE}{path}")
            runs.append(driver.execute_async_script(MEASURE))
        def median(key):
            values = [r[key] for r in runs if r[key] is not None]
            return f"{statistics.median(values):.0f} ms" if values else "not reported"
        print(f"{page} ({path}): {runs[0]['rows']} rows; document {runs[0]['decoded']} bytes "
              f"({runs[0]['document']} transferred), subresources {runs[-1]['subresources']} bytes; "
              f"first contentful paint p50 {median('fcp')}, DOMContentLoaded p50 {median('dcl')}")
finally:
    driver.quit()
