"""`cqengine demo`: the whole system, live, once per indexing strategy.

For each of RI, OI, MHI and SAP-MHI: start a ring of node processes on loopback (on
mutual TLS, the default), check lookups from every node against the true owners,
register a generated Skew workload through random nodes (a fifth of it queries with OR,
NOT and phrases), publish the bundled sample corpus, collect every alert from the
subscribers' streams and compare them with a brute-force matcher. Then print what each
strategy cost per document: candidates presented to resolution, announcement and
resolution bytes.
"""

from __future__ import annotations

import io
import random
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from chord.live.client import lookup
from chord.live.tls import Credentials
from chord.protocol.messages import to_ref
from chord.simulation.oracle import RingOracle
from cqengine.evaluation.setup.matcher import (
    document_frequencies,
    document_sequence,
    document_terms,
    match_queries,
    matches,
)
from cqengine.live.client import Client
from cqengine.live.ring.commands import ring_down, ring_up
from cqengine.live.ring.convergence import observe
from cqengine.text.trec import TrecDoc, iter_trec
from cqengine.text.workload import boolean_workload, generate_queries

SAMPLE = "sample.trec.gz"
# the bundled corpus is generated text (cqengine.text.corpus), so it may be shipped freely;
# tests/cli/test_demo.py checks it is what this recipe makes
SAMPLE_RECIPE = dict(n_docs=120, seed=7, vocab_size=2500, mean_terms=60.0)
STRATEGIES = ("ri", "oi", "mhi", "sap-mhi")


def sample_corpus() -> list[TrecDoc]:
    with resources.as_file(resources.files("cqengine") / "data" / SAMPLE) as path:
        return list(iter_trec(path))


@dataclass
class Outcome:
    strategy: str
    alerts: int
    expected: int
    correct: bool
    candidates: float
    announce_bytes: float
    resolution_bytes: float
    entries: list[int]


def check_lookups(
    addresses: list[str],
    r: int,
    rng: random.Random,
    credentials: Credentials | None,
    per_node: int = 10,
) -> bool:
    view = observe(addresses, r, credentials=credentials)
    oracle = RingOracle(to_ref(s.node) for s in view.states.values())
    keys = [rng.getrandbits(64) for _ in range(per_node)]
    wrong = sum(
        lookup(a, k, credentials=credentials)[0] != oracle.owner(k) for a in addresses for k in keys
    )
    print(
        f"  lookups: {len(addresses) * per_node - wrong} of {len(addresses) * per_node} from every "
        f"node found the true owner"
    )
    return wrong == 0


def wait_quiet(
    addresses: list[str], credentials: Credentials | None = None, timeout: float = 30.0
) -> None:
    """Until every confirmed match has been delivered, dropped or found repeated (a
    document its subscription had already), and nothing moves."""
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        stats = []
        for a in addresses:
            with Client(a, 5, credentials) as client:
                stats.append(client.stats())
        now = (
            sum(s.matches for s in stats),
            sum(s.alerts_delivered + s.alerts_dropped + s.alerts_repeated for s in stats),
        )
        if now == last and now[0] <= now[1]:
            return
        last = now
        time.sleep(0.3)


def drain(
    home: str, subs, credentials: Credentials | None = None, timeout: float = 0.5
) -> list[tuple[int, str]]:
    """The alerts waiting for these subscriptions of one home node, on one stream."""
    with Client(home, credentials=credentials) as client:
        return [(a.subscription_id, a.docno) for a in client.alerts(subs, timeout=timeout)]


def collect_alerts(
    subs, addresses: list[str], credentials: Credentials | None = None, attempts: int = 6
) -> list[tuple[int, str]]:
    """Every alert waiting on the subscribers' streams, once the ring is quiet.

    Each home node's subscriptions are read on one stream with a short deadline; one that
    runs out early leaves its alerts in the mailboxes, so this drains again until it holds
    as many alerts as the home nodes report delivered.
    """
    wait_quiet(addresses, credentials)
    expected = 0
    for a in addresses:
        with Client(a, 5, credentials) as client:
            expected += client.stats().alerts_delivered
    by_home: dict[tuple[str, int], list] = {}  # a stream per home key (one node may have two)
    for sub in subs:
        by_home.setdefault((sub.home, sub.home_id), []).append(sub)
    got: list[tuple[int, str]] = []
    with ThreadPoolExecutor(len(by_home) or 1) as pool:
        for _ in range(attempts):
            drained = pool.map(lambda k: drain(k[0], by_home[k], credentials), by_home)
            got += [pair for pairs in drained for pair in pairs]
            if len(got) >= expected:
                break
    return got


