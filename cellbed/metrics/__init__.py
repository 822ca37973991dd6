"""One metrics path: the rows every cell writes, and the one tick-row function."""
