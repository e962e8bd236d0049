"""The review console in a real browser: Debian's chromium and chromedriver, driven by Selenium.

Run by tests/integration/console.rs against a daemon it started; nothing here downloads a
browser or a driver (Selenium Manager is kept offline). Reads its inputs from the environment,
prints one JSON line with what it did, exits non-zero with the reason on the first failure.
Screenshots go to $ARTIFACTS.
"""

import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

os.environ["SE_OFFLINE"] = "true"

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.common.exceptions import WebDriverException  # noqa: E402

BASE = os.environ["CONSOLE_URL"].rstrip("/")
TOKEN = open(os.environ["CONSOLE_TOKEN_FILE"]).read().strip()
SPECS = os.environ["SPECS_FILE"]
ARTIFACTS = os.environ["ARTIFACTS"]
REVIEWED = os.environ["REVIEWED_PROPOSAL"]
REJECTED = os.environ["REJECTED_PROPOSAL"]
TICKING = os.environ["TICKING_ASSIGNMENT"]


def fail(message):
    print(f"console test failed: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def browser(javascript=True, width=1280):
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     f"--window-size={width},900", "--no-first-run"]:
        options.add_argument(argument)
    if not javascript:
        options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    return webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)


def path_of(driver):
    return driver.current_url[len(BASE):].split("?")[0]


def log_in(driver):
    driver.get(BASE + "/ui/")
    check(path_of(driver) == "/ui/login", f"a page without the cookie goes to the login, not {driver.current_url}")
    field = driver.find_element(By.ID, "token")
    field.send_keys(TOKEN)
    field.send_keys(Keys.ENTER)
    wait_for(f"the login to lead to the status page (at {driver.current_url})", 30,
             lambda: path_of(driver) == "/ui/" and driver.find_elements(By.ID, "status"))
    cookie = driver.get_cookie("rt_console")
    check(cookie is not None and cookie.get("httpOnly") and cookie.get("sameSite") == "Strict",
          f"the session cookie is HttpOnly and SameSite=Strict: {cookie}")
    return cookie["value"]


def wait_for(what, seconds, probe):
    deadline = time.time() + seconds
    last_error = None
    while time.time() < deadline:
        try:
            found = probe()
        except WebDriverException as error:
            # The element was found on the page a form was leaving ("stale element", "node does
            # not belong to the document"): ask again on the next one.
            found, last_error = None, error
        if found:
            return found
        time.sleep(0.5)
    fail(f"timed out after {seconds} s waiting for {what}" + (f" (last: {last_error.msg})" if last_error else ""))


def after_submit(driver, element_id, text=None, seconds=60):
    """The element of the page a form led to, once it is there (a loaded machine answers late)."""
    def probe():
        found = driver.find_elements(By.ID, element_id)
        if found and (text is None or found[0].text == text):
            return found[0]
        return None
    return wait_for(f"#{element_id}" + (f" to read {text!r}" if text else ""), seconds, probe)


