"""The engine, free of I/O, in rooms along a document's path. Each room imports only the
rooms before it in this list (tests/project/test_structure.py keeps it so):

- `basis`: limits, errors, array idioms, ages;
- `terms`: Bloom filters, presence headers, queries, indexing strategies, synopses, settings;
- `alerts`: subscriptions and their mailboxes, a replica's copies;
- `homelog`: a home key's replicated log: a member's copy, its leader, what it derives;
- `state`: inverted lists, merging, records and their summaries, the journal;
- `resolution`: runs, knowledge, the resolver, conditions, a QN's report;
- `frame`: the node's context, message checks, the DN's documents, the observer;
- `dn`: the DN; `announcement`: announcer and filters; `qn`: the QN;
- `delivery`: the DN's reports gathered and delivered to the homes;
- `home`: the home, its logs, replication, stats; `placement`: placement and gossip;

and `node`, the engine node holding the roles behind one handler table. A shell drives the
roles' operations (generators of Calls) and lends them a host (chord.protocol.host): nothing here
reads a clock or a file. It knows nothing of being measured: an optional observer
(`frame.observer`) is told what happens."""
