"""Announcement down the ring's embedded trees (`announcer`) and the aggregate filters
that spare the hops holding nothing a document could match (`filters`)."""
