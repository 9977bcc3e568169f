#!/usr/bin/env python3
"""Browser tests of pstrain's web pages, in a real headless Chromium.

  dashboard  starts a local cluster (`pstrain local --dashboard_port=P`),
             opens the coordinator's dashboard through chromedriver (the
             WebDriver protocol, spoken here with the standard library),
             checks that the node table lists every process as alive,
             that the loss and AUC charts have points and that the
             checkpoint history lists the checkpoints taken, and saves a
             screenshot (OUT/dashboard.png) of the whole page.
  plot       writes a metrics file with a short real job, renders it with
             `pstrain plot --png` and checks the page and the PNG.
  finished   runs a short job into a folder (metrics file, checkpoints),
             serves it with `pstrain dashboard --job_dir`, and checks that
             the same dashboard page shows the job as finished, its curves
             over steps, its summary and its checkpoints (OUT/finished.png).

Exit codes: 0 passed, 1 failed, 77 skipped (no chromium / chromedriver).
Every step has a deadline; the whole test stays under --time-limit.
"""
import argparse
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

SKIP = 77


class Failure(Exception):
    pass


def log(msg):
    print(f"[browser_test {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def find_program(env, names):
    value = os.environ.get(env)
    if value:
        return value if os.access(value, os.X_OK) else None
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, timeout=10):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            return json.loads(res.read() or b"null")
    except urllib.error.HTTPError as e:
        raise Failure(f"{method} {url}: HTTP {e.code}: {e.read()[:500]!r}")


class Deadline:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()

    def check(self, what):
        if self.left() <= 0:
            raise Failure(f"time limit reached while {what}")


def wait_for(deadline, what, probe, interval=0.25, limit=None):
    """Calls probe() until it returns a true value; returns it."""
    end = time.monotonic() + (limit if limit is not None else deadline.left())
    last_error = None
    while time.monotonic() < min(end, deadline.end):
        try:
            value = probe()
            if value:
                return value
        except (OSError, ValueError, Failure) as e:
            last_error = e
        time.sleep(interval)
    raise Failure(f"timed out waiting for {what}" + (f" (last error: {last_error})" if last_error else ""))


class Cluster:
    """`pstrain local` with a dashboard, in its own process group."""

    def __init__(self, bin_dir, work, extra, time_limit):
        self.port = free_port()
        self.log_path = os.path.join(work, "launcher.log")
        self.metrics = os.path.join(work, "metrics.jsonl")
        args = [os.path.join(bin_dir, "pstrain"), "local", "--servers=2", "--workers=2",
                "--model=lr", f"--dashboard_port={self.port}",
                f"--train_data={work}/train.tsv", f"--eval_data={work}/eval.tsv",
                f"--metrics_out={self.metrics}", "--log_every_secs=1",
                "--heartbeat_interval=0.5", f"--timeout={int(time_limit)}"] + extra
        self.log_file = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdout=self.log_file, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}/"

    def state(self):
        return http("GET", self.url + "api/state", timeout=3)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # the launcher stops its children
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log_file.close()

    def log_tail(self, lines=40):
        with open(self.log_path) as f:
            return "".join(f.readlines()[-lines:])


def make_data(bin_dir, work, rows, eval_rows):
    gen = os.path.join(bin_dir, "pstrain")
    for out, n, first in ((f"{work}/train.tsv", rows, 0), (f"{work}/eval.tsv", eval_rows, rows)):
        subprocess.run([gen, "gen", f"--rows={n}", f"--first_row={first}", "--seed=1",
                        f"--out={out}"], check=True, stdout=subprocess.DEVNULL, timeout=60)


