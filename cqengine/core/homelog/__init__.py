"""The home's log (docs/home-log.md): one replicated log per home key, its leader the node
that serves the key, its entries appended only in an epoch a majority of its members
promised, so that no partition or pause lets two nodes number one home.

- `log`: one member's copy of a log, and its answers to a leader (promise, append, fetch);
- `leader`: what the node that serves the key does with them: start an epoch (promises,
  recovery), append and commit;
- `derive`: the mailboxes, alert numbers and all, that a log's entries make, from any
  checkpoint: every member derives the leader's; kept as columns (`table`), the log's
  subscriptions named by row (`rows`).

What a node does with the logs it keeps and leads, the role, is the home's
(cqengine.core.home.homes).
"""
