"""Pure Megha policy (seed 001): constraint bit-vectors and first fit (match), an LM's true state
and its validation of a GM's placement (validation), a GM's eventually consistent view (view), fairness."""
