#!/usr/bin/env python3
"""The single codegen step: proto/cellbed/v1/*.proto -> cellbed/v1/*_pb2*.py.

Usage: genproto.py [OUTDIR]   (default: the repository root, so the stubs land in cellbed/v1/)
The freshness test runs this into a temporary folder and compares the result with the
committed stubs; never edit the generated files by hand.
"""
import pathlib
import sys

from grpc_tools import protoc
import grpc_tools

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTO = ROOT / "proto"


def generate(outdir: pathlib.Path) -> list[pathlib.Path]:
    outdir.mkdir(parents=True, exist_ok=True)
    sources = sorted(PROTO.glob("cellbed/v1/*.proto"))
    include = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    args = ["protoc", f"-I{PROTO}", f"-I{include}", f"--python_out={outdir}",
            f"--pyi_out={outdir}", f"--grpc_python_out={outdir}"]
    args += [str(s.relative_to(PROTO)) for s in sources]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return sorted((outdir / "cellbed" / "v1").glob("*_pb2*.py*"))


if __name__ == "__main__":
    out = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    for f in generate(out):
        print(f.relative_to(out))
