"""What a document's and a query's terms become, purely: a document's Bloom filter
(`bloom`), the hot terms' presence headers (`presence`), a query analyzed into its
alternatives (`queries`), which term a query is indexed under (`indexing`), synopses of the
popular terms (`synopsis`), and the ring's settings that choose among them (`settings`).
Imports basis."""