def run_strategy(
    strategy: str,
    nodes: int,
    queries: list[str],
    boolean: list[str],
    docs: list[TrecDoc],
    files: dict[str, Path],
    rng: random.Random,
) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="cqengine-demo-") as tmp:
        ring_path = Path(tmp) / "ring.json"
        engine = [
            "--strategy",
            strategy,
            "--stats",
            str(files["stats"]),
            "--popular",
            str(files["popular"]),
        ]
        ring = ring_up(nodes, ring_path, out=io.StringIO(), engine=engine)
        try:
            addresses, credentials = ring.addresses(), ring.credentials()
            print(f"{strategy.upper()}: {nodes} nodes up, on mutual TLS")
            lookups_ok = check_lookups(addresses, ring.r, rng, credentials)
            clients = {a: Client(a, credentials=credentials) for a in addresses}
            subs = [clients[rng.choice(addresses)].subscribe(q) for q in queries]
            booleans = [clients[rng.choice(addresses)].subscribe(q) for q in boolean]
            for d in docs:
                clients[rng.choice(addresses)].publish(d.docno, d.text, d.title)
            got = collect_alerts(subs + booleans, addresses, credentials)
            stats = [c.stats() for c in clients.values()]
            for c in clients.values():
                c.close()
        finally:
            ring_down(ring_path, out=io.StringIO())
    want = matches(
        {s.subscription_id: s.terms for s in subs},
        {d.docno: document_terms(d.text, d.title) for d in docs},
    )
    sequences = [document_sequence(d.text, d.title) for d in docs]
    want |= {
        (booleans[i].subscription_id, d.docno)
        for d, hits in zip(docs, match_queries(boolean, sequences))
        for i in hits
    }
    correct = lookups_ok and len(got) == len(set(got)) and set(got) == want
    print(
        f"  {len(subs) + len(booleans)} subscriptions, {len(docs)} documents: {len(got)} alerts, "
        f"matcher expects {len(want)}: {'OK' if correct else 'MISMATCH'}"
    )
    ledger = Counter()
    for s in stats:
        for c in s.ledger:
            ledger[c.kind] += c.bytes
    n = len(docs)
    return Outcome(
        strategy,
        len(got),
        len(want),
        correct,
        sum(s.candidates for s in stats) / n,
        ledger["Announce"] / n,
        sum(ledger[k] for k in ("TermDialogue", "TermDialogue.reply", "GetBloom", "GetBloom.reply"))
        / n,
        sorted(s.index_entries for s in stats),
    )


def write_inputs(df: Counter, directory: Path) -> dict[str, Path]:
    stats, popular = directory / "stats.tsv", directory / "popular.txt"
    stats.write_text("term\tdf\n" + "".join(f"{t}\t{n}\n" for t, n in sorted(df.items())))
    top = sorted(df, key=lambda t: (-df[t], t))[: max(1, len(df) // 20)]  # the top 5%
    popular.write_text("".join(f"{t}\n" for t in top))
    return {"stats": stats, "popular": popular}


def run_demo(nodes: int = 8, n_queries: int = 300, n_docs: int = 60, seed: int = 1) -> bool:
    docs = sample_corpus()[:n_docs]
    df = document_frequencies(docs)
    queries = [
        " ".join(q) for q in generate_queries(df, n_queries, "skew", mean_size=2.0, seed=seed)
    ]
    texts = [d.text for d in docs]
    boolean = boolean_workload(df, n_queries // 5, "skew", 2.0, seed + 1, 1.0, texts)
    print(
        f"sample corpus: {len(docs)} documents, {len(df)} terms; workload: {len(queries)} Skew "
        f"queries (mean 2 terms) and {len(boolean)} with OR, NOT and phrases, such as\n  "
        + "\n  ".join(boolean[:4])
        + "\n"
    )
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="cqengine-inputs-") as tmp:
        files = write_inputs(df, Path(tmp))
        for strategy in STRATEGIES:
            outcomes.append(
                run_strategy(strategy, nodes, queries, boolean, docs, files, random.Random(seed))
            )
    print(
        f"\n{'strategy':10} {'alerts':>7} {'candidates/doc':>15} {'announce B/doc':>15} "
        f"{'resolution B/doc':>17}  index entries per node (min/median/max)"
    )
    for o in outcomes:
        e = o.entries
        print(
            f"{o.strategy:10} {o.alerts:>7} {o.candidates:>15.1f} {o.announce_bytes:>15.0f} "
            f"{o.resolution_bytes:>17.0f}  {e[0]}/{e[len(e) // 2]}/{e[-1]}"
        )
    ok = all(o.correct for o in outcomes)
    print(
        "\nevery alert matched the brute-force matcher" if ok else "\nSOME ALERTS WERE WRONG",
        file=sys.stdout,
    )
    return ok
