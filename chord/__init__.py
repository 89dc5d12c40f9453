"""Chord (Stoica et al.) as the ring cqengine rides on: `protocol` is the I/O-free node and
its operations; `simulation` runs the very same nodes over an in-memory transport with a
virtual clock; `live` runs one behind a grpc.aio server with mutual TLS. The shells import
the protocol, never the other way round."""
