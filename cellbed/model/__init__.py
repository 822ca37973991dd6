"""The model cell (assembly layer): the unchanged agents on model backends, an in-process network
and a virtual clock, driven by a workload stream. :mod:`.cell` is the one model cell;
:mod:`.masb` and :mod:`.megha` are its front-end families; :mod:`.simulate` runs the Megha
paper's arrival experiments."""
