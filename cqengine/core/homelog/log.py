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
Once many are committed, a member folds them into a checkpoint (what they made, derived:
cqengine.core.homelog.derive) and keeps the checkpoint in their place (`compact`), as
Raft's snapshots: its log then begins after the checkpoint's position. A member whose log
ends before a leader's checkpoint takes the checkpoint itself (`install`).
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
    def of(reply: pb.LogPromiseReply) -> Config | None:
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
    entries: list[pb.LogEntry] = field(default_factory=list)  # positions base + 1, ...
    promised: int = 0  # the highest epoch promised: none lower is taken from then on
    promised_to: str = ""  # the candidate it was promised to (its request sent again: yes)
    committed: int = 0  # the last position known committed
    # the first position whose entry changed since a shell last kept the log (cqengine.core
    # .journal.Journal.log_changed); past the last entry: none did
    changed: int = 1
    # what the entries up to `base` made, kept in their place (None: none folded yet)
    checkpoint: pb.LogCheckpoint | None = None
    compacted: bool = False  # the checkpoint changed since a shell last kept the log

    # ---- what it holds ---------------------------------------------------------------

    @property
    def base(self) -> int:
        """The position the entries begin after: the checkpoint's (0: none)."""
        return self.checkpoint.position if self.checkpoint is not None else 0

    @property
    def last(self) -> int:
        """The position of the last entry (0: none)."""
        return self.base + len(self.entries)

    def entry(self, position: int) -> pb.LogEntry:
        """The entry at a position after the checkpoint's."""
        if position <= self.base:
            raise ValueError(f"entry {position} is folded into the checkpoint at {self.base}")
        return self.entries[position - self.base - 1]

    def epoch_at(self, position: int) -> int:
        """The epoch of the entry at a position (0 for position 0, before the first); of
        the checkpoint's position, its epoch; of one before it, not known."""
        if position == self.base:
            return self.checkpoint.epoch if self.checkpoint is not None else 0
        return self.entry(position).epoch

    @property
    def holds(self) -> bool:
        """Does this copy hold any of the log (an entry or a checkpoint)? A copy that only
        promised an epoch to a candidate that found no log to take over holds none."""
        return bool(self.entries) or self.checkpoint is not None

    @property
    def last_epoch(self) -> int:
        return self.epoch_at(self.last)

    def config(self, upto: int | None = None) -> Config | None:
        """The latest epoch entry (at or before `upto`), as a Config (None: none yet)."""
        for position in range(self.last if upto is None else upto, self.base, -1):
            entry = self.entry(position)
            if entry.kind == EPOCH:
                return Config(
                    entry.epoch,
                    list(entry.members),
                    list(entry.previous),
                    self.committed >= position,
                )
        folded = self.checkpoint
        if folded is None or not folded.HasField("config"):
            return None
        c = folded.config  # committed: it is at or before a committed position
        return Config(c.epoch, list(c.members), list(c.previous), True)

    def after(self, position: int) -> list[pb.LogEntry]:
        """The entries after a position (not before the checkpoint's)."""
        if position < self.base:
            raise ValueError(f"the entries after {position} are folded into the checkpoint")
        return self.entries[position - self.base :]

    def extend(self, entries: list[pb.LogEntry]) -> None:
        """Entries appended after the last (by its leader)."""
        self._changed_after(self.last)
        self.entries.extend(entries)

    def _truncate(self, after: int) -> None:
        """The entries after a position go (never a committed one: not folded ones)."""
        if after < self.base:
            raise ValueError(f"truncating at {after}, before the checkpoint at {self.base}")
        self._changed_after(after)
        del self.entries[after - self.base :]

    def _past_base(
        self, after: int, after_epoch: int, entries: list[pb.LogEntry]
    ) -> tuple[int, int, list[pb.LogEntry]]:
        """Entries sent after a position, less those at or before my checkpoint's: folded,
        they were committed, and so the same as the sender's."""
        if after >= self.base:
            return after, after_epoch, entries
        skip = min(self.base - after, len(entries))
        after += skip
        return after, self.epoch_at(after) if after == self.base else after_epoch, entries[skip:]

    # ---- checkpoints ------------------------------------------------------------------

    def compact(self, checkpoint: pb.LogCheckpoint) -> None:
        """What my committed entries up to the checkpoint's position made: kept in their
        place, with the epoch of the last and the latest epoch entry among them."""
        position = checkpoint.position
        if not self.base < position <= self.committed:
            raise ValueError(f"a checkpoint at {position}: not committed after {self.base}")
        checkpoint.epoch = self.epoch_at(position)
        config = self.config(upto=position)
        if config is not None:
            checkpoint.config.CopyFrom(
                pb.LogEntry(
                    epoch=config.epoch,
                    kind=EPOCH,
                    members=config.members,
                    previous=config.previous,
                )
            )
        del self.entries[: position - self.base]
        self.checkpoint, self.compacted = checkpoint, True

    def install(self, checkpoint: pb.LogCheckpoint) -> None:
        """A leader's checkpoint, committed: what I hold up to its position goes (an entry
        after it that agrees with the leader's stays, as Raft's snapshots keep them)."""
        position = checkpoint.position
        if position <= self.base:
            return  # mine is as far on
        if position <= self.last and self.epoch_at(position) == checkpoint.epoch:
            del self.entries[: position - self.base]
        else:
            self._changed_after(self.base)
            self.entries = []
        self.checkpoint, self.compacted = checkpoint, True
        self.committed = max(self.committed, position)

    def _changed_after(self, position: int) -> None:
        self.changed = min(self.changed, position + 1)

    # ---- a leader's requests -------------------------------------------------------------

    def on_promise(self, request: pb.LogPromise) -> pb.LogPromiseReply:
        """Promise the epoch if none higher (or as high) was promised; either way, say what
        this copy holds, so that the candidate knows whose log is furthest on."""
        promised = not request.probe and (
            request.epoch > self.promised
            or (request.epoch == self.promised and request.candidate == self.promised_to)
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
        if request.HasField("checkpoint"):  # my log ends before the leader's begins
            self.install(request.checkpoint)
        prev, prev_epoch, entries = self._past_base(
            request.prev, request.prev_epoch, list(request.entries)
        )
        if prev > self.last or (prev >= self.base and self.epoch_at(prev) != prev_epoch):
            # not the entry they follow: the leader sends what follows my committed entries,
            # which every later leader holds alike
            return pb.LogAppendReply(taken=False, epoch=self.promised, last=self.committed)
        for at, entry in enumerate(entries, prev + 1):
            if at <= self.last:
                if self.entry(at).epoch == entry.epoch:
                    continue  # the same entry (an append sent again)
                self._truncate(at - 1)  # never committed: a later epoch replaced it
            self.extend([entry])
        matched = request.prev + len(request.entries)
        # what the leader knows committed, as far as this copy matches the leader's log
        self.committed = max(self.committed, min(request.commit, matched))
        return pb.LogAppendReply(taken=True, epoch=self.promised, last=matched)

    def on_fetch(self, request: pb.LogFetch) -> pb.LogFetchReply:
        """The entries after a position, for a new leader recovering the log; none if I
        promised a higher epoch since it asked (they may not be those I told it of)."""
        if self.promised > request.epoch:
            return pb.LogFetchReply(promised=self.promised)
        after = max(min(request.after, self.last), self.base)
        reply = pb.LogFetchReply(
            entries=self.after(after),
            after=after,
            after_epoch=self.epoch_at(after),
            promised=self.promised,
        )
        if after > request.after:  # those asked for are folded: the checkpoint instead
            assert self.checkpoint is not None  # (a base above 0 is a checkpoint's)
            reply.checkpoint.CopyFrom(self.checkpoint)
        return reply

    def take(
        self,
        after: int,
        after_epoch: int,
        entries: list[pb.LogEntry],
        checkpoint: pb.LogCheckpoint | None = None,
    ) -> None:
        """A recovering leader's own copy takes another member's entries after a position
        (whose entry must be the one it holds there, or the `checkpoint` they follow):
        what it held after it, never committed, goes."""
        if checkpoint is not None:
            self.install(checkpoint)
        after, after_epoch, entries = self._past_base(after, after_epoch, entries)
        if after > self.last or self.epoch_at(after) != after_epoch:
            raise ValueError(f"the entries do not follow mine at {after} of epoch {after_epoch}")
        self._truncate(after)
        self.extend(entries)
