"""A run's results folder (DESIGN §12): ``files`` (its file names, the per-VM columns, the error
for an incomplete run), ``folder`` (which folder a run may write into), ``writer`` (writing it as
the run goes, the manifest) and ``reader`` (reading it back: ``load_run``)."""