def post(path, fields, cookie, origin=None):
    data = urllib.parse.urlencode(fields).encode()
    request = urllib.request.Request(BASE + path, data=data, method="POST")
    request.add_header("Cookie", f"rt_console={cookie}")
    if origin:
        request.add_header("Origin", origin)
    try:
        with urllib.request.urlopen(request) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def main():
    done = {}
    driver = browser()
    try:
        cookie = log_in(driver)

        # The live tail of a running session, over SSE (the console's one script).
        driver.get(f"{BASE}/ui/assignments/{TICKING}")
        wait_for("the live tail to show the agent's output", 60,
                 lambda: any("tick" in e.text for e in driver.find_elements(By.ID, "live-tail")))
        done["liveTail"] = driver.find_element(By.ID, "live-tail").text.count("tick")

        # A spec edit appears and turns Synced.
        with open(SPECS, "a") as specs:
            specs.write("---\napiVersion: roundtable.dev/v1alpha1\nkind: Assignment\nmetadata: {name: added}\n"
                        "spec:\n  adapter: generic\n  suspend: true\n  task: {id: T-9, prompt: later}\n"
                        "  readablePaths: [README.md]\n")

        def added_synced():
            driver.get(BASE + "/ui/?q=added")
            rows = [row.text for row in driver.find_elements(By.CSS_SELECTOR, "#status tbody tr")]
            return any("added" in row and "Synced" in row for row in rows)

        wait_for("the added Assignment to show Synced", 60, added_synced)
        driver.get(BASE + "/ui/")
        driver.save_screenshot(os.path.join(ARTIFACTS, "status.png"))

        # A proposal: findings first, names escaped, accepted with the reason its gate asks for.
        driver.get(f"{BASE}/ui/proposals/{REVIEWED}")
        source = driver.page_source
        check("protected-path" in driver.find_element(By.ID, "findings").text, "the finding is listed")
        check(source.find('id="findings"') < source.find('id="diff"'), "findings come before the diff")
        check("\u202e" not in source and "\\u{202e}" in source,
              "a file name with a bidi control shows it escaped, as the CLI does")
        check("\x1b" not in source, "no raw control character reaches the page")
        driver.save_screenshot(os.path.join(ARTIFACTS, "proposal.png"))
        # The diff's line geometry: each line directly below the one before, one line's height
        # apart, so a blank context line could be told from a line break (they were double-spaced).
        boxes = driver.execute_script(
            "return [...document.querySelectorAll('#diff span')].map(s => s.getBoundingClientRect())"
            ".map(r => [r.top, r.height])")
        check(len(boxes) >= 4, f"the diff shows its lines ({len(boxes)})")
        gaps = [round(b[0] - a[0], 1) for a, b in zip(boxes, boxes[1:])]
        line_height = boxes[0][1]
        check(line_height > 0 and all(abs(gap - line_height) < 0.5 for gap in gaps),
              f"each diff line is one line below the one before (line {line_height} px, gaps {gaps})")
        # The whole page, diff included, for a reviewer of this run.
        for _ in range(3):  # the window's height holds more than the page's viewport
            short = driver.execute_script("return document.documentElement.scrollHeight - window.innerHeight")
            if short <= 0:
                break
            driver.set_window_size(1280, driver.get_window_size()["height"] + short)
        driver.save_screenshot(os.path.join(ARTIFACTS, "proposal-full.png"))
        driver.set_window_size(1280, 900)
        reason = driver.find_element(By.ID, "reason-protectedPaths")
        reason.send_keys("CI change reviewed in the browser")
        driver.find_element(By.ID, "accept").click()
        after_submit(driver, "state", "accepted")
        done["acceptedNotice"] = after_submit(driver, "notice").text

        # A forged POST (no CSRF token, or a wrong one) is refused, as is one from another site.
        check(post(f"/ui/proposals/{REJECTED}/reject", {"reason": "forged"}, cookie) == 403,
              "a POST without the CSRF token is refused")
        check(post(f"/ui/proposals/{REJECTED}/reject", {"reason": "forged", "csrf": "0" * 64}, cookie) == 403,
              "a POST with a wrong CSRF token is refused")
        check(post("/ui/audit/verify", {}, cookie, origin="https://evil.example") == 403,
              "a POST from another origin is refused")

        # The audit chain verifies from the page.
        driver.get(BASE + "/ui/audit")
        driver.find_element(By.ID, "verify").click()
        done["audit"] = after_submit(driver, "verdict").text
        check(done["audit"].startswith("The chain verifies"), done["audit"])

        # Keyboard: the first Tab reaches the skip link, Enter follows it.
        driver.get(BASE + "/ui/")
        driver.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
        check(driver.switch_to.active_element.text == "Skip to content", "the skip link is the first stop")

        # A narrow screen: nothing wider than the window but the tables, which scroll in place.
        driver.set_window_size(390, 900)
        driver.get(BASE + "/ui/")
        overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        check(overflow <= 1, f"the status page fits a narrow screen (overflows by {overflow} px)")
        driver.save_screenshot(os.path.join(ARTIFACTS, "status-narrow.png"))
        driver.set_window_size(1280, 900)

        # Relative times carry the absolute in a tooltip.
        driver.get(f"{BASE}/ui/proposals")
        times = driver.find_elements(By.CSS_SELECTOR, "time[title]")
        check(times and "ago" in times[0].text and "T" in times[0].get_attribute("title"), "relative times")

        # Without the cookie every page goes to the login.
        driver.delete_all_cookies()
        for page in ["/ui/", "/ui/proposals", f"/ui/proposals/{REVIEWED}", "/ui/controllers", "/ui/audit",
                     f"/ui/assignments/{TICKING}"]:
            driver.get(BASE + page)
            check(path_of(driver) == "/ui/login", f"{page} without the cookie goes to the login")
    finally:
        driver.quit()

    # Without JavaScript: log in, reject another proposal with a reason.
    plain = browser(javascript=False)
    try:
        log_in(plain)
        plain.get(f"{BASE}/ui/proposals/{REJECTED}")
        plain.find_element(By.ID, "reject-reason").send_keys("not this one")
        plain.find_element(By.ID, "reject").click()
        after_submit(plain, "state", "rejected")
        done["rejectedDecision"] = after_submit(plain, "decision").text
    finally:
        plain.quit()
    print(json.dumps(done))


if __name__ == "__main__":
    main()
