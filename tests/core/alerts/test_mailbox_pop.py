"""A mailbox's alerts leaving in one step (Mailbox.pop, Mailbox.acknowledge) end exactly
where letting them go one by one ends (the oracle: the loop they replaced): the same
queue, size, documents known seen, acknowledged memory, first number and unheld numbers,
with a memory small enough that acknowledgements push its oldest out."""

from __future__ import annotations

from dataclasses import astuple
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from cqengine.core.alerts.mailboxes import Mailbox, cost
from cqengine.core.basis import limits

KEPT = 4  # the acknowledged documents remembered (limits.SEEN_KEPT), small to be exceeded


class OneByOne(Mailbox):
    """The oracle: each alert leaves on its own, remembered by `_remember`."""

    def pop(self, n: int) -> None:
        for _ in range(n):
            doc = self.queue.popleft()
            self.size -= cost(doc)
            self._remember(doc[0])
        self.first += n

    def acknowledge(self, first: int) -> bool:
        if first <= self.first:
            return False
        end = self.next
        self.pop(min(first - self.first, len(self.queue)))
        if first > end:
            self.unheld.update(range(max(end, first - limits.SEEN_KEPT), first))
        self.first = first
        if self.unheld:
            self.unheld = {seq for seq in self.unheld if seq >= first - limits.SEEN_KEPT}
        if self.early:
            self._join_early()
        return True


# ("offer", k): k new alerts; ("pop", n): n leave (at most what is held);
# ("ack", d): acknowledged up to d past the first (past the end too)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("offer"), st.integers(1, 6)),
        st.tuples(st.just("pop"), st.integers(0, 6)),
        st.tuples(st.just("ack"), st.integers(-1, 9)),
    ),
    max_size=40,
)


def state(box: Mailbox) -> tuple:
    return astuple(box)[:-1] + (list(box.acked),)  # acked last: a deque compares by content


@given(steps)
def test_alerts_leave_in_one_step_as_they_did_one_by_one(ops):
    with mock.patch.object(limits, "SEEN_KEPT", KEPT):
        fast, slow = Mailbox(), OneByOne()
        made = 0
        for op, k in ops:
            for box in (fast, slow):
                if op == "offer":
                    for i in range(made, made + k):
                        box.offer((f"D{i}", "title", "s" * (i % 3)))
                elif op == "pop":
                    box.pop(min(k, len(box.queue)))
                else:
                    assert fast.acknowledge(fast.first + k) == slow.acknowledge(slow.first + k)
                    break  # both acknowledged at once (their results compared)
            made += k if op == "offer" else 0
            assert state(fast) == state(slow)
            assert fast.seen == {d[0] for d in fast.queue} | set(fast.acked)
