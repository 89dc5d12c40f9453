"""The engine, free of I/O: an engine node (`node`) holding the protocol's roles over one
context (`context`): the DN's documents (`documents`), placement of subscriptions
(`placement`), the DN (`dn`, `delivery`), announcement (`announcer`), the QN (`qn`), the
home (`home`), replication (`replication`), gossip and re-indexing (`gossip`), stats
(`stats`). What they compute with is pure: runs, knowledge, the resolver, inverted lists,
strategies, synopses, Bloom filters, mailboxes, records; every limit is in `limits`, every
check of a message in `checks`. A shell drives the roles' operations (generators of Calls)
and lends them a host (chord.host): nothing here reads a clock or a file. It knows
nothing of being measured: an optional observer (`observer`) is told what happens."""
