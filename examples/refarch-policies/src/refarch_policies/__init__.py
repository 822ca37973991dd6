"""The reference architecture's task sorting and allocation policies (SC18 §V-B), as Cellbed plugins."""
