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


# Each row of one file's table as the browser lays it out: its box, whether it is rendered (a
# folded file's rows keep their boxes, under content-visibility), the code cell's line height and
# each cell's text and place.
ROWS_OF_FILE = """
const file = [...document.querySelectorAll('#diff details.file')]
  .find(d => d.querySelector('summary .path').textContent.endsWith(arguments[0]));
if (!file) { return null; }
return [...file.querySelectorAll('tr')].map(tr => {
  const box = tr.getBoundingClientRect();
  const cells = [...tr.children].map(td => {
    const r = td.getBoundingClientRect();
    return {cls: td.className, text: td.textContent, left: r.left, width: r.width};
  });
  const code = tr.querySelector('td.code');
  return {cls: tr.className, id: tr.id, top: box.top, height: box.height, shown: tr.checkVisibility ? tr.checkVisibility() : tr.getClientRects().length > 0,
          lineHeight: code ? parseFloat(getComputedStyle(code).lineHeight) : 0, cells};
});
"""


def rows_of(driver, path):
    rows = driver.execute_script(ROWS_OF_FILE, path)
    check(rows is not None, f"the diff shows {path}")
    return rows


def check_diff_geometry(driver, path):
    """Each line of a file's table directly below the one before, one line's height apart: a blank
    line can be told from a line break (the lines were once double-spaced)."""
    lines = [r for r in rows_of(driver, path) if r["cls"].startswith("line")]
    check(len(lines) >= 1, f"{path} shows its lines ({len(lines)})")
    for row in lines:
        check(row["lineHeight"] > 0 and abs(row["height"] - row["lineHeight"]) < 1,
              f"a line of {path} is one line high ({row['height']} px, line height {row['lineHeight']} px)")
    for above, below in zip(lines, lines[1:]):
        check(abs(below["top"] - above["top"] - above["height"]) < 1,
              f"each line of {path} starts where the one above ends ({above['top']} + {above['height']} vs "
              f"{below['top']})")
    return lines


def numbers(row):
    """(old, new, text) of a unified row, by its cells' classes."""
    by = {c["cls"].split()[1] if c["cls"].startswith("num") else "code": c["text"] for c in row["cells"]}
    return (by.get("old") or None, by.get("new") or None, by["code"])


def full_page_screenshot(driver, name):
    for _ in range(3):  # the window's height holds more than the page's viewport
        short = driver.execute_script("return document.documentElement.scrollHeight - window.innerHeight")
        if short <= 0:
            break
        driver.set_window_size(1280, driver.get_window_size()["height"] + short)
    driver.save_screenshot(os.path.join(ARTIFACTS, name))
    driver.set_window_size(1280, 900)


