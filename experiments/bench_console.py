"""The web console in a real browser, on a live ring: what it shows, and how soon.

A ring of N node processes (`ring up`, mutual TLS) and `cqengine console` as a process of
its own; Debian's headless Chromium, driven by Selenium through chromium-driver, opens the
page. Measured, in the page's own clock (performance.now()):

- page load to the ring drawn: from navigation to the first look at the ring drawn, then
  until every one of the N nodes is drawn up;
- publish to alert shown: a query subscribed in the page's box, then documents published
  in the page's box, one at a time: from the click to the alert in the page's list; the
  alerts shown are checked against the brute-force matcher (those that match, and only
  those, each once);
- a node killed (SIGKILL): seconds until the page draws it down.

With `--traffic S`, documents are published from a Python client for S seconds before the
screenshot, so its charts show the ring at work. The screenshot is taken before the kill.

    python experiments/bench_console.py [--nodes 8] [--docs 10] [--traffic 10]
        [--screenshot docs/console.png] [--token SECRET] [--out experiments/results]
        [--name bench_console]

Writes experiments/results/NAME.json.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from cqengine.demo import sample_corpus
from cqengine.evaluation.setup.matcher import document_terms, matches
from cqengine.live.client import Client
from cqengine.live.ports import free_ports
from cqengine.live.ring.commands import ring_down, ring_up
from cqengine.text.analysis import analyze

RESULTS = Path(__file__).resolve().parent / "results"
DOCS = Path(__file__).resolve().parent.parent / "docs"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
QUERY = "levee hurricane"


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def have_browser() -> str | None:
    """Why there is no browser to drive (None: there is)."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        return f"{' and '.join(missing)} missing: apt-get install chromium chromium-driver"
    return None


