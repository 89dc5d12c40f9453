"""The live shell: the engine node on a gRPC server (the client API, batching of what is
published, alert streams), the Python client, and the launcher of loopback rings."""
