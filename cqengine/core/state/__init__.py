"""What a node holds under ring keys: inverted lists compiled for bulk work
(`postings`), identical queries merged (`merging`), records that merge, for replication
and reconciliation (`records`), their summaries as columns (`summaries`), and the journal
a shell keeps them by (`journal`). Imports basis, terms, alerts and the home log's copy."""