class WebDriver:
    """The few WebDriver commands this test needs, against chromedriver."""

    def __init__(self, chromedriver, chromium, work, deadline):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(work, "chromedriver.log"), "w")
        self.proc = subprocess.Popen([chromedriver, f"--port={self.port}"], stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.session = None
        wait_for(deadline, "chromedriver", lambda: http("GET", self.base + "/status", timeout=2)
                 ["value"]["ready"], limit=15)
        profile = os.path.join(work, "chromium-profile")
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                         "--no-first-run", "--disable-background-networking",
                         "--disable-component-update", "--disable-sync",
                         "--disable-dev-shm-usage", "--window-size=1400,1900",
                         f"--user-data-dir={profile}"],
            },
        }}}
        reply = http("POST", self.base + "/session", caps, timeout=max(5, min(40, deadline.left())))
        self.session = reply["value"]["sessionId"]
        self.url = f"{self.base}/session/{self.session}"

    def go(self, url):
        http("POST", self.url + "/url", {"url": url}, timeout=20)

    def run(self, script):
        return http("POST", self.url + "/execute/sync", {"script": script, "args": []})["value"]

    def screenshot(self, path):
        png = base64.b64decode(http("GET", self.url + "/screenshot", timeout=20)["value"])
        with open(path, "wb") as f:
            f.write(png)
        return len(png)

    def close(self):
        try:
            if self.session:
                http("DELETE", self.url, timeout=10)
        except (OSError, Failure):
            pass
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


PAGE_PROBE = """
const rows = Array.from(document.querySelectorAll('#nodes tbody tr'));
return {
  updates: window.pstrainDashboard ? window.pstrainDashboard.updates : 0,
  nodes: rows.map(r => [r.dataset.role, Number(r.dataset.rank), r.dataset.state]),
  loss_points: Number(document.getElementById('chart-loss').dataset.points || 0),
  loss_series: Number(document.getElementById('chart-loss').dataset.series || 0),
  loss_canvas: !!document.querySelector('#chart-loss canvas'),
  auc_points: Number(document.getElementById('chart-auc').dataset.points || 0),
  checkpoints: document.querySelectorAll('#checkpoints tbody tr').length,
  job: document.getElementById('job-state').textContent,
};
"""


def test_dashboard(args, work, deadline, chromium, chromedriver):
    make_data(args.bin_dir, work, 20000, 2000)
    # Many epochs: the job outlives the test, which stops it.
    cluster = Cluster(args.bin_dir, work, ["--epochs=1000", "--batch_size=256",
                                           "--eval_every_steps=20", f"--checkpoint_dir={work}/ckpt",
                                           "--checkpoint_every_secs=3"], args.time_limit + 30)
    driver = None
    try:
        log(f"cluster starting, dashboard {cluster.url}")

        def cluster_ready():
            if cluster.proc.poll() is not None:
                raise Failure("pstrain local exited early:\n" + cluster.log_tail())
            s = cluster.state()
            alive = sum(n["state"] == "alive" for n in s["nodes"])
            return s if alive == 5 and any(x["v"] for x in s["series"]["loss"]) else None

        wait_for(deadline, "every node alive with loss points", cluster_ready, limit=30)
        log("cluster running; starting chromedriver + chromium")
        driver = WebDriver(chromedriver, chromium, work, deadline)
        driver.go(cluster.url)
        log("dashboard loaded; waiting for its charts")
        expected = {("coordinator", 0), ("server", 0), ("server", 1), ("worker", 0), ("worker", 1)}

        def page_ready():
            p = driver.run(PAGE_PROBE)
            listed = {(n[0], n[1]) for n in p["nodes"]}
            all_alive = all(n[2] == "alive" for n in p["nodes"])
            ok = (listed == expected and all_alive and p["loss_points"] > 0 and p["loss_canvas"]
                  and p["loss_series"] == 2 and p["auc_points"] > 0 and p["updates"] >= 2
                  and p["checkpoints"] > 0)
            page_ready.last = p
            return p if ok else None

        page_ready.last = None
        try:
            p = wait_for(deadline, "the dashboard to list every node and draw the charts",
                         page_ready, interval=0.5, limit=25)
        except Failure:
            raise Failure(f"page state: {json.dumps(page_ready.last)}")
        os.makedirs(args.out_dir, exist_ok=True)
        shot = os.path.join(args.out_dir, "dashboard.png")
        size = driver.screenshot(shot)
        log(f"page: {len(p['nodes'])} nodes {sorted(expected)} all alive, job {p['job']}, "
            f"loss chart {p['loss_points']} points in {p['loss_series']} series, "
            f"AUC chart {p['auc_points']} points, {p['checkpoints']} checkpoints, "
            f"{p['updates']} updates")
        log(f"screenshot: {shot} ({size} bytes)")
        if size < 10000:
            raise Failure("the screenshot is suspiciously small")
    finally:
        if driver:
            driver.close()
        cluster.stop()


