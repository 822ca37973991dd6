"""The real single-box cell as a runner's driver: ``driver`` (brings the cell up, always down
again), ``run`` (one live run: placements, SetWorkload, StopVm in compressed wall-clock time),
``poll`` (what it reads back every tick), ``stop`` (StopVm retries) and ``census`` (where every VM
is at the end)."""
