"""What the roles share on a node: its context (`context`), the checks every message
passes before a role acts on it (`checks`), the documents a DN holds for resolution
(`documents`), what an observer is told (`observer`), and what one role needs of another
(`handoffs`)."""
