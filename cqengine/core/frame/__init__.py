"""What the roles share on a node: its context (`context`), the checks every message
passes before a role acts on it (`checks`), the documents a DN holds for resolution
(`documents`), and what an observer is told (`observer`)."""
