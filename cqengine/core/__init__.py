"""The engine, free of I/O: indexing, inverted lists, announcement and pruning, the one
resolver, Bloom filters, synopses, the settings, and the engine node that runs them as
operations of Calls for a shell to drive. It knows nothing of being measured: an optional
observer (`observer`) is told what happens."""
