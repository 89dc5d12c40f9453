"""Placement of subscriptions: a query homed and indexed under its key (`placement`),
and synopsis gossip with re-indexing (`gossip`)."""
