"""cellctl in-process, for tests: its exit code and what it printed."""
from __future__ import annotations

import contextlib
import io

from cellbed.cli import main as climain


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            climain.main(argv)
            rc = 0
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 1
    return rc, out.getvalue(), err.getvalue()
