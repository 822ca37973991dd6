"""Migration policy: the pre-copy cost model (cost) and the completion-timeout policy (timeout)."""
