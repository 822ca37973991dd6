"""``cellctl compare``: ``run`` (a scenario on a real cell and on its model twin), ``table`` (the
numbers side by side, pure) and ``plots`` (the overlays)."""
