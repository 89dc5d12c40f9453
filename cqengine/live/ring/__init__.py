"""Running a ring on one machine: `ring up`, `ring status` and `ring down` (`commands`),
over the node processes they start and stop (`processes`), the ring's certificates
(`certificates`), watching the ring converge and replicate (`convergence`), and the table
they print (`table`). Each name is imported from its module."""
