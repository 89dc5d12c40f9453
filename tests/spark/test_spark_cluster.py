"""`cqengine prep` and `cqengine workload` on a real standalone Spark cluster: a master and a
worker started on loopback with the `spark-class` pyspark ships, the jobs submitted with
`--master spark://...` as a user would, their outputs equal to local mode's.

The command lines run in the cluster's directory with relative paths: an executor's working
directory is the worker's, not the driver's, so a relative path handed to the executors
would not be found (as prep's inputs once were).

Time matters (two cores, a suite on a budget): the cluster boots while local mode does its
part, and the two jobs run at once, one core each.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.waiting import eventually

from cqengine.live.ports import free_ports
from cqengine.spark.prep import discover, run_prep
from cqengine.spark.workload_job import run_workload
from cqengine.text.corpus import write_corpus_files

BOOT_TIMEOUT = 120  # JVMs booting on a loaded 2-core machine
JOB_TIMEOUT = 300
WORKLOAD = dict(kind="inverskew", queries=60, mean_size=3.0, seed=7)


def log_tail(path: Path, lines: int = 15) -> str:
    text = path.read_text(errors="replace") if path.exists() else "(no log)"
    return f"--- {path.name}:\n" + "\n".join(text.splitlines()[-lines:])


def start(args: list[str], cwd: Path, env: dict, log: Path | None = None) -> subprocess.Popen:
    """A process in a group of its own (so stop() reaches its children too); its output
    goes to `log`, or to pipes for communicate()."""
    out = open(log, "wb") if log else subprocess.PIPE
    try:
        return subprocess.Popen(
            args,
            stdout=out,
            stderr=subprocess.STDOUT if log else subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            text=log is None,
            start_new_session=True,
        )
    finally:
        if log:
            out.close()


def stop(proc: subprocess.Popen) -> None:
    """The process and its group (a worker's executors), TERM then KILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=15)
            return
        except subprocess.TimeoutExpired:
            pass


@dataclass
class Cluster:
    url: str
    ui: str
    root: Path
    env: dict[str, str]
    daemons: dict[str, tuple[subprocess.Popen, Path]] = field(default_factory=dict)
    up: bool = False

    def state(self) -> dict | None:
        try:
            with urllib.request.urlopen(f"{self.ui}/json/", timeout=5) as r:
                return json.load(r)
        except OSError:  # not listening yet
            return None

    def ready(self) -> None:
        """Wait until the master lists the worker ALIVE; a daemon that dies fails at once."""

        def one_alive_worker():
            for name, (proc, log) in self.daemons.items():
                assert proc.poll() is None, f"the {name} exited\n{log_tail(log)}"
            s = self.state()
            return s and s["status"] == "ALIVE" and [w["state"] for w in s["workers"]] == ["ALIVE"]

        if not self.up:
            try:
                eventually(
                    one_alive_worker, BOOT_TIMEOUT, f"{self.ui}/json/ listing 1 ALIVE worker"
                )
            except AssertionError as e:
                logs = "\n".join(log_tail(log) for _, log in self.daemons.values())
                raise AssertionError(f"{e}\n{logs}") from None
            self.up = True

    def completed_apps(self) -> dict[str, dict]:
        return {a["id"]: a for a in (self.state() or {}).get("completedapps", [])}

    def run_all(self, *commands: list) -> list[dict]:
        """Run these command lines at once against this master, in the cluster's directory;
        each one's printed summary."""
        procs = [
            start(
                [sys.executable, "-m", "cqengine", *map(str, c), "--master", self.url],
                self.root,
                self.env,
            )
            for c in commands
        ]
        try:
            done = [p.communicate(timeout=JOB_TIMEOUT) for p in procs]
        finally:
            for p in procs:
                stop(p)
        for c, p, (_out, err) in zip(commands, procs, done):
            assert p.returncode == 0, f"{c[0]} failed:\n{err[-3000:]}"
        return [json.loads(out) for out, _ in done]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("spark-cluster")


@pytest.fixture(scope="module")
def cluster(root):
    """A master and one 2-core worker on loopback; they boot while local mode runs, and
    the test waits with `ready()`. Both are stopped however the tests end."""
    import pyspark

    spark_class = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
    port, ui_port = free_ports(2)  # two distinct ports
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",  # master, worker, executors and drivers on loopback
        "SPARK_LOCAL_DIRS": str(root / "local"),
        "SPARK_WORKER_DIR": str(root / "work"),
        "SPARK_LOG_DIR": str(root / "logs"),
        # every JVM here (daemons, drivers, executors) is short-lived and does little work:
        # without the optimizing JIT and with one GC thread, each costs about half the CPU
        "JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    }
    c = Cluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui_port}", root, env)
    master = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", port]
    worker = ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--webui-port", 0]
    # an application gets one core unless it asks for more, so both jobs can run at once
    master_env = {**env, "SPARK_MASTER_OPTS": "-Dspark.deploy.defaultCores=1"}
    try:
        # both at once: the worker retries until the master listens
        for name, args, e in (
            ("master", master + ["--webui-port", ui_port], master_env),
            ("worker", worker + ["--cores", 2, "--memory", "2g", c.url], env),
        ):
            log = root / f"{name}.log"
            c.daemons[name] = start([spark_class, *map(str, args)], root, e, log), log
        yield c
    finally:
        for proc, _ in reversed(c.daemons.values()):
            stop(proc)


