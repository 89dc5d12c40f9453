"""The home: where alerts are numbered into mailboxes and leave them when acknowledged
(`home`), the home keys' logs a node keeps and leads (`homes`, over cqengine.core.homelog),
the members leaving those logs (`departures`), what each subscriber's stream sends and its
acknowledgements release (`streams`), the copies for replicas (`replication`), and what a
node reports of itself (`stats`)."""
