"""Helpers for the Prometheus / remote-write end-to-end tests: the real Prometheus server
(/usr/bin/prometheus) on loopback with a temp storage dir, its HTTP query API, and the
daemon's /metrics endpoint."""
import collections
import json
import os
import time
import urllib.parse
import urllib.request

import pytest

from conftest import Proc, free_port

PROMETHEUS = "/usr/bin/prometheus"


def need_prometheus():
    if not os.access(PROMETHEUS, os.X_OK):
        pytest.skip("the prometheus package (/usr/bin/prometheus) is not installed")


class PromServer(Proc):
    """Prometheus with --web.enable-remote-write-receiver; scrapes `target` (host:port) every
    second when given. Restartable on the same port and storage (stop() then start())."""

    def __init__(self, tmpdir, target=None, port=None):
        need_prometheus()
        self.dir = tmpdir
        self.port = port or free_port()
        self.storage = os.path.join(tmpdir, "tsdb")
        self.cfg = os.path.join(tmpdir, "prometheus.yml")
        with open(self.cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n")
            if target:
                f.write("scrape_configs:\n  - job_name: dynolog\n    static_configs:\n"
                        f"      - targets: ['{target}']\n")
        self.runs = 0
        self.start()

    def start(self):
        self.runs += 1
        argv = [PROMETHEUS, f"--config.file={self.cfg}", f"--storage.tsdb.path={self.storage}",
                f"--web.listen-address=127.0.0.1:{self.port}", "--web.enable-remote-write-receiver",
                "--storage.tsdb.retention.time=1d"]
        super().__init__(argv, env=dict(os.environ), logname=f"prometheus{self.runs}", tmpdir=self.dir)
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self.p.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("prometheus did not become ready:\n" + self.log()[-3000:])
            time.sleep(0.1)

    @property
    def write_url(self):
        return f"http://127.0.0.1:{self.port}/api/v1/write"

    def query(self, q, at=None):
        args = {"query": q}
        if at is not None:
            args["time"] = f"{at:.3f}"
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(args)
        with urllib.request.urlopen(url, timeout=10) as r:
            doc = json.load(r)
        assert doc["status"] == "success", doc
        return doc["data"]["result"]

    def wait_query(self, q, pred=lambda res: bool(res), timeout=60.0):
        deadline = time.monotonic() + timeout
        res = None
        while time.monotonic() < deadline:
            res = self.query(q)
            if pred(res):
                return res
            time.sleep(0.25)
        raise AssertionError(f"query {q!r} never satisfied; last result {res}\n" + self.log()[-2000:])


def scrape(port, path="/metrics", method="GET", timeout=10):
    """(status, headers, body text) of one request to the daemon's Prometheus endpoint."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def samples(text):
    """{(name, frozenset(labels.items())): value} via prometheus_client's text parser."""
    from prometheus_client.parser import text_string_to_metric_families
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def kernel_truth(recs):
    """Per kernel name: total duration and count of the simulator's ground truth."""
    tot = collections.Counter()
    cnt = collections.Counter()
    for r in recs:
        if r["kind"] == "Kernel":
            tot[r["name"]] += r["end"] - r["start"]
            cnt[r["name"]] += 1
    return tot, cnt