def test_plot(args, work, deadline, chromium, chromedriver):
    make_data(args.bin_dir, work, 30000, 3000)
    cluster = Cluster(args.bin_dir, work, ["--epochs=4", "--batch_size=512",
                                           "--eval_every_steps=40", "--log_every_secs=0.1"],
                      args.time_limit)
    code = cluster.proc.wait(timeout=max(1, deadline.left() - 20))
    cluster.log_file.close()
    if code != 0:
        raise Failure(f"the job failed ({code}):\n" + cluster.log_tail())
    os.makedirs(args.out_dir, exist_ok=True)
    html = os.path.join(args.out_dir, "curves.html")
    png = os.path.join(args.out_dir, "curves.png")
    env = dict(os.environ, PSTRAIN_CHROMIUM=chromium)
    r = subprocess.run([os.path.join(args.bin_dir, "pstrain"), "plot", cluster.metrics,
                        f"--out={html}", f"--png={png}", "--names=lr 2x2"], env=env,
                       capture_output=True, text=True, timeout=max(1, deadline.left()))
    if r.returncode != 0:
        raise Failure(f"pstrain plot failed: {r.stdout}{r.stderr}")
    with open(html) as f:
        page = f.read()
    if 'src="http' in page or "<link" in page:
        raise Failure("the page loads something from outside")
    if '"loss":[' not in page or '"loss":[]' in page or '"auc":[]' in page or "uPlot" not in page:
        raise Failure("the page lacks its curves or its chart library")
    size = os.path.getsize(png)
    log(f"plot: {html} ({len(page)} bytes), {png} ({size} bytes)")
    if size < 10000:
        raise Failure("the PNG is suspiciously small")


FINISHED_PROBE = """
const chart = id => Number(document.getElementById(id).dataset.points || 0);
const axis = document.querySelector('#chart-loss .u-axis:not(.u-off)');
return {
  updates: window.pstrainDashboard ? window.pstrainDashboard.updates : 0,
  job: document.getElementById('job-state').textContent,
  info: document.getElementById('job-info').textContent,
  loss_points: chart('chart-loss'),
  sps_points: chart('chart-sps'),
  auc_points: chart('chart-auc'),
  loss_canvas: !!document.querySelector('#chart-loss canvas'),
  x_label: window.pstrainDashboard && window.pstrainDashboard.state ?
      window.pstrainDashboard.state.x_label : null,
  labels: Array.from(document.querySelectorAll('#chart-loss .u-label')).map(e => e.textContent),
  summary_rows: document.querySelectorAll('#summary tbody tr').length,
  summary_hidden: document.getElementById('summary-section').hidden,
  checkpoints: document.querySelectorAll('#checkpoints tbody tr').length,
  no_nodes: !document.getElementById('no-nodes').hidden,
  rss_hidden: document.getElementById('chart-rss').hidden,
};
"""


