"""The domain types every layer shares: errors, VM specs, constraints, names, topics and the
protobuf <-> domain conversion (wire). Nothing here imports an agent."""
