"""One member's copy of a home key's log, and its answers to the leader.

A member keeps, for each log, what must outlive its process: the entries (each with the
epoch its leader appended it in), the highest epoch it has promised, and the last position
it knows committed. Its answers follow Raft's rules, the epoch playing Raft's term:

- it promises an epoch only if it promised nothing higher, and from then on takes no
  entries of a lower one (a leader that paused or was cut off is fenced);
- it takes entries only after one it holds of the same epoch at the same position (log
  matching), so two members that hold an entry of one epoch at one position hold the same
  entries up to it;
- an entry of its own that an appended one overwrites was never committed: a committed
  entry is on a majority, and every later leader recovered it from that majority before
  it appended anything (cqengine.core.homelog.leader).

Entries are kept as they came: a member never parses what an entry holds to keep it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cqengine.proto import cqengine_pb2 as pb

EPOCH = pb.LOG_EPOCH


@dataclass
class Config:
    """An epoch entry as a leader counts on it: its epoch, its member set, the set before
    it, and whether it is known committed (until it is, a majority of both decides)."""

    epoch: int
    members: list[str]
    previous: list[str]
    committed: bool

    @staticmethod
    def of(reply: pb.LogPromiseReply) -> "Config | None":
        """The latest epoch entry a promiser holds (None: none)."""
        if not reply.config_epoch:
            return None
        return Config(
            reply.config_epoch,
            list(reply.config),
            list(reply.config_previous),
            reply.config_committed,
        )

    def deciding(self) -> list[list[str]]:
        """The member sets whose majorities decide now."""
        return [self.members] if self.committed else [self.members, self.previous]


@dataclass
class Log:
    """A member's copy of the log of one home key."""

    key: int
    entries: list[pb.LogEntry] = field(default_factory=list)  # positions 1, 2, ...
    promised: int = 0  # the highest epoch promised: none lower is taken from then on
    promised_to: str = ""  # the candidate it was promised to (its request sent again: yes)
    committed: int = 0  # the last position known committed
    # the first position whose entry changed since a shell last kept the log (cqengine.core
    # .journal.Journal.log_changed); past the last entry: none did
    changed: int = 1

    # ---- what it holds ---------------------------------------------------------------

    @property
    def last(self) -> int:
        """The position of the last entry (0: none)."""
        return len(self.entries)

    def epoch_at(self, position: int) -> int:
        """The epoch of the entry at a position (0 for position 0, before the first)."""
        return self.entries[position - 1].epoch if position else 0

    @property
    def last_epoch(self) -> int:
        return self.epoch_at(self.last)

    def config(self) -> Config | None:
        """The latest epoch entry, as a Config (None: none yet)."""
        for position in range(self.last, 0, -1):
            entry = self.entries[position - 1]
            if entry.kind == EPOCH:
                return Config(
                    entry.epoch,
                    list(entry.members),
                    list(entry.previous),
                    self.committed >= position,
                )
        return None

    def after(self, position: int) -> list[pb.LogEntry]:
        """The entries after a position."""
        return self.entries[position:]

    def extend(self, entries: list[pb.LogEntry]) -> None:
        """Entries appended after the last (by its leader)."""
        self._changed_after(self.last)
        self.entries.extend(entries)

    def _truncate(self, after: int) -> None:
        """The entries after a position go."""
        self._changed_after(after)
        del self.entries[after:]

    def _changed_after(self, position: int) -> None:
        self.changed = min(self.changed, position + 1)

    # ---- a leader's requests -------------------------------------------------------------

    def on_promise(self, request: pb.LogPromise) -> pb.LogPromiseReply:
        """Promise the epoch if none higher (or as high) was promised; either way, say what
        this copy holds, so that the candidate knows whose log is furthest on."""
        promised = request.epoch > self.promised or (
            request.epoch == self.promised and request.candidate == self.promised_to
        )
        if promised:
            self.promised, self.promised_to = request.epoch, request.candidate
        reply = pb.LogPromiseReply(
            promised=promised,
            epoch=self.promised,
            last_epoch=self.last_epoch,
            last=self.last,
            committed=self.committed,
        )
        config = self.config()
        if config is not None:
            reply.config_epoch, reply.config_committed = config.epoch, config.committed
            reply.config.extend(config.members)
            reply.config_previous.extend(config.previous)
        return reply

    def on_append(self, request: pb.LogAppend) -> pb.LogAppendReply:
        """Take the entries if their epoch is not below my promise and I hold the one they
        follow; an entry of mine they disagree with goes, with all after it."""
        if request.epoch < self.promised:
            return pb.LogAppendReply(taken=False, epoch=self.promised, last=self.last)
        if request.epoch > self.promised:  # its leader was promised it by a majority
            self.promised, self.promised_to = request.epoch, ""
        prev = request.prev
        if prev > self.last or self.epoch_at(prev) != request.prev_epoch:
            # not the entry they follow: the leader sends what follows my committed entries,
            # which every later leader holds alike
            return pb.LogAppendReply(taken=False, epoch=self.promised, last=self.committed)
        for at, entry in enumerate(request.entries, prev + 1):
            if at <= self.last:
                if self.entries[at - 1].epoch == entry.epoch:
                    continue  # the same entry (an append sent again)
                self._truncate(at - 1)  # never committed: a later epoch replaced it
            self.extend([entry])
        matched = prev + len(request.entries)
        # what the leader knows committed, as far as this copy matches the leader's log
        self.committed = max(self.committed, min(request.commit, matched))
        return pb.LogAppendReply(taken=True, epoch=self.promised, last=matched)

    def on_fetch(self, request: pb.LogFetch) -> pb.LogFetchReply:
        """The entries after a position, for a new leader recovering the log; none if I
        promised a higher epoch since it asked (they may not be those I told it of)."""
        if self.promised > request.epoch:
            return pb.LogFetchReply(promised=self.promised)
        after = min(request.after, self.last)
        return pb.LogFetchReply(
            entries=self.after(after),
            after=after,
            after_epoch=self.epoch_at(after),
            promised=self.promised,
        )

    def take(self, after: int, after_epoch: int, entries: list[pb.LogEntry]) -> None:
        """A recovering leader's own copy takes another member's entries after a position
        (whose entry must be the one it holds there): what it held after it, never
        committed, goes."""
        if after > self.last or self.epoch_at(after) != after_epoch:
            raise ValueError(f"the entries do not follow mine at {after} of epoch {after_epoch}")
        self._truncate(after)
        self.extend(entries)