def test_finished(args, work, deadline, chromium, chromedriver):
    make_data(args.bin_dir, work, 20000, 2000)
    job = os.path.join(work, "job")
    os.makedirs(job)
    cluster = Cluster(args.bin_dir, work, ["--epochs=3", "--batch_size=256",
                                           "--eval_every_steps=20", "--log_every_secs=0.1",
                                           f"--metrics_out={job}/metrics.jsonl",
                                           f"--checkpoint_dir={job}/ckpt",
                                           "--checkpoint_every_secs=1"], args.time_limit)
    code = cluster.proc.wait(timeout=max(1, deadline.left() - 30))
    cluster.log_file.close()
    if code != 0:
        raise Failure(f"the job failed ({code}):\n" + cluster.log_tail())
    port = free_port()
    log_path = os.path.join(work, "dashboard.log")
    log_file = open(log_path, "w")
    server = subprocess.Popen([os.path.join(args.bin_dir, "pstrain"), "dashboard",
                               f"--job_dir={job}", f"--port={port}"], stdout=log_file,
                              stderr=subprocess.STDOUT, start_new_session=True)
    driver = None
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_for(deadline, "pstrain dashboard", lambda: http("GET", url + "api/state", timeout=2),
                 limit=10)
        driver = WebDriver(chromedriver, chromium, work, deadline)
        driver.go(url)

        def page_ready():
            p = driver.run(FINISHED_PROBE)
            page_ready.last = p
            ok = (p["job"] == "finished" and p["loss_points"] > 0 and p["sps_points"] > 0
                  and p["auc_points"] > 0 and p["loss_canvas"] and p["x_label"] == "step"
                  and "step" in p["labels"] and p["summary_rows"] > 5
                  and not p["summary_hidden"] and p["checkpoints"] > 0 and p["no_nodes"]
                  and p["rss_hidden"] and "metrics.jsonl" in p["info"])
            return p if ok else None

        page_ready.last = None
        try:
            p = wait_for(deadline, "the finished job's dashboard", page_ready, interval=0.5,
                         limit=25)
        except Failure:
            raise Failure(f"page state: {json.dumps(page_ready.last)}")
        os.makedirs(args.out_dir, exist_ok=True)
        shot = os.path.join(args.out_dir, "finished.png")
        size = driver.screenshot(shot)
        log(f"finished job: {p['info']}; loss {p['loss_points']} points over steps, AUC "
            f"{p['auc_points']}, {p['summary_rows']} summary rows, {p['checkpoints']} "
            f"checkpoints; screenshot {shot} ({size} bytes)")
    finally:
        if driver:
            driver.close()
        if server.poll() is None:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        log_file.close()
    if server.returncode != 0:
        with open(log_path) as f:
            raise Failure(f"pstrain dashboard exited {server.returncode}: {f.read()[-2000:]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("test", choices=["dashboard", "plot", "finished"])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--out-dir", required=True, help="where screenshots go (the build tree)")
    ap.add_argument("--time-limit", type=float, default=55)
    args = ap.parse_args()
    chromium = find_program("PSTRAIN_CHROMIUM", ["chromium", "chromium-browser", "google-chrome"])
    chromedriver = find_program("PSTRAIN_CHROMEDRIVER", ["chromedriver"])
    if not chromium or (args.test != "plot" and not chromedriver):
        print(f"skipped: needs chromium and chromedriver (found {chromium}, {chromedriver}); "
              "install-deps installs them with CI=true or PSTRAIN_FULL_DEPS=1")
        return SKIP
    deadline = Deadline(args.time_limit)
    work = tempfile.mkdtemp(prefix=f"pstrain-browser-{args.test}-")
    started = time.monotonic()
    try:
        {"dashboard": test_dashboard, "plot": test_plot, "finished": test_finished}[args.test](
            args, work, deadline, chromium, chromedriver)
    except (Failure, subprocess.SubprocessError, OSError) as e:
        log(f"FAILED after {time.monotonic() - started:.1f}s: {e}")
        log(f"work folder kept: {work}")
        return 1
    log(f"passed in {time.monotonic() - started:.1f}s")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
