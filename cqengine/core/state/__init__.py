"""What a node holds under ring keys: inverted lists compiled for bulk work
(`postings`), identical queries merged (`merging`), records that merge, for replication
and reconciliation (`records`: the store, of a part per kind of record, `entry_records`,
`home_records` and `held_batches`, with `replica_intake` taking a home's copies into the
home records and `ranges` telling which keys lie in a range), their summaries as columns
(`summaries`) and the steps of reconciliation over them (`reconciliation`), and the
journal a shell keeps them by (`journal`). Imports basis, terms, alerts and the home
log's copy."""