def reviewer_page(driver):
    """The plain proposal: the files with their counts at the top, each line numbered on both
    sides, the secrets finding at its line, the rename found, whitespace and split views, a file
    folded."""
    seen = {}
    driver.get(f"{BASE}/ui/proposals/{REJECTED}")
    listed = {}
    for row in driver.find_elements(By.CSS_SELECTOR, "#files tbody tr"):
        cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
        listed[cells[4]] = cells[:4]
    seen["files"] = listed
    check(listed.get("README.md", [None])[:3] == ["modified", "+2", "\u2212" + "1"],
          f"README.md is listed with its counts: {listed}")
    check(listed.get("config.txt", [None])[:3] == ["added", "+3", "\u2212" + "0"], f"config.txt is listed: {listed}")
    check(listed.get("notes.txt \u2192 moved.txt", [None])[0] == "renamed", f"the move is found as a rename: {listed}")
    source = driver.page_source
    check(source.find('id="files"') < source.find('id="findings"') < source.find('id="diff"'),
          "the files come first, then the findings, then the diff")

    # Line numbers on both sides, each line one line high.
    readme = check_diff_geometry(driver, "README.md")
    check([numbers(r) for r in readme] == [("1", None, "# Project"), (None, "1", "#   Project"), (None, "2", "plain")],
          f"README.md's lines carry their old and new numbers: {[numbers(r) for r in readme]}")
    cells = readme[0]["cells"]
    check(cells[0]["left"] < cells[1]["left"] < cells[2]["left"], f"old, new, then the code: {cells}")

    # The finding at its line: beneath config.txt's line 3, and the list above links to it.
    config = rows_of(driver, "config.txt")
    at = [i for i, r in enumerate(config) if r["cls"].startswith("line") and numbers(r)[1] == "3"]
    check(len(at) == 1 and config[at[0] + 1]["cls"] == "notes" and "aws-access-key" in config[at[0] + 1]["cells"][0]["text"],
          f"the secrets finding is beneath line 3 of config.txt: {[(r['cls'], r['cells'][0]['text']) for r in config]}")
    line_id = config[at[0]]["id"]
    check(driver.find_elements(By.CSS_SELECTOR, f'#findings a[href="#{line_id}"]'),
          f"the findings list links to the line ({line_id})")
    moved = driver.execute_script(
        "return [...document.querySelectorAll('#diff details.file')].find(d => d.querySelector('.path')"
        ".textContent.endsWith('moved.txt')).querySelector('ul.notes').textContent")
    check("outsideReadablePaths" in moved, f"the flag is at its file: {moved}")

    # The whole page, for a reviewer of this run.
    full_page_screenshot(driver, "proposal-full.png")

    # A file folds on its summary, and its lines go with it.
    summary = driver.execute_script(
        "return [...document.querySelectorAll('#diff details.file > summary')].find(s => s.querySelector('.path')"
        ".textContent === 'README.md')")
    summary.click()
    check(not any(r["shown"] for r in rows_of(driver, "README.md")), "a folded file hides its lines")
    summary.click()
    check(all(r["shown"] for r in rows_of(driver, "README.md")), "an unfolded file shows them again")

    # Whitespace ignored: the re-indented line is gone, the added one stays, the rename too.
    driver.find_element(By.LINK_TEXT, "Ignore whitespace").click()
    wait_for("the diff without whitespace changes", 30, lambda: "whitespace=ignore" in driver.current_url)
    ignoring = [numbers(r) for r in rows_of(driver, "README.md") if r["cls"].startswith("line")]
    check(ignoring[-1:] == [(None, "2", "plain")] and all(old == "1" and new == "1" for old, new, _ in ignoring[:-1]),
          f"ignoring whitespace, the re-indented line is no change: {ignoring}")
    check(not any(r["cls"] == "line del" for r in rows_of(driver, "README.md")), "no removed line is left")
    check(rows_of(driver, "moved.txt") is not None, "the rename is still found")
    seen["ignoringWhitespace"] = ignoring

    # Split: the old file on the left, the new on the right, a removed line beside its replacement.
    driver.find_element(By.LINK_TEXT, "Show whitespace changes").click()
    wait_for("the diff with whitespace", 30, lambda: "whitespace" not in driver.current_url)
    driver.find_element(By.LINK_TEXT, "Split").click()
    wait_for("the split view", 30, lambda: "view=split" in driver.current_url)
    split = check_diff_geometry(driver, "README.md")
    pair = [[c["text"] for c in r["cells"]] for r in split]
    check(pair[0] == ["1", "# Project", "1", "#   Project"] and pair[1] == ["", "", "2", "plain"],
          f"split rows pair the old line with the new: {pair}")
    cells = split[0]["cells"]
    check(cells[1]["left"] + cells[1]["width"] <= cells[3]["left"] and abs(cells[1]["width"] - cells[3]["width"]) < 2,
          f"two code columns side by side, of one width: {cells}")
    full_page_screenshot(driver, "proposal-split.png")
    return seen


def colour_of(driver, element):
    return driver.execute_script("return getComputedStyle(arguments[0]).color", element)


def assignment_page(driver):
    driver.get(f"{BASE}/ui/assignments/{TICKING}")
    asked = {row.find_element(By.TAG_NAME, "th").text: row.find_element(By.TAG_NAME, "td").text
             for row in driver.find_elements(By.CSS_SELECTOR, "#asked tr")}
    check(asked.get("Adapter") == "generic" and asked.get("Task") == f"T-{TICKING}"
          and "sleep 1" in asked.get("Prompt", "") and asked.get("Readable paths") == "README.md",
          f"the Assignment page shows what was asked: {asked}")
    heads = [th.text for th in driver.find_elements(By.CSS_SELECTOR, "#sessions thead th")]
    check("Generation" in heads, f"the sessions table has a generation column: {heads}")
    column = heads.index("Generation")
    generations = [row.find_elements(By.TAG_NAME, "td")[column].text
                   for row in driver.find_elements(By.CSS_SELECTOR, "#sessions tbody tr")]
    check(generations and all(g.split()[0].isdigit() for g in generations), f"each session's generation: {generations}")
    health = driver.find_element(By.ID, "health")
    body = driver.find_element(By.TAG_NAME, "body")
    check(colour_of(driver, health) != colour_of(driver, body),
          f"health has a colour of its own ({health.text}: {colour_of(driver, health)})")
    return {"asked": asked, "generations": generations, "health": health.text}


