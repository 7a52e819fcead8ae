#!/usr/bin/python3
"""The ward console in a real browser (headless Chromium through Selenium)
against the real daemon fed by `gaitwatch replay` of a bundled recording.

What it checks, in order (docs/console.md, "What the browser test shows"):
  1. without a session every page redirects to the login and every API call
     answers 401;
  2. a carer logs in; an alert appears on the board within 1 s of being
     published (measured against a `gaitwatch subscribe` process);
  3. the carer acknowledges and marks it; after a reload the state holds;
  4. a viewer sees the alert but has no buttons, and the API refuses the
     viewer's acknowledgement (403);
  5. a wearer whose replay stops turns offline on the board and raises a
     sensor_offline alert.
With --screenshots DIR it saves the pages it passes through (docs/console/).

Exit status: 0 passed, 1 failed, 77 skipped (no chromium, chromedriver or
python3-selenium: Debian packages chromium, chromium-driver, python3-selenium).
"""

import argparse
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import yaml

SKIP = 77


def loopback_port_bindable(port):
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def free_port(kind=socket.SOCK_STREAM):
    """A loopback port dealt in turn from the counter file the C++ tests share
    (gw::free_port in common/child_process.h): below the ephemeral range, so
    no client connection takes it, and not handed to another test recently."""
    ephemeral_low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
            if low > 2048:
                ephemeral_low = low
    except (OSError, ValueError, IndexError):
        pass
    low, high = max(1024, ephemeral_low - 12000), ephemeral_low
    path = os.path.join(tempfile.gettempdir(), "gaitwatch-test-ports")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        fd = -1
    if fd >= 0:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            text = os.pread(fd, 31, 0).decode(errors="replace").strip()
            last = int(text) if text.isdigit() else low + os.getpid() % (high - low)
            for _ in range(high - low):
                last = low if last + 1 < low or last + 1 >= high else last + 1
                if loopback_port_bindable(last):
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, ("%d\n" % last).encode(), 0)
                    return last
        finally:
            os.close(fd)
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def absolute_includes(patterns, base):
    out = []
    for item in patterns or []:
        if isinstance(item, dict) and "include" in item and not os.path.isabs(item["include"]):
            item = dict(item, include=os.path.join(base, item["include"]))
        out.append(item)
    return out


