"""The homes on their logs (docs/home-log.md): what a node does with the logs of home keys.

As a member of a key's log, it keeps its copy (`log`) and answers the leader. As the node
that serves a key, it leads the key's log (`leader`): a DN's alert batch, acknowledgements,
a subscription made or ended are appended, and they change the mailboxes only once
committed, in the log's order, by the home's rules (`derive`). So the mailboxes of a key
at any node are what the log's committed entries up to some position make. A node that
takes a key over (a failure, a join, a heal) applies the committed entries after its
position and numbers on exactly where the last leader did; a node that loses its
majority commits nothing, so it shows nothing another could number otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from chord.protocol.calls import Op, Pause
from chord.protocol.ids import MASK
from cqengine.core.alerts.mailboxes import Runs
from cqengine.core.basis import limits
from cqengine.core.frame.context import Context
from cqengine.core.homelog import rows
from cqengine.core.homelog.derive import Derived
from cqengine.core.homelog.leader import Leader, NoMajority, Superseded
from cqengine.core.homelog.log import Log
from cqengine.core.homelog.rows import Rows
from cqengine.proto import cqengine_pb2 as pb

log = logging.getLogger("cqengine.core.homelog")

STARTS = 3  # epochs started in a row to reach the ring's member set (one change each)
START_WAIT = 5.0  # s a request waits for an epoch of its key being started, then is held
START_POLL = 0.05  # s between two looks at it
QUORUM_WINDOW = 4  # reconcile periods a leader leads on unanswered by a majority
GROUP_WAIT = 0.001  # s between two looks at a round of appends on its way
LINGER_POLL = 0.005  # s between two looks for a round to ride with


Compose = Callable[[Rows | None], list[pb.LogEntry]]  # entries, naming rows if given
Entries = list[pb.LogEntry] | Compose


def _rows_change(derived: Derived, log_: Log) -> bool:
    """Is an entry that changes the log's rows appended but not applied yet (or might
    one be: too many to look through)?"""
    if derived.position < log_.base or log_.last - derived.position > rows.SCANNED:
        return True
    after = range(derived.position + 1, log_.last + 1)
    return any(log_.entry(p).kind in rows.CHANGES_ROWS for p in after)


class Held(Exception):
    """Nothing can be appended to the log now: no majority answers, or an epoch is being
    started. The caller keeps what it brought and tries again."""


class Moved(Exception):
    """I do not lead the key's log: another node serves the key, or leads it now."""


