"""A live ring's subscribers as a user's client runs them, for the benchmarks that churn
or fault a ring: subscribing many at once, streams read until a deadline, what is left
drained from whichever nodes serve the subscriptions now, and what the nodes hold."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor

from cqengine.live.client import Client, ClientError


def subscribe_all(addresses: list[str], queries: list[str], seed: int, credentials) -> list:
    rng = random.Random(seed)
    picks = [rng.choice(addresses) for _ in queries]

    def one(i: int):
        with Client(picks[i], 60, credentials) as c:
            return c.subscribe(queries[i])

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, range(len(queries))))


class Streamer(threading.Thread):
    """One subscriber reading one home's subscriptions on one stream until its deadline."""

    def __init__(self, address: str, subs, seconds: float, credentials) -> None:
        super().__init__(daemon=True)
        self.address, self.subs, self.seconds = address, subs, seconds
        self.credentials = credentials
        self.got: list[tuple[int, str, int]] = []
        self.error = ""

    def run(self) -> None:
        try:
            with Client(self.address, credentials=self.credentials) as c:
                for a in c.alerts(self.subs, timeout=self.seconds, resume=60):
                    self.got.append((a.subscription_id, a.docno, a.seq))
        except ClientError as e:
            self.error = str(e)


def waiting(addresses: list[str], credentials, held: bool = True) -> int:
    """Alerts in the mailboxes of the live nodes, not yet acknowledged, and (`held`)
    documents of batches not yet resolved (held for a DN: alerts may still come)."""
    total = 0
    for a in addresses:
        with Client(a, 10, credentials) as c:
            stats = c.stats()
            total += stats.alerts_waiting + held * stats.held_documents
    return total


def drain(
    subs, addresses: list[str], credentials, seconds: float = 180.0, once: bool = False
) -> list[tuple[int, str, int]]:
    """What is left in the mailboxes, read from the nodes that serve the subscriptions now,
    pass after pass until the nodes say none waits and no batch is unresolved (or
    `seconds` pass); with `once`, at least one pass (every key's stream opened)."""
    by_key = defaultdict(list)
    for s in subs:
        by_key[s.home_id].append(s)
    got: list[tuple[int, str, int]] = []
    deadline = time.monotonic() + seconds
    while (once or waiting(addresses, credentials)) and time.monotonic() < deadline:
        once = False
        with Client(addresses[0], credentials=credentials) as c:
            at = {key: c.find_home(key, addresses) for key in by_key}
        for key, group in by_key.items():
            if at[key] is None:
                continue
            with Client(at[key], credentials=credentials) as c:
                got += [
                    (a.subscription_id, a.docno, a.seq)
                    for a in c.alerts(group, home=at[key], timeout=5)
                ]
    return got


def homed(addresses: list[str], credentials) -> tuple[int, Counter]:
    """The subscriptions the nodes serve as homes now, and the alerts they dropped, by why."""
    served, dropped = 0, Counter()
    for a in addresses:
        with Client(a, 5, credentials) as c:
            stats = c.stats()
        served += stats.subscriptions
        dropped.update(dict(stats.dropped_by))
    return served, dropped