class Check:
    def __init__(self):
        self.failures = []

    def __call__(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            self.failures.append(what)
        return ok


def wait_for(predicate, timeout, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--binary-dir", required=True)
    parser.add_argument("--screenshots", default=os.environ.get("GW_CONSOLE_SCREENSHOTS", ""))
    args = parser.parse_args()

    chromium = shutil.which("chromium")
    driver_path = shutil.which("chromedriver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.common.by import By
    except ImportError:
        webdriver = None
    if not chromium or not driver_path or webdriver is None:
        print("browser test skipped: needs chromium, chromium-driver and python3-selenium")
        return SKIP

    daemon = os.path.join(args.binary_dir, "daemon", "gaitwatchd")
    tool = os.path.join(args.binary_dir, "daemon", "gaitwatch")
    config_dir = os.path.join(args.source_dir, "config")
    recording = os.path.join(args.source_dir, "data", "daphnet", "S02R01.txt")
    work = tempfile.mkdtemp(prefix="gw_browser_")
    check = Check()
    processes = []
    driver = None
    shots = args.screenshots
    if shots:
        os.makedirs(shots, exist_ok=True)

    def shot(driver, name):
        if shots:
            driver.set_window_size(1280, 900)
            driver.save_screenshot(os.path.join(shots, name + ".png"))

    try:
        with open(os.path.join(config_dir, "gaitwatch.yaml")) as f:
            config = yaml.safe_load(f)
        udp_port, console_port = free_port(socket.SOCK_DGRAM), free_port()
        pub = "tcp://127.0.0.1:%d" % free_port()
        control = "tcp://127.0.0.1:%d" % free_port()
        config["ingest"]["udp"]["port"] = udp_port
        config["ingest"]["tcp"]["port"] = free_port()
        config["publish"]["endpoint"] = pub
        config["control"]["endpoint"] = control
        config["metrics"]["port"] = free_port()
        config["storage"]["path"] = os.path.join(work, "hits.db")
        config["history"]["path"] = os.path.join(work, "history.db")
        config["search"]["threads"] = 2
        config["console"]["port"] = console_port
        config["console"]["static_dir"] = os.path.join(args.source_dir, "console", "web")
        config.setdefault("wearers", {})
        config["wearers"].update({"stale_after_s": 2, "offline_after_s": 4, "offline_alerts": True})
        config["patterns"] = absolute_includes(config["patterns"], config_dir)
        config["gait"]["pack"] = os.path.join(config_dir, "patterns", "gait.yaml")
        config_path = os.path.join(work, "gaitwatch.yaml")
        with open(config_path, "w") as f:
            yaml.safe_dump(config, f)

        db = os.path.join(work, "hits.db")
        for user, role, password in (("carla", "carer", "carla-password-1"),
                                     ("vic", "viewer", "vic-password-12"),
                                     ("ana", "admin", "ana-password-123")):
            password_file = os.path.join(work, user + ".pw")
            with open(password_file, "w") as f:
                f.write(password + "\n")
            subprocess.run([tool, "user", "add", user, "--role", role, "--db", db,
                            "--password-file", password_file], check=True)

        log = open(os.path.join(work, "daemon.err"), "w")
        processes.append(subprocess.Popen([daemon, "--config", config_path],
                                          stdout=log, stderr=subprocess.STDOUT))
        base = "http://127.0.0.1:%d" % console_port

        def answers():
            try:
                urllib.request.urlopen(base + "/login.html", timeout=1)
                return True
            except (urllib.error.URLError, ConnectionError, OSError):
                return False
        if not check(wait_for(answers, 30), "the daemon serves the console"):
            return 1
        subprocess.run([tool, "wearer", "add", "--id", "1", "--name", "Ann Example", "--room", "12",
                        "--bed", "A", "--config", config_path], check=True, stdout=subprocess.DEVNULL)

        # 1. No session: nothing readable.
        for path in ("/api/alerts", "/api/wearers", "/api/health", "/api/alerts/1", "/api/stream",
                     "/api/events"):
            try:
                urllib.request.urlopen(base + path, timeout=5)
                status = 200
            except urllib.error.HTTPError as e:
                status = e.code
            check(status == 401, "without a session GET %s answers 401 (got %d)" % (path, status))

        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,900"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(driver_path), options=options)
        driver.set_page_load_timeout(30)

        driver.get(base + "/")
        check(driver.current_url.endswith("/login.html"), "without a session / goes to the login page")
        shot(driver, "login")

        def text(css):
            # Read through the page's own DOM: the console re-renders lists
            # on every update, so element handles go stale.
            return driver.execute_script(
                "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';", css)

        def count(css):
            return driver.execute_script("return document.querySelectorAll(arguments[0]).length;", css)

        def click(css):
            return wait_for(lambda: driver.execute_script(
                "const e = document.querySelector(arguments[0]); if (!e) return false; e.click(); return true;",
                css), 5)

        def login(user, password):
            driver.get(base + "/login.html")
            driver.find_element(By.ID, "user").send_keys(user)
            driver.find_element(By.ID, "password").send_keys(password)
            driver.find_element(By.ID, "login-button").click()
            return wait_for(lambda: driver.current_url.rstrip("/") == base and
                            text("#who").startswith(user), 10)

        # A wrong password is refused on the page.
        driver.get(base + "/login.html")
        driver.find_element(By.ID, "user").send_keys("carla")
        driver.find_element(By.ID, "password").send_keys("not-her-password")
        driver.find_element(By.ID, "login-button").click()
        check(wait_for(lambda: "wrong" in text("#login-error"), 10),
              "a wrong password is refused with a message")

        # 2. Log in as the carer; replay; the first alert reaches the board within 1 s.
        check(login("carla", "carla-password-1"), "the carer logs in")
        check(wait_for(lambda: "live" == text("#live"), 10),
              "the live stream is connected")
        published = {}

        def subscribe():
            sub = subprocess.Popen([tool, "subscribe", "--endpoint", pub, "--no-events", "--count", "1",
                                    "--timeout", "120"], stdout=subprocess.PIPE, text=True)
            processes.append(sub)
            for line in sub.stdout:
                line = line.strip()
                if line.startswith("{"):
                    published.setdefault("at", time.monotonic())
                    published.setdefault("alert", json.loads(line))
        subscriber = threading.Thread(target=subscribe, daemon=True)
        subscriber.start()
        time.sleep(1.0)  # the subscription reaches the publisher before the first alert
        replay = subprocess.Popen([tool, "replay", "--file", recording, "--format", "daphnet",
                                   "--start", "53000", "--end", "61200", "--speed", "10",
                                   "--wearer", "1", "--to", "udp://127.0.0.1:%d" % udp_port],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        processes.append(replay)
        if not check(wait_for(lambda: "alert" in published, 60), "an alert is published"):
            return 1
        seq = published["alert"]["seq"]
        row_css = "#board-alerts tr.alert-row[data-seq='%d']" % seq
        seen = wait_for(lambda: count(row_css) > 0, 5, step=0.01)
        delay = time.monotonic() - published["at"]
        check(bool(seen) and delay <= 1.0,
              "alert %d is on the board %.3f s after it was published (<= 1 s)" % (seq, delay))
        replay.wait(timeout=120)
        time.sleep(1.0)
        shot(driver, "board")

        # 3. Acknowledge and mark it, reload: the state holds.
        check(click(row_css + " button.ack"), "the carer has an Acknowledge button")
        check(wait_for(lambda: "acknowledged" in text(row_css), 5), "acknowledged on the board")
        check(click(row_css + " button.mark-false"), "the carer has a False alarm button")
        time.sleep(0.5)
        driver.refresh()
        check(wait_for(lambda: "acknowledged" in text(row_css), 10),
              "after a reload the alert is still acknowledged")
        driver.get(base + "/#/alert/%d" % seq)
        check(wait_for(lambda: "false alarm" in text("#alert-facts"), 10),
              "the alert page shows the false-alarm mark")
        check(wait_for(lambda: "carla" in text("#alert-facts"), 5),
              "the alert page names who acknowledged it")
        check(wait_for(lambda: count("#alert-signal canvas") > 0, 10),
              "the alert page draws the signal")
        check(wait_for(lambda: count("#alert-match canvas.match") > 0, 10),
              "the alert page draws the example it matched with the warping path (%s)" %
              (text("#alert-match") or "drawn"))
        shot(driver, "alert")
        driver.execute_script("document.getElementById('alert-match').previousElementSibling.scrollIntoView()")
        shot(driver, "alert-match")
        driver.get(base + "/#/health")
        check(wait_for(lambda: count("#health-summary tr") > 0, 10),
              "the health page shows the daemon's counters")
        shot(driver, "health")

        # 5. The replay has stopped: the wearer turns offline and sensor_offline is raised.
        driver.get(base + "/#/board")
        check(wait_for(lambda: "offline" in text("#wearer-1"), 20),
              "the wearer's sensor turns offline on the board")
        check(wait_for(lambda: "sensor_offline" in text("#board-alerts"), 20),
              "a sensor_offline alert is on the board")
        shot(driver, "board-offline")

        # 7. A pressure hotspot under the left heel (a bundled walk with a load
        # planted under L1, gaitpdb's heel sensor) shows its foot and region.
        planted = os.path.join(work, "planted", "GaCo01_01.txt")
        os.makedirs(os.path.dirname(planted))
        with open(os.path.join(args.source_dir, "data", "gaitpdb", "GaCo01_01.txt")) as src, \
                open(planted, "w") as dst:
            for line in src:
                fields = line.rstrip("\n").split("\t")
                if len(fields) == 19:
                    fields[1] = "%.2f" % (float(fields[1]) + 700)
                    fields[17] = "%.2f" % (float(fields[17]) + 700)
                dst.write("\t".join(fields) + "\n")
        hotspot_replay = subprocess.run([tool, "replay", "--config", config_path, "--device", "gaitpdb_insoles",
                                         "--file", planted, "--wearer", "9", "--speed", "20",
                                         "--to", "udp://127.0.0.1:%d" % udp_port],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120)
        check(hotspot_replay.returncode == 0, "the planted walk is replayed (%s)" % hotspot_replay.stderr[-300:])
        check(wait_for(lambda: "pressure_hotspot (pressure_hotspot, left heel)" in text("#board-alerts"), 20),
              "the board shows the hotspot's foot and region (%s)" % text("#board-alerts")[-200:])

        # 4. A viewer: no buttons, and the API refuses a change.
        click("#logout")
        wait_for(lambda: driver.current_url.endswith("/login.html"), 10)
        check(login("vic", "vic-password-12"), "the viewer logs in")
        check(wait_for(lambda: count(row_css) > 0, 10), "the viewer sees the alert")
        check(count("#board-alerts button") == 0, "the viewer has no buttons")
        status = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            fetch('/api/session').then(r => r.json()).then(s =>
              fetch('/api/alerts/%d/resolve', {method: 'POST', headers: {'Content-Type': 'application/json',
                    'X-CSRF-Token': s.csrf}, body: '{}'})).then(r => done(r.status));
        """ % seq)
        check(status == 403, "the API refuses the viewer's change (403, got %s)" % status)

        check(count("#wearer-admin:not(.hidden)") == 0, "the viewer has no wearer form")

        # 6. An admin registers a wearer from the board.
        click("#logout")
        wait_for(lambda: driver.current_url.endswith("/login.html"), 10)
        check(login("ana", "ana-password-123"), "the admin logs in")
        click("#wearer-admin summary")
        for field, value in (("wearer-id", "2"), ("wearer-name", "Bo Example"), ("wearer-room", "14")):
            driver.find_element(By.ID, field).send_keys(value)
        click("#wearer-save")
        check(wait_for(lambda: "Bo Example" in text("#wearer-2") and "room 14" in text("#wearer-2"), 10),
              "the admin's new wearer is on the board")

        # Without the cookie the browser gets nothing.
        driver.delete_all_cookies()
        driver.get(base + "/")
        check(driver.current_url.endswith("/login.html"), "without the cookie / goes to the login page")
        status = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            fetch('/api/alerts').then(r => done(r.status));
        """)
        check(status == 401, "without the cookie the API answers 401 (got %s)" % status)
    finally:
        if driver is not None:
            driver.quit()
        for p in processes:
            if p.poll() is None:
                p.terminate()
        for p in processes:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        if check.failures:
            err = os.path.join(work, "daemon.err")
            if os.path.exists(err):
                print("---- daemon log (last 40 lines)")
                print("".join(open(err).readlines()[-40:]))
        shutil.rmtree(work, ignore_errors=True)

    if check.failures:
        print("%d check(s) failed" % len(check.failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
