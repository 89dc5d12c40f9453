"""The DN, a document's first stop: a batch published through this node, stored, copied
to its successors and announced (`dn`); after a partition, announced again."""
