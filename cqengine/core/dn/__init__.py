"""The DN, the first and last stop of a document: a batch published through this node,
held until every QN it reached has reported (`dn`), its alerts delivered to their
homes (`delivery`)."""
