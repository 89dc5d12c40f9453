"""The engine core's limits and protocol constants, in one place.

What a message may carry is checked against these (cqengine.core.frame.checks), and the roles
that send messages keep within them; what a node keeps is bounded by them; the protocol's
waits are measured by them. Defined once here, and read as `limits.X` where used, so that
a test patching one sees the protocol change everywhere (but in defaults bound when a
module is imported, such as a new mailbox's size). The ring-wide settings a user chooses,
and their bounds, are in cqengine.core.terms.settings; the client API's, in cqengine.live.service.
"""

from __future__ import annotations

# ---- what a message may carry -------------------------------------------------------------

MAX_QUERY_TERMS = 64  # a query's terms (the client API's limit)
# Queries one SubscribeBatch call may carry, and index entries one Index message: at
# MAX_QUERY_TERMS terms of MAX_TERM_BYTES each, 1,000 entries (or home records) stay
# within gRPC's 64 MiB message (chord.live.grpc_transport.MAX_MESSAGE).
MAX_BATCH_QUERIES = 1_000
MAX_TERM_BYTES = 256  # one analyzed term's UTF-8 bytes
MAX_DOCNO = 256  # a docno's characters (a DN refuses to publish a longer one)
SNIPPET = 200  # characters of a document's body its alerts carry
TOKEN_HASH = 32  # bytes of a subscription's token hash (SHA-256)
# An announcement still travelling after this many hops is processed where it is: no node
# passes on one that has made HOP_LIMIT hops, so none arrives with more.
HOP_LIMIT = 160
WHOLE = 1 << 63  # a batch's share, divided along its announcement tree (Announcement.share)
# Documents in one batch. No setting bounds it: a live node's batches hold --batch-docs
# (any positive number up to this is taken), a PublishBatch call carries at most
# cqengine.live.service.MAX_REQUEST_DOCS, and a DN keeps DOC_CACHE documents for
# resolution, so a batch past that would lose its own documents before they are resolved.
# Announcements, resolution requests, reports, alert batches and held copies all name the
# documents of one batch: 65,536 is far beyond any a working node sends.
MAX_BATCH_DOCS = 1 << 16
# Digests per kind of record in a reconciliation request: a power of two from BUCKETS to
# MAX_BUCKETS, about one per RECORDS_PER_BUCKET records of the range (a bucket that
# differs costs its records' summaries; a digest costs 8 bytes whether or not it differs)
BUCKETS = 32
MAX_BUCKETS = 4096
RECORDS_PER_BUCKET = 16
DELETED_FOREVER = (1 << 64) - 1  # an unsubscribe's tombstone version: beats every entry

# ---- what a node keeps --------------------------------------------------------------------

DOC_CACHE = 20_000  # documents a DN keeps for resolution
HELD_DOCUMENTS = 20_000  # documents held for DNs at most (the oldest batches go first)
MAILBOX = 10_000  # undelivered alerts kept per subscription
MAILBOX_BYTES = 16 << 20  # and their docnos', titles' and snippets' UTF-8 bytes at most
# docnos of a subscription's latest alerts acknowledged, kept (on disk and with its copies)
# so that a document alerted again (its batch announced again after a failure) is known
SEEN_KEPT = 1024
# alerts a copy of a mailbox keeps that came before some numbered earlier (at most)
EARLY_ALERTS = 1024
# alerts a replica keeps as columns (about 20 bytes each) before it folds them into its
# mailboxes, an eighth of its subscriptions at a time (cqengine.core.alerts.copies)
COPIES_KEPT = 1 << 17
KEPT_RANGES = 8  # ranges whose records' summaries a node keeps between rounds
PEERS = 4096  # node references kept by address, and homes by where they were found

# ---- the protocol's waits and attempts ----------------------------------------------------

PLACE_ATTEMPTS = 5  # lookups to place or remove a query while ownership moves
ANNOUNCE_AGAIN = 3  # times a DN announces a batch again while reports are missing
RETRY_FIRST = 0.25  # s before an alert batch is tried again (then twice as long each time)
# s a DN keeps trying an alert batch its home holds for want of a majority of the home's
# log (Settings.home_log): a partition that heals within it loses nothing
HELD_FOR = 600.0
RETRY_MOST = 5.0  # s between two tries of a held batch, at most
# s before a node was lost that a DN's batches are announced again when it is found again,
# up all along (a partition healed: its side never heard them), beyond twice the DN's hold
# (a call across the cut waits that long before its peer counts as lost)
APART_MARGIN = 30.0
APART_SETTLE = 5.0  # s after a lost node is found before announcing again: the rings merge
APART_TRIES = 3  # times a DN asks a node found again how long it has been up
LOG_LEAVE_KEYS = 4096  # logs a member leaving names to one leader (checks.py refuses more)
LEFT_KEPT = 60.0  # s a node that told me it leaves for good is no member of my logs' sets
# s an acknowledgement waits to ride with the next round of appends to its home's log
# (Settings.home_log) before it makes one of its own: a stream acknowledges every second
ACK_LINGER = 0.05
# committed entries a home key's log keeps before a member folds them into a checkpoint
LOG_KEPT = 1024
STALE_AFTER = 5  # reconcile periods after which a copy of a batch its owner no longer has goes
GC_AFTER = 30.0  # s a replica keeps records no owner has reconciled with it (at least)
TOMBSTONE_TTL = 600.0  # s a tombstone is kept: every replica has it long before