@pytest.fixture(scope="module")
def local(spark, cluster, root):
    """A tiny corpus, and prep and a workload of it in local mode (the suite's Spark); after
    `cluster`, so the cluster boots meanwhile."""
    write_corpus_files(root / "corpus", 40, 2, vocab_size=500, mean_terms=20)
    run_prep(spark, [root / "corpus"], root / "prep-local", quiet=True)
    run_workload(
        spark, root / "prep-local", out=root / "wl-local", partitions=2, quiet=True, **WORKLOAD
    )
    return root / "prep-local", root / "wl-local"


def rows(path: Path, key: str) -> list[dict]:
    """A Parquet directory's rows in `key` order (Spark writes parts in no set order)."""
    return sorted(pq.read_table(path).to_pylist(), key=lambda r: r[key])


def test_discover_gives_the_executors_absolute_paths(tmp_path, monkeypatch):
    (tmp_path / "in" / "sub").mkdir(parents=True)
    (tmp_path / "in" / "sub" / "a.txt").write_text("apple")
    monkeypatch.chdir(tmp_path)
    assert discover([Path("in")]) == [
        (str(tmp_path / "in" / "sub" / "a.txt"), "text", str(tmp_path / "in"))
    ]


def test_prep_and_workload_on_a_cluster_equal_local_mode(cluster, local, root):
    prep_local, wl_local = local
    cluster.ready()
    before = set(cluster.completed_apps())
    workload = [f"--{k.replace('_', '-')}={v}" for k, v in WORKLOAD.items()]
    prep, wl = cluster.run_all(
        ["prep", "--input", "corpus", "--out", "prep"],
        ["workload", "--stats", "prep-local", *workload, "--partitions=2", "--out=wl"],
    )

    # both ran on the cluster: the master finished two applications, each with an executor
    # on the worker (its directory), so neither can have run inside its driver
    apps = eventually(
        lambda: {k: a for k, a in cluster.completed_apps().items() if k not in before},
        10,
        f"the master at {cluster.ui} listing both applications as completed",
        holds=lambda new: len(new) == 2,
    )
    for app_id, app in apps.items():
        assert app["name"] == "cqengine" and app["state"] == "FINISHED", app
        assert list((root / "work").glob(f"{app_id}/*")), f"no executor of {app_id} on the worker"

    for name, key in (("documents.parquet", "docno"), ("terms.parquet", "term")):
        assert rows(root / "prep" / name, key) == rows(prep_local / name, key), name
    assert (root / "prep" / "stats.tsv").read_text() == (prep_local / "stats.tsv").read_text()
    want = json.loads((prep_local / "summary.json").read_text())
    assert prep == json.loads((root / "prep" / "summary.json").read_text())
    assert prep.pop("inputs") == ["corpus"] and want.pop("inputs") == [str(root / "corpus")]
    # the spread is summed in whatever order the partial aggregates arrive
    std = prep["unique_terms_per_document"].pop("std")
    assert std == pytest.approx(want["unique_terms_per_document"].pop("std"), rel=1e-12)
    assert prep == want and prep["documents"] == 40

    assert wl == json.loads((wl_local / "summary.json").read_text())
    assert wl == json.loads((root / "wl" / "summary.json").read_text())
    assert (root / "wl" / "queries.jsonl").read_text() == (wl_local / "queries.jsonl").read_text()
    queries = rows(root / "wl" / "queries.parquet", "query_id")
    assert queries == rows(wl_local / "queries.parquet", "query_id")
    assert [q["query_id"] for q in queries] == list(range(60))
