"""Alerts waiting for a subscriber: a subscription at its home and its mailbox (`mailboxes`),
alert batches as a home numbers them (`batches`), and a replica's copies of mailboxes kept
as columns (`copies`). Imports basis."""