class HomeLogs:
    """The logs of home keys this node holds a copy of, and leads.

    `alerted(runs, fresh, accepted)`: a committed entry numbered these alerts here;
    `fresh` unless they are another leader's, which this node applies as it takes the key
    over; `accepted`: when their DN accepted the batch (0: not known)."""

    def __init__(self, ctx: Context, alerted: Callable[[Runs, bool, float], None]) -> None:
        self.ctx, self.alerted = ctx, alerted
        self.logs: dict[int, Log] = {}  # my copy of each key's log
        self.leaders: dict[int, Leader] = {}  # the keys I lead (or led, until I am fenced)
        self.derived: dict[int, Derived] = {}  # how far each key's entries are applied here
        # a key I hold a copy of but do not lead: its committed entries folded, apart from
        # my subscriptions, into the checkpoint my copy keeps in their place
        self.folded: dict[int, Derived] = {}
        self.fresh: dict[int, int] = {}  # a key I lead: positions after this are mine to show
        self.starting: set[int] = set()  # keys whose epoch I am starting
        self.sending: set[int] = set()  # keys with a round of appends on its way
        self.own = 0  # the key my new subscriptions are homed under (0: none yet)
        self.quorate_at: dict[int, float] = {}  # a key I lead: when a majority last answered
        self.leaving = False  # I leave the ring for good: my logs go to sets without me
        self.left: dict[str, float] = {}  # members that told me they leave for good: when
        ctx.chord.region_listeners.append(lambda old, new: ctx.host.spawn(self.take_over()))
        # my successors changed (a member left, failed or joined): the logs I lead move to
        # the new member set now, not at the next maintenance: members that leave one
        # after another must not take a majority of a set with them before it changes
        ctx.chord.successor_listeners.append(lambda: ctx.host.spawn(self.maintain()))

    def copy(self, key: int) -> Log:
        """My copy of a key's log (empty if I hold none yet)."""
        held = self.logs.get(key)
        if held is None:
            held = self.logs[key] = Log(key)
        return held

    def members(self, key: int) -> list[str]:
        """The member set of a key I serve: me and my next successors, as many as the ring
        says (Settings.members); while the ring gives fewer (my successor list not yet
        whole: I just joined, or a partition left me alone), topped up with the latest
        epoch's members. A node that believes itself alone must not make a log of one
        from a log of three. Leaving the ring for good (step_down), the set is
        my next successors alone: those that serve the key after me."""
        ctx = self.ctx
        count = ctx.settings.members
        out = self.departed() | {ctx.me.address}  # (a node alone is its own successor)
        others = [s.address for s in ctx.chord.table.successors if s.address not in out]
        members = others[:count] if self.leaving else [ctx.me.address, *others[: count - 1]]
        if len(members) >= count:
            return members
        # (only then: finding the latest epoch entry walks the log back to it, and every
        # append asks for the member set)
        latest = self.copy(key).config()
        for address in latest.members if latest is not None else []:
            if len(members) >= count:
                break
            if address not in members and address not in out:
                members.append(address)
        return members

    def departed(self) -> set[str]:
        """The members that told me lately (limits.LEFT_KEPT) they leave for good: my
        successor list may list them until the ring's maintenance sees them gone, and the
        latest epoch's set, which tops a short list up, does until the next epoch. (A node
        restarted at a leaver's address meanwhile joins my sets only after that time.)"""
        if self.left:
            since = self.ctx.host.now() - limits.LEFT_KEPT
            self.left = {a: at for a, at in self.left.items() if at >= since}
        return set(self.left)

    def leader_of(self, key: int) -> Leader | None:
        """The leader of a key's log, if I lead it now (not fenced)."""
        leader = self.leaders.get(key)
        return leader if leader is not None and leader.leading else None

    def _current(self, leader: Leader | None, key: int) -> bool:
        """Does this leader lead in an epoch of the member set the key has now?"""
        if leader is None or not leader.leading:
            return False
        return set(leader.members) == set(self.members(key))

    # ---- as a member -------------------------------------------------------------------

    def on_promise(self, request: pb.LogPromise) -> pb.LogPromiseReply:
        if request.probe:  # what I hold, if anything: no copy made for a key I lack
            return self.logs.get(request.key, Log(request.key)).on_promise(request)
        reply = self.copy(request.key).on_promise(request)
        self.keep(request.key)  # (the shell commits before it answers)
        return reply

    def on_append(self, request: pb.LogAppend) -> pb.LogAppendReply:
        reply = self.copy(request.key).on_append(request)
        self._fold(request.key)
        self.keep(request.key)
        return reply

    def on_fetch(self, request: pb.LogFetch) -> pb.LogFetchReply:
        return self.logs.get(request.key, Log(request.key)).on_fetch(request)

    def keep(self, key: int, now: bool = False) -> None:
        """Tell the journal the key's log changed (`now`: and commit: my own copy counts
        toward a majority only once it would outlive my process)."""
        journal, log_ = self.ctx.journal, self.logs[key]
        if journal is not None:
            journal.log_changed(key, log_)
            if now:
                journal.commit()
        log_.changed, log_.compacted = log_.last + 1, False

    def restore(self, logs: list[Log]) -> None:
        """The logs a journal kept (a restarted node): their mailboxes are derived again
        when this node leads them."""
        for log_ in logs:
            self.logs[log_.key] = log_

    # ---- as the node that serves a key -------------------------------------------------

    def own_key(self) -> Op:
        """The key my new subscriptions are homed under: one I made at random in my region
        and lead. Made at random, nobody else can hold a copy of its log, so its first epoch
        needs no earlier member set (Leader.start's `new`)."""
        ctx = self.ctx
        if self.own and ctx.serves(self.own):
            return self.own
        region = ctx.region()
        if region is None or not (ctx.chord.settled or ctx.chord.table.alone()):
            raise Held("my region is not known yet")
        lo, hi = region
        span = (hi - lo) & MASK or MASK + 1
        key = (lo + 1 + ctx.host.new_id() % span) & MASK or hi  # 0: no home key
        yield from self.lead(key, new=True)
        self.own = key
        return key

    def lead(self, key: int, new: bool = False) -> Op:
        """The leader of the key's log, in an epoch of the members the ring gives now.
        Moved: I do not serve the key, or another leads it; Held: no majority promised."""
        ctx = self.ctx
        if not ctx.serves(key):
            raise Moved(f"I do not serve key {key:016x}")
        leader = self.leaders.get(key)
        if self._current(leader, key):
            return leader
        if key in self.starting:  # (a live node's requests run side by side)
            waited = 0.0
            while key in self.starting and waited < START_WAIT:
                yield Pause(START_POLL)
                waited += START_POLL
            if key in self.starting:
                raise Held(f"an epoch of key {key:016x} is being started")
            return (yield from self.lead(key, new))
        self.starting.add(key)
        self.folded.pop(key, None)  # leading, its mailboxes are derived among my own
        try:
            leader = yield from self._start(key, new)
        finally:
            self.starting.discard(key)
        self.leaders[key] = leader
        self.quorate_at[key] = self.ctx.host.now()  # a majority promised it just now
        return leader

    def _start(self, key: int, new: bool) -> Op:
        """A new epoch of the key's log led by me, its member set the ring's (a change not
        yet through is carried through first: an epoch more); what it committed applied."""
        log_ = self.copy(key)
        known = log_.committed  # what others showed before: applied here, not shown again
        leader = Leader(log_, self.ctx.me.address, self.ctx.peer, lambda: self.keep(key, True))
        superseded = None
        try:
            for _ in range(STARTS):
                members = self.members(key)
                try:
                    yield from leader.start(members, new)
                except Superseded as e:  # a stale candidate's epoch: the ring says I serve
                    superseded = e  # the key, so I ask again above it
                    continue
                new, superseded = False, None
                if set(leader.members) == set(members):
                    break
        except NoMajority as e:
            raise Held(str(e)) from None
        finally:
            self.fresh[key] = known
            self.apply(key)
        if superseded is not None:
            raise Moved(str(superseded))
        return leader

    def append(self, key: int, entries: Entries, linger: float = 0.0) -> Op:
        """Append entries to the log of a key I serve; once committed, they are applied.
        Moved or Held (they may yet commit, with a later entry: applied then). `linger`:
        seconds the entries may wait for a round another append starts (acknowledgements
        ride with the next Deliver batch's round, rather than make one of their own).
        `entries` may be made once I lead, given the log's rows if they may name
        subscriptions by row (`_composed`).

        Group commit: one round of appends to the members is on its way per key at a
        time. Entries appended meanwhile wait for it, and go together in the next round
        (a live home takes many Deliver batches and acknowledgements at once: each its
        own round would be a message to every member each)."""
        leader = yield from self.lead(key)
        log_ = leader.log
        if callable(entries):  # (no pause from here to extend: the rows stay as read)
            entries = self._composed(key, log_, entries)
        for entry in entries:
            entry.epoch = leader.epoch
        log_.extend(entries)
        end = log_.last
        waited = 0.0
        while waited < linger and log_.committed < end and key not in self.sending:
            yield Pause(LINGER_POLL)
            waited += LINGER_POLL
        while log_.committed < end:
            if key in self.sending:  # the round on its way: mine go in the next
                yield Pause(GROUP_WAIT)
                if not leader.leading:
                    raise Moved(f"key {key:016x} is led in a later epoch now")
                continue
            self.sending.add(key)
            try:
                yield from leader.replicate()
                self._heard(key, leader)
            except Superseded as e:
                self.leaders.pop(key, None)
                raise Moved(str(e)) from None
            finally:
                self.sending.discard(key)
                self.apply(key)
            if log_.committed < end:  # they wait in my copy: a later round may commit them
                raise Held(f"position {end} is not held by a majority of {leader.members}")

    def _composed(self, key: int, log_: Log, compose: Compose) -> list[pb.LogEntry]:
        """The entries `compose` makes, given the key's rows if they may name its
        subscriptions by row now (cqengine.core.homelog.rows): on a ring whose every node
        speaks protocol 4, after the log's LOG_ROWS, and while no entry that changes the
        rows waits to be applied here (so the rows read are those the entries are applied
        with). A log without rows takes its LOG_ROWS first."""
        derived = self.derived.get(key)
        if derived is None or not self.ctx.chord.uses("rows") or _rows_change(derived, log_):
            return compose(None)
        if derived.rows.taken:
            return compose(derived.rows)
        return [pb.LogEntry(kind=pb.LOG_ROWS), *compose(None)]

    def apply(self, key: int) -> None:
        """The key's committed entries not yet applied here, applied in order."""
        log_ = self.logs.get(key)
        if log_ is None:
            return
        derived = self.derived.get(key)
        if derived is None:
            derived = Derived(self.ctx.settings.mailbox_bytes, self.ctx.subscriptions)
            self.derived[key] = derived
        checkpoint = log_.checkpoint  # the entries begin after it (log_.base)
        if checkpoint is not None and derived.position < checkpoint.position:
            # the entries to apply are folded: their checkpoint
            derived = self.derived[key] = self._restored(key, checkpoint)
        fresh = self.fresh.get(key, log_.committed)
        while derived.position < log_.committed:
            position = derived.position + 1
            repeated = derived.repeated
            runs = derived.apply(position, log_.entry(position))
            if position > fresh and derived.repeated > repeated:  # (counted once: by me)
                self.ctx.count("alerts_repeated", derived.repeated - repeated)
            if runs:
                self.alerted(runs, position > fresh, derived.accepted)
        if log_.committed - log_.base > limits.LOG_KEPT:
            log_.compact(derived.checkpoint(key))
            self.keep(key)

    def _restored(self, key: int, checkpoint: pb.LogCheckpoint) -> Derived:
        """The key's subscriptions here replaced by those a checkpoint holds."""
        subs = self.ctx.subscriptions
        for sub_id in [s.id for s in subs.values() if s.key == key]:
            del subs[sub_id]
        return Derived.restore(checkpoint, self.ctx.settings.mailbox_bytes, subs)

    def _fold(self, key: int) -> None:
        """A copy I do not lead, many of its entries committed: they are folded into a
        checkpoint kept in their place (derived apart from my subscriptions)."""
        log_ = self.logs[key]
        if log_.committed - log_.base <= limits.LOG_KEPT or self.leader_of(key):
            return
        folded = self.folded.get(key)
        if folded is None or folded.position < log_.base:
            limit = self.ctx.settings.mailbox_bytes
            folded = (
                Derived(limit)
                if log_.checkpoint is None
                else Derived.restore(log_.checkpoint, limit)
            )
            self.folded[key] = folded
        while folded.position < log_.committed:
            folded.apply(folded.position + 1, log_.entry(folded.position + 1))
        log_.compact(folded.checkpoint())

    def _heard(self, key: int, leader: Leader) -> None:
        if leader.quorate:
            self.quorate_at[key] = self.ctx.host.now()

    def in_minority(self, key: int) -> bool:
        """Do I lead the key's log without a majority of its members answering lately (a
        partition's smaller side, as etcd's CheckQuorum tells)? Its streams hold: they
        may show nothing more, and another node may be numbering the key's alerts."""
        if self.leader_of(key) is None:
            return False
        lately = self.ctx.host.now() - QUORUM_WINDOW * self.ctx.settings.reconcile_period
        return self.quorate_at.get(key, -1.0) < lately

    def taking_over(self) -> bool:
        """Is there a key I serve whose log I hold a copy of but do not lead yet (its
        subscriptions are not derived here yet)? Before the ring has handed me my region
        (back from a restart), any log I hold may be one."""
        chord = self.ctx.chord
        unsure = not chord.settled or self.ctx.region() is None
        if self.logs and not chord.table.alone() and unsure:
            return True
        serves = self.ctx.serving()
        return any(
            log_.holds and serves(key) and self.leader_of(key) is None
            for key, log_ in self.logs.items()
        )

    def claim(self, key: int) -> bool:
        """A home key a client names: if I serve it and do not lead its log (a node that
        joined before the key, not told of it yet), I begin to lead it, in the background.
        Whether I do (its subscriptions are not derived here yet)."""
        if not key or not self.ctx.serves(key) or self.leader_of(key) is not None:
            return False
        if key not in self.starting:
            self.ctx.host.spawn(self._claimed(key))
        return True

    def _claimed(self, key: int) -> Op:
        try:
            yield from self.lead(key)
        except (Held, Moved) as e:
            log.info("key %016x not claimed: %s", key, e)
            held = self.logs.get(key)
            if held is not None and not held.holds and key not in self.leaders:
                del self.logs[key]  # no log is of it here: a key guessed, or long gone

    # ---- on a timer, and when my region changes ------------------------------------------

    def take_over(self) -> Op:
        """Lead the logs of the keys I serve now, of which I hold a copy: their mailboxes
        are mine to serve."""
        for key in sorted(self.logs):
            if not self.logs[key].holds:  # (a key a client named that no log is of)
                continue
            if self.ctx.serves(key) and self.leader_of(key) is None:
                try:
                    yield from self.lead(key)
                except (Held, Moved) as e:
                    log.info("key %016x not taken over: %s", key, e)

    def hand_over(self) -> Op:
        """The keys I lead but serve no more, to their owners: a node that stops does so
        before it goes (it may not live to its next maintenance)."""
        for key in sorted(self.leaders):
            leader = self.leaders[key]
            if leader.leading and not self.ctx.serves(key):
                yield from self._hand_over(key, leader)

    def _hand_over(self, key: int, leader: Leader) -> Op:
        """A key I lead but serve no more (a node joined before it, and is no member): its
        owner is sent my copy, so that it knows the key and leads it from there (its epoch
        fences mine). A member that comes to serve the key holds a copy already."""
        ctx = self.ctx
        if not ctx.chord.settled:
            return
        owner, _ = yield from ctx.chord.lookup(key, verify=True)
        if owner == ctx.me or owner.address in leader.members:
            return
        try:
            yield from leader.send_copy(owner.address)
        except Superseded:
            self.leaders.pop(key, None)

    def maintain(self) -> Op:
        """Keep the logs I lead: those I serve no more go to their owners; a member set
        the ring changed starts an epoch of the new one; the members learn what is
        committed (and a member behind takes what it lacks). Then the keys I serve but do
        not lead (a leader fenced just now among them) are taken over."""
        yield from self.hand_over()
        for key in sorted(self.leaders):
            leader = self.leaders[key]
            if not leader.leading or not self.ctx.serves(key):
                continue
            try:
                if not self._current(leader, key):
                    yield from self.lead(key)
                elif key not in self.sending:  # (a round on its way tells them as much)
                    yield from leader.replicate()
                    self._heard(key, leader)
            except Superseded:
                self.leaders.pop(key, None)
            except (Held, Moved) as e:
                log.info("key %016x: %s", key, e)
            self.apply(key)
        yield from self.take_over()
