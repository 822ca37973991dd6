"""cellctl: the Cellbed command line. Every command takes --json; tables by default.

The verbs' arguments are in cellbed/cli/parser.py; each verb runs a function of one sub-command
module (cell_cmd, vm_cmd, bench, run_cmd, report_cmd, sweep_cmd, chaos_cmd, masb_cmd, megha_cmd, pki_cmd, ui_cmd), which is imported
only when that verb runs: `cellctl --help` and the light verbs start without importing numpy,
matplotlib and the agents.
"""
from __future__ import annotations

import argparse
import asyncio
import faulthandler
import logging
import os
import signal
import sys
import traceback
from types import ModuleType
from typing import Any, Callable

import grpc

from cellbed.cli.parser import build_parser as _build_parser
from cellbed.domain import errors


def _module(name: str) -> ModuleType:
    """The sub-command module *name*, loaded when its verb runs (the one function-local import
    tests/unit/test_layout.py allows)."""
    if name == "cell_cmd":
        from cellbed.cli import cell_cmd as mod
    elif name == "vm_cmd":
        from cellbed.cli import vm_cmd as mod
    elif name == "bench":
        from cellbed.cli import bench as mod
    elif name == "run_cmd":
        from cellbed.cli import run_cmd as mod
    elif name == "report_cmd":
        from cellbed.cli import report_cmd as mod
    elif name == "sweep_cmd":
        from cellbed.cli import sweep_cmd as mod
    elif name == "chaos_cmd":
        from cellbed.cli import chaos_cmd as mod
    elif name == "compare_cmd":
        from cellbed.cli import compare_cmd as mod
    elif name == "masb_cmd":
        from cellbed.cli import masb_cmd as mod
    elif name == "megha_cmd":
        from cellbed.cli import megha_cmd as mod
    elif name == "pki_cmd":
        from cellbed.cli import pki_cmd as mod
    elif name == "explain_cmd":
        from cellbed.cli import explain_cmd as mod
    elif name == "policy_cmd":
        from cellbed.cli import policy_cmd as mod
    elif name == "ui_cmd":
        from cellbed.cli import ui_cmd as mod
    else:
        raise ValueError(f"no cellctl sub-command module {name!r}")
    return mod


def _handler(module: str, function: str) -> Callable[[Any], Any]:
    def run(args):
        return getattr(_module(module), function)(args)
    run.__name__ = run.__qualname__ = function
    return run


def build_parser() -> argparse.ArgumentParser:
    return _build_parser(_handler)


# Refusals of the request itself: the user can fix the command line (exit 2). Anything else that
# the project raises on purpose (unreachable daemon, deadline, hypervisor failure) exits 1.
USAGE_CODES = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.ALREADY_EXISTS,
               grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.OUT_OF_RANGE}


def main(argv: list[str] | None = None) -> None:
    if argv is None:            # run as a program: `kill -USR1 PID` prints every thread's stack (a hang)
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        res = args.fn(args)
        if asyncio.iscoroutine(res):
            asyncio.run(res)
    except errors.CellbedError as e:
        print(f"cellctl: {type(e).__name__} ({e.code.name}): {e}", file=sys.stderr)
        raise SystemExit(2 if e.code in USAGE_CODES else 1)
    except KeyboardInterrupt:
        print("cellctl: interrupted", file=sys.stderr)
        raise SystemExit(130)
    except (SystemExit, GeneratorExit):
        raise
    except Exception as e:  # a bug or an unforeseen failure: one line; the traceback only with -v
        if args.verbose:
            traceback.print_exc()
        where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        at = f" at {os.path.basename(where.filename)}:{where.lineno}" if where else ""
        print(f"cellctl: unexpected {type(e).__name__}{at}: {e} (rerun with -v for the traceback)", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