def browser(profile: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must download nothing
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in a container: Chromium's sandbox needs user namespaces
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        # the machine's network is closed: no update, sync or telemetry connections
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1420,980",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def start_console(ring_path: Path, port: int, log: Path, args: list[str] = ()):
    """`cqengine console` as a process of its own, once it answers."""
    command = [sys.executable, "-m", "cqengine", "console", "--port", str(port)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*command, "--ring-file", str(ring_path), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/static/console.css", timeout=1):
                return proc
        except urllib.error.HTTPError:  # it answers (401: it wants its token)
            return proc
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                stop(proc)
                tail = log.read_text()[-500:]
                raise RuntimeError(f"the console did not start: {tail}") from None
            time.sleep(0.1)


def stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def wait(driver, what: str, condition, timeout: float = 20.0):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(
        lambda d: condition(d), message=f"not within {timeout:g} s: {what}"
    )


def count(driver, selector: str) -> int:
    return int(driver.execute_script(f"return document.querySelectorAll({selector!r}).length"))


def documents(n: int, rng: random.Random) -> list[tuple[str, str]]:
    """n texts, about half of them holding both words of QUERY."""
    texts = [d.text[:400] for d in sample_corpus()]
    out = []
    for i in range(n):
        text = rng.choice(texts)
        if i % 2 == 0:
            text = f"The levee held as the hurricane passed. {text}"
        out.append((f"CONSOLE-{i:03d}", text))
    return out


def traffic(ring, seconds: float, rng: random.Random) -> int:
    """Documents published for `seconds`, from a client, to a few subscriptions."""
    corpus = sample_corpus()
    credentials = ring.credentials()
    with Client(ring.addresses()[0], credentials=credentials) as c:
        for d in corpus[:20]:
            words = sorted(document_terms(d.text, d.title))
            c.subscribe(" ".join(rng.sample(words, 2)))
        end, sent = time.monotonic() + seconds, 0
        while time.monotonic() < end:
            batch = rng.sample(corpus, 8)
            c.publish_many(
                [(f"T{sent + i}-{d.docno}", d.text, d.title) for i, d in enumerate(batch)]
            )
            sent += len(batch)
            time.sleep(0.2)  # a steady trickle to draw, not a load test
    return sent


def run(args) -> dict:
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="bench-console-") as tmp:
        tmp = Path(tmp)
        say(f"starting {args.nodes} nodes ...")
        ring = ring_up(args.nodes, tmp / "ring.json", out=io.StringIO())
        console = driver = None
        try:
            port = free_ports(1, exclude=[e.port for e in ring.nodes])[0]
            token = ["--token", args.token] if args.token else []
            console = start_console(ring.path, port, tmp / "console.log", token)
            driver = browser(tmp / "profile")
            say("opening the page")
            driver.get(f"http://127.0.0.1:{port}/" + (f"?token={args.token}" if args.token else ""))
            wait(driver, "the ring drawn", lambda d: d.execute_script("return consoleTimes.drawn"))
            first_drawn = driver.execute_script("return consoleTimes.drawn")
            wait(
                driver, f"{args.nodes} nodes drawn up", lambda d: count(d, ".node.up") == args.nodes
            )
            all_drawn = driver.execute_script("return performance.now()")
            driver.find_element("id", "query").send_keys(QUERY)
            driver.find_element("id", "subscribe").click()
            wait(
                driver,
                "the subscription made",
                lambda d: d.find_element("id", "subscribed").get_attribute("data-subscription"),
            )
            docs = documents(args.docs, rng)
            for docno, text in docs:
                driver.execute_script(
                    "document.getElementById('docno').value = arguments[0];"
                    "document.getElementById('text').value = arguments[1];",
                    docno,
                    text,
                )
                driver.find_element("id", "publish").click()
                wait(
                    driver,
                    f"{docno} accepted",
                    lambda d, n=docno: (
                        d.find_element("id", "published").get_attribute("data-docno") == n
                    ),
                )
            want = {
                docno
                for (_, docno) in matches(
                    {1: analyze(QUERY)}, {n: document_terms(t) for n, t in docs}
                )
            }
            wait(
                driver,
                f"the alerts of {sorted(want)}",
                lambda d: count(d, "#alerts li") >= len(want),
            )
            if args.traffic:
                say(f"publishing for {args.traffic:g} s, for the charts")
                traffic(ring, args.traffic, rng)
            shown = driver.execute_script(
                "return [...document.querySelectorAll('#alerts li')].map(li => li.dataset.docno)"
            )
            lags = driver.execute_script("return consoleTimes.lags")
            if args.screenshot:
                driver.save_screenshot(str(args.screenshot))
                say(f"wrote {args.screenshot}")
            victim = ring.nodes[-1]
            os.kill(victim.pid, signal.SIGKILL)
            killed = time.monotonic()
            wait(
                driver,
                f"{victim.address} drawn down",
                lambda d: count(d, f'.node.down[data-address="{victim.address}"]') == 1,
            )
            down_after = time.monotonic() - killed
        finally:
            if driver is not None:
                driver.quit()
            if console is not None:
                stop(console)
            ring_down(ring.path, out=io.StringIO())
    published = {docno for docno, _ in docs}
    shown_ours = [d for d in shown if d in published]
    lags = sorted(lags)
    return {
        "benchmark": "bench_console",
        "nodes": args.nodes,
        "documents": len(docs),
        "page_load_to_ring_drawn_ms": first_drawn,
        "page_load_to_every_node_drawn_ms": all_drawn,
        "publish_to_alert_shown_ms": {
            "p50": lags[len(lags) // 2] if lags else None,
            "max": lags[-1] if lags else None,
            "all": lags,
        },
        "alerts_expected": sorted(want),
        "alerts_shown": sorted(shown_ours),
        "alerts_exact": sorted(shown_ours) == sorted(want),
        "node_killed_drawn_down_s": down_after,
        "screenshot": str(args.screenshot or ""),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=8)
    p.add_argument("--docs", type=int, default=10, help="documents published in the page")
    p.add_argument("--traffic", type=float, default=10.0, help="s of publishing before the shot")
    p.add_argument("--screenshot", type=Path, default=DOCS / "console.png")
    p.add_argument("--token", help="run the console with this token (the page is opened with it)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--name", default="bench_console", help="the results file: NAME.json")
    args = p.parse_args(argv)
    why = have_browser()
    if why is not None:
        say(f"bench_console: {why}")
        return 2
    result = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{args.name}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    lag = result["publish_to_alert_shown_ms"]
    say(
        f"ring drawn {result['page_load_to_ring_drawn_ms']:.0f} ms after navigation, every node "
        f"at {result['page_load_to_every_node_drawn_ms']:.0f} ms; publish to alert shown "
        f"p50 {lag['p50']:.0f} ms, max {lag['max']:.0f} ms; alerts exact: "
        f"{result['alerts_exact']}; a killed node drawn down after "
        f"{result['node_killed_drawn_down_s']:.1f} s"
    )
    print(f"wrote {path}")
    return 0 if result["alerts_exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