def session_page(driver):
    link = driver.find_element(By.CSS_SELECTOR, "#sessions tbody tr a")
    link.click()
    wait_for("the session page", 30, lambda: path_of(driver).startswith("/ui/sessions/"))
    source = driver.page_source
    check(0 < source.find('id="output"') < source.find('class="timeline"'), "the output comes before the phases")
    text = driver.find_element(By.ID, "main").text
    check("None." not in text, "no section says only None.")
    heads = [th.text for th in driver.find_elements(By.CSS_SELECTOR, "#admission thead th")]
    rows = driver.find_elements(By.CSS_SELECTOR, "#admission tbody tr")
    check(heads[:2] == ["Gate", "Verdict"] and rows, f"admission is a table of decisions: {heads}, {len(rows)} rows")
    check("admission.0" not in text, "no flattened admission keys")

    def running():
        bar = driver.find_element(By.CSS_SELECTOR, "svg.timeline rect.running")
        label = driver.find_elements(By.CSS_SELECTOR, "svg.timeline text.ms")[-1].text
        return float(bar.get_attribute("width")), int(label.split()[0])

    check(driver.find_elements(By.CSS_SELECTOR, "svg.timeline rect.running"), "the agent's phase is drawn while it runs")
    before = running()
    time.sleep(2.5)
    after = running()
    check(after[1] >= before[1] + 1500 and after[0] >= before[0],
          f"the running phase grows with the time (width, ms): {before} then {after}")
    check(driver.find_elements(By.CSS_SELECTOR, "#phase.busy"), "a running phase has its colour")
    driver.save_screenshot(os.path.join(ARTIFACTS, "session.png"))
    return {"agentMs": [before[1], after[1]], "admissionRows": len(rows)}


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

        # The Assignment page says what was asked and which generation each session ran.
        done["assignmentPage"] = assignment_page(driver)
        # Its running session: the output near the top, the agent's phase growing, admission as a
        # table, no empty sections.
        done["sessionPage"] = session_page(driver)

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

        # A message that quotes a CLI command links to the page instead: a pending proposal's.
        driver.get(BASE + "/ui/?q=plain")
        links = driver.find_elements(By.CSS_SELECTOR, f'#status a[href="/ui/proposals/{REJECTED}"]')
        check(links and "`roundtable proposals show" not in driver.find_element(By.ID, "status").text,
              "the status message links to the proposal rather than quoting the CLI")
        links[0].click()
        wait_for("the linked proposal's page", 30, lambda: path_of(driver) == f"/ui/proposals/{REJECTED}")

        # A proposal: findings first, names escaped, accepted with the reason its gate asks for.
        driver.get(f"{BASE}/ui/proposals/{REVIEWED}")
        source = driver.page_source
        check("protected-path" in driver.find_element(By.ID, "findings").text, "the finding is listed")
        check(source.find('id="findings"') < source.find('id="diff"'), "findings come before the diff")
        check("\u202e" not in source and "\\u{202e}" in source,
              "a file name with a bidi control shows it escaped, as the CLI does")
        check("\x1b" not in source, "no raw control character reaches the page")
        driver.save_screenshot(os.path.join(ARTIFACTS, "proposal.png"))
        check_diff_geometry(driver, ".github/workflows/ci.yml")
        reason = driver.find_element(By.ID, "reason-protectedPaths")
        reason.send_keys("CI change reviewed in the browser")
        driver.find_element(By.ID, "accept").click()
        after_submit(driver, "state", "accepted")
        done["acceptedNotice"] = after_submit(driver, "notice").text

        # The proposal page as a reviewer reads it, on the plain proposal.
        done["proposalPage"] = reviewer_page(driver)

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
