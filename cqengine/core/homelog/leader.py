"""The leader of a home key's log: the node that serves the key (docs/home-log.md).

It leads only in an epoch it started, and starts one thus:

1. It picks an epoch above every one it knows of, and asks the members of the sets that
   decide now to promise it: the latest epoch entry's set, the set before that one while
   the entry is not known committed, and the set the ring gives now.
2. A promiser holding a later epoch entry names its sets: those members are asked too,
   until no promiser knows a later entry. An epoch's entry is committed only once a
   majority of the set before it holds it, so this chain reaches the latest one.
3. It needs the promises of a majority of every set that decides.
4. Recovery: of every promiser's log, the one furthest on (by its last entry's epoch, then
   position) holds every committed entry. It takes the entries it lacks from there.
5. It appends the epoch's entry, with its member set and the set before it, and that entry
   is committed once a majority of both hold it (and everything before it with it). One
   change at a time: if the latest entry's change is not known through, the new epoch
   carries that change on first, and the set the ring gives waits for the next epoch.

From then on it appends entries and counts a position committed once a majority of its
members hold it, counting only positions of its own epoch (Raft's rule: an earlier
epoch's entry is committed by the first of its own after it). A member that promised a
higher epoch refuses its appends: it is fenced, and leads no more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

from chord.protocol.calls import Call, Fanout, NotWaited, Op, PeerUnreachable
from chord.protocol.routing import NodeRef
from cqengine.core.homelog.log import EPOCH, Config, Log
from cqengine.proto import cqengine_pb2 as pb

ROUNDS = 4  # appends sent again to a member whose log ends before what it was sent follows


class Superseded(Exception):
    """A higher epoch was promised elsewhere: another node leads, or tries to."""

    def __init__(self, epoch: int) -> None:
        super().__init__(f"epoch {epoch} was promised to another leader")
        self.epoch = epoch


class NoMajority(Exception):
    """Too few members answered: nothing may be numbered (a minority holds)."""


def _later(a: Config | None, b: Config | None) -> Config | None:
    """The later of two epoch entries; of one seen twice, committed if either knows it."""
    if a is None or b is None:
        return a or b
    if a.epoch != b.epoch:
        return a if a.epoch > b.epoch else b
    return Config(a.epoch, a.members, a.previous, a.committed or b.committed)


def majority(holders: Iterable[str], members: list[str]) -> bool:
    """Do these hold a majority of the member set (an empty set: a log not begun)?"""
    if not members:
        return True
    return 2 * len(set(holders) & set(members)) > len(members)


def _spare(sets: list[list[str]]) -> int:
    """How many nodes may stay silent, whichever they are, and leave a majority of every
    one of these member sets: a fanout to them need not wait for the last so many."""
    return min(((len(s) - 1) // 2 for s in sets if s), default=0)


class Leader:
    """What the node serving a home key does with its log: start epochs, append, commit.
    `peer(address)`: the node to call there."""

    def __init__(
        self,
        log: Log,
        me: str,
        peer: Callable[[str], NodeRef],
        keep: Callable[[], None] = lambda: None,
    ) -> None:
        """`keep()`: make my copy outlive my process (before I count it toward a majority)."""
        self.log, self.me, self.peer, self.keep = log, me, peer, keep
        self.epoch = 0  # the epoch I lead in (0: none)
        self.members: list[str] = []  # the set my epoch counts on
        self.joint: list[str] = []  # the set before it, until my epoch's entry is committed
        self.matched: dict[str, int] = {}  # how far each member's log is known to match mine
        # how far my appends still on their way to a member go (a round resumed without
        # its reply: NotWaited): the next round sends it what follows, not all of it again;
        # its reply, when it comes (Fanout.late), says whether it took them
        self.sent: dict[str, int] = {}
        self.seen = 0  # the highest epoch I know was promised anywhere
        self.quorate = False  # did a majority answer my last round of appends?

    @property
    def leading(self) -> bool:
        """Do I lead now? Not once my own copy promised a higher epoch to another."""
        return self.epoch > 0 and self.log.promised == self.epoch

    # ---- starting an epoch -----------------------------------------------------------

    def start(self, members: list[str], new: bool = False) -> Op:
        """Lead the log in a new epoch; its entry committed, return the epoch. Superseded or
        NoMajority: I do not lead.

        The epoch counts on `members` (me among them), unless the latest epoch entry is not
        known committed: then it counts on that entry's set, carrying its change through
        first (one change at a time, as in Raft), and `self.members` says so: start again.

        `new`: I made this log's key just now, at random (a first subscription): nobody
        else can hold a copy, and its first epoch needs no earlier member set. Any other
        start needs one, from my copy or a promiser's: two nodes that each began a log of
        one key on its own could each find a majority of the set it chose."""
        log = self.log
        self.epoch = 0
        if not new and not log.holds:
            yield from self._probe(members)
        epoch = max(log.promised, self.seen) + 1
        request = pb.LogPromise(key=log.key, epoch=epoch, members=members, candidate=self.me)
        latest = log.config()
        asked: set[str] = set()
        replies: dict[str, pb.LogPromiseReply] = {}
        while True:
            deciding = [*(latest.deciding() if latest else []), members]
            ask = sorted({a for s in deciding for a in s} - asked)
            if not ask:
                break
            # the first round waits for all but those whose silence leaves a majority of
            # every set (a member stopped must not hold the start up for its timeout)
            spare = 0 if asked else _spare(deciding)
            asked.update(ask)
            replies.update((yield from self._ask(ask, "LogPromise", request, spare)))
            higher = max((r.epoch for r in replies.values() if not r.promised), default=0)
            if higher >= epoch:
                raise self._outdone(higher)
            for reply in replies.values():  # a later epoch entry: its sets decide
                latest = _later(latest, Config.of(reply))
        if latest is None and not new:
            raise NoMajority("no copy of the log answers: none to take over")
        for needed in deciding:
            if not majority(replies, needed):
                raise NoMajority(f"promises of {sorted(replies)}, not a majority of {needed}")
        yield from self._recover(replies, epoch)
        config = _later(log.config(), latest)  # mine now, as the promisers know it
        if config is None or config.committed:
            entry = pb.LogEntry(epoch=epoch, kind=EPOCH, members=members)
            entry.previous.extend(config.members if config else [])
        else:  # its change is not known through: this epoch carries it through first
            entry = pb.LogEntry(
                epoch=epoch, kind=EPOCH, members=config.members, previous=config.previous
            )
        self.epoch, self.members, self.joint = epoch, list(entry.members), list(entry.previous)
        self.matched, self.sent = {}, {}
        yield from self.append([entry])
        self.joint = []
        # the members learn at once that it is committed: while none knows, the next
        # leader needs a majority of the set before it too, which a failure more may take
        yield from self.replicate()
        return epoch

    def _probe(self, members: list[str]) -> Op:
        """A key I hold no copy of: does any member hold one? Asked without a promise, so
        that a key a client guessed (no log is of it) leaves nothing on any member: a
        promise is kept for good, and a fuzzing client would fill the members' disks."""
        probe = pb.LogPromise(key=self.log.key, members=members, candidate=self.me, probe=True)
        replies = yield from self._ask([a for a in members if a != self.me], "LogPromise", probe)
        if not any(Config.of(reply) for reply in replies.values()):
            raise NoMajority("no copy of the log answers: none to take over")

    def _ask(self, addresses: list[str], method: str, request: pb.LogPromise, spare: int = 0) -> Op:
        """The replies of these members (mine answered by my own copy), those that answered
        (all of them, but for `spare` not waited for)."""
        replies: dict[str, pb.LogPromiseReply] = {}
        if self.me in addresses:
            replies[self.me] = self.log.on_promise(request)
            self.keep()  # my promise to myself outlives me, as any member's does
        others = [a for a in addresses if a != self.me]
        calls = tuple(Call(self.peer(a), method, request) for a in others)
        answers = yield Fanout(calls, len(others) - spare if spare else 0)
        for address, answer in zip(others, answers):
            if not isinstance(answer, PeerUnreachable):
                replies[address] = answer
        return replies

    def _recover(self, replies: dict[str, pb.LogPromiseReply], epoch: int) -> Op:
        """Take the entries my copy lacks from the promiser whose log is furthest on (as it
        was when it promised me the epoch)."""
        log = self.log
        best = max(replies, key=lambda a: (replies[a].last_epoch, replies[a].last))
        reply = replies[best]
        if best == self.me or (reply.last_epoch, reply.last) <= (log.last_epoch, log.last):
            return
        after = min(log.committed, reply.committed)  # committed: the same in both copies
        request = pb.LogFetch(key=log.key, after=after, epoch=epoch)
        try:
            fetched = yield Call(self.peer(best), "LogFetch", request)
        except PeerUnreachable:
            raise NoMajority(f"{best}, whose log is furthest on, does not answer") from None
        if fetched.promised > epoch:
            raise self._outdone(fetched.promised)
        # my own copy took a later leader's entries meanwhile (and may know them
        # committed): not mine to replace with what the fetch brought
        if log.promised > epoch:
            raise self._outdone(log.promised)
        folded = fetched.checkpoint if fetched.HasField("checkpoint") else None
        log.take(fetched.after, fetched.after_epoch, list(fetched.entries), folded)

    # ---- appending ---------------------------------------------------------------------

    def append(self, entries: list[pb.LogEntry]) -> Op:
        """Append entries of my epoch and replicate them; once a majority holds them,
        return the position committed (the last of them). NoMajority: they wait in my copy,
        uncommitted (a later append, or a later leader, commits or replaces them);
        Superseded: I lead no more."""
        if not self.leading:
            raise Superseded(self.log.promised)
        log = self.log
        log.extend(entries)
        end = log.last
        yield from self.replicate()
        if log.committed < end:
            raise NoMajority(f"position {end} is held by {sorted(self._holding(end))} only")
        return end

    def replicate(self) -> Op:
        """Send each member what it lacks of my copy; count what is committed."""
        self.keep()
        behind = [a for a in self._members() if a != self.me]
        self.quorate = majority([self.me], self.members)  # a log of one: it is its majority
        for _ in range(ROUNDS):
            if not behind:
                break
            requests = [self._append_request(a) for a in behind]
            calls = tuple(Call(self.peer(a), "LogAppend", r) for a, r in zip(behind, requests))
            spare = _spare([self.members, self.joint])
            late = partial(self._answered_late, self.epoch, behind)
            answers = yield Fanout(calls, len(behind) - spare if spare else 0, late)
            again = []
            answered = [a for a, r in zip(behind, answers) if not isinstance(r, PeerUnreachable)]
            self.quorate = majority([self.me, *answered], self.members)
            for address, request, answer in zip(behind, requests, answers):
                if isinstance(answer, NotWaited):  # on its way: it may take it yet
                    end = request.prev + len(request.entries)
                    self.sent[address] = max(self.sent.get(address, 0), end)
                    continue
                if isinstance(answer, PeerUnreachable):
                    self.sent.pop(address, None)
                    continue
                if answer.epoch > self.epoch:
                    self.epoch = 0
                    raise self._outdone(answer.epoch)
                if not self._took(address, answer):
                    again.append(address)
            behind = again
        self._commit()

    def _took(self, address: str, answer: pb.LogAppendReply) -> bool:
        """A member's answer to an append (of my epoch): how far it matches my copy now;
        whether it took the entries."""
        if answer.taken:  # (another append's reply may have come first)
            self.matched[address] = max(self.matched.get(address, 0), answer.last)
            if self.sent.get(address, 0) <= self.matched[address]:
                self.sent.pop(address, None)  # nothing of mine on its way there now
            return True
        # it lacks what the request followed: from its commit on (what was on its way
        # there is sent again: it may have been refused for the same reason)
        self.matched[address] = answer.last
        self.sent.pop(address, None)
        return False

    def _answered_late(
        self, epoch: int, behind: list[str], i: int, answer: pb.LogAppendReply | PeerUnreachable
    ) -> None:
        """The answer of an append a round did not wait for (Fanout.late), heard: without
        it a member that refused one would be sent only what follows, refused in turn,
        for as long as it stays the slowest."""
        if epoch != self.epoch:
            return  # an earlier epoch's: my copy has changed since
        address = behind[i]
        if isinstance(answer, PeerUnreachable):
            self.sent.pop(address, None)  # lost, maybe: sent again from where it matches
        elif answer.epoch > epoch:
            self.seen = max(self.seen, answer.epoch)  # my next round is refused by it too
            self.sent.pop(address, None)
        else:
            self._took(address, answer)

    def send_copy(self, address: str) -> Op:
        """My copy to a node that is no member (the key's new owner: a node joined before
        it), up to what I hold: it leads the log from there, in a later epoch. Superseded:
        it (or another) has begun one."""
        for _ in range(ROUNDS):
            try:
                answer = yield Call(self.peer(address), "LogAppend", self._append_request(address))
            except PeerUnreachable:
                return
            if answer.epoch > self.epoch:
                self.epoch = 0
                raise self._outdone(answer.epoch)
            self.matched[address] = answer.last
            if answer.taken:
                return

    def _outdone(self, epoch: int) -> Superseded:
        """A later epoch was promised (`epoch`): remembered, so that my next start asks
        above it; what to raise."""
        self.seen = max(self.seen, epoch)
        return Superseded(epoch)

    def _members(self) -> list[str]:
        return sorted(set(self.members) | set(self.joint))

    def _append_request(self, address: str) -> pb.LogAppend:
        """What a member lacks of my copy, as far as I know: the entries after where it
        matches mine (the last one, for a member I know nothing of); my checkpoint first
        if those are folded into it."""
        log = self.log
        prev = self.matched.get(address, max(log.last - 1, log.base))
        # after what is on its way there: should that not arrive first, the member answers
        # that it lacks what this follows, and takes it all again from its commit on
        prev = min(max(prev, self.sent.get(address, prev)), log.last)
        request = pb.LogAppend(key=log.key, epoch=self.epoch, commit=log.committed)
        if prev < log.base:  # it lacks entries I folded: it takes my checkpoint
            assert log.checkpoint is not None  # (a base above 0 is a checkpoint's)
            request.checkpoint.CopyFrom(log.checkpoint)
            prev = log.base
        request.prev, request.prev_epoch = prev, log.epoch_at(prev)
        request.entries.extend(log.after(prev))
        return request

    def _holding(self, position: int) -> list[str]:
        """The members known to hold my copy up to this position, me included."""
        held = [a for a, at in self.matched.items() if at >= position]
        return [self.me, *held] if self.log.last >= position else held

    def _commit(self) -> None:
        """Move the commit position to the last position of my epoch a majority holds (and
        a majority of the set before, while my epoch's entry is not committed)."""
        log = self.log
        for position in range(log.last, log.committed, -1):
            if log.epoch_at(position) != self.epoch:
                break  # an earlier epoch's: committed only by one of mine after it
            holders = self._holding(position)
            if majority(holders, self.members) and majority(holders, self.joint):
                log.committed = position
                break
