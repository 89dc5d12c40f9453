"""The paper's algorithms over the index, as a document travels: what an announcement
carries and how each hop splits it (`runs`), what a QN knows of a document (`knowledge`),
resolving many candidates at once (`resolution`), the conditions besides terms
(`conditions`), and a QN's report of its matches (`matches`). Pure: no node, no I/O."""
