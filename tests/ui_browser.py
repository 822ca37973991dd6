"""The UI's browser tests: Debian's chromium driven by selenium through Debian's chromedriver (no
browser download), headless, with a fresh profile, at 1280x800; `cellctl ui` run as the user runs
it, its URL read from what it prints; screenshots written as test artifacts (never committed)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from cellbed.ui import assets

REPO = Path(__file__).resolve().parents[1]
CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1280,800"]
ARTIFACTS_ENV = "CELLBED_TEST_ARTIFACTS"


def missing() -> str:
    """Why the browser tests cannot run here, or ""."""
    for p in (CHROMIUM, DRIVER):
        if not os.path.exists(p):
            return f"{p} is not installed (./cellbed.sh setup installs chromium and chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    if assets.missing():
        return f"the UI's chart library is not installed ({', '.join(assets.missing())}: ./cellbed.sh setup)"
    return ""


def chromium(profile: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    o = Options()
    o.binary_location = CHROMIUM
    for f in FLAGS + [f"--user-data-dir={profile}"]:
        o.add_argument(f)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(DRIVER), options=o)
    viewport(d, 1280, 800)
    return d


def viewport(driver, w: int, h: int) -> None:
    """The page's viewport exactly w x h CSS pixels (a headless window's size includes no viewport promise)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": w, "height": h, "deviceScaleFactor": 1,
                                                                  "mobile": False})


def wait(driver, fn, timeout: float, what: str):
    """Until fn(driver) is truthy (selenium's WebDriverWait, checked every 0.1 s); fails naming *what*."""
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(fn, message=f"timed out waiting for {what}")


def artifacts() -> Path:
    d = Path(os.environ.get(ARTIFACTS_ENV) or REPO / "build" / "test-artifacts" / "ui")
    d.mkdir(parents=True, exist_ok=True)
    return d


def screenshot(driver, name: str, full: bool = False) -> Path:
    """A PNG of the page (at 1280x800, or the whole page's height with *full*) in the artifacts."""
    p = artifacts() / f"{name}.png"
    if full:
        driver.execute_script("window.scrollTo(0, 0)")
        h = driver.execute_script("return document.documentElement.scrollHeight")
        viewport(driver, 1280, max(800, min(int(h) + 40, 8000)))
    driver.save_screenshot(str(p))
    if full:
        viewport(driver, 1280, 800)
    return p


def console_errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


class UiProcess:
    """`cellctl ui ARGS --listen 127.0.0.1:0` as a child process; .url is the URL it printed."""

    def __init__(self, args: list[str], timeout_s: float = 60) -> None:
        # SIGINT as at a terminal: a child inherits an ignored signal, and pytest-xdist's workers ignore
        # SIGINT, so under two workers `cellctl ui` started with Ctrl-C ignored, never saw stop()'s
        # SIGINT and was killed after 20 s (both two-lane runs of tier 2; its SigIgn showed it).
        # coreutils' env resets it, then execs Python (same pid). A preexec_fn would run Python code in
        # the forked child, which CPython documents as unsafe when the parent has threads (the pumps
        # of another UiProcess still running, for one).
        self.proc = subprocess.Popen(["env", "--default-signal=INT", sys.executable, "-m", "cellbed.cli.main",
                                      "ui", "--listen", "127.0.0.1:0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                                     stdin=subprocess.DEVNULL)
        self.lines: list[str] = []
        self.errors: list[str] = []      # stderr, read as it comes: a full pipe would block the process
        self.url = ""
        found = threading.Event()

        def pump():
            for line in self.proc.stdout:
                self.lines.append(line.rstrip("\n"))
                if line.strip().startswith("open http"):
                    self.url = line.strip().split(" ", 1)[1]
                    found.set()
            found.set()

        self._stacks = threading.Event()       # a faulthandler dump reached stderr (see stop)

        def pump_errors():
            for line in self.proc.stderr:
                self.errors.append(line.rstrip("\n"))
                if line.startswith(("Thread 0x", "Current thread 0x")):
                    self._stacks.set()
        threading.Thread(target=pump, daemon=True).start()
        self._err_pump = threading.Thread(target=pump_errors, daemon=True)
        self._err_pump.start()
        if not found.wait(timeout_s) or not self.url:
            self.stop()
            raise RuntimeError(f"cellctl ui printed no URL in {timeout_s} s: {self.lines} {self.errors[-20:]}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                # Why it did not stop: its signal masks, and every thread's stack (cellctl prints them
                # on SIGUSR1) into self.errors, before it is killed.
                try:
                    with open(f"/proc/{self.proc.pid}/status") as f:
                        self.errors += [line.strip() for line in f
                                        if line.startswith(("SigBlk", "SigIgn", "SigCgt", "State", "Threads"))]
                    self.proc.send_signal(signal.SIGUSR1)
                    self._stacks.wait(5)          # until the dump's first line is read
                except FileNotFoundError:         # it ended meanwhile
                    pass
                self.proc.kill()
                self.proc.wait()
        self._err_pump.join(5)           # the rest of its stderr, to its end
        return self.proc.returncode

    def __enter__(self) -> "UiProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def fresh_profile(tmp: Path) -> Path:
    p = tmp / f"chromium-profile-{time.monotonic_ns()}"
    shutil.rmtree(p, ignore_errors=True)
    p.mkdir(parents=True)
    return p
