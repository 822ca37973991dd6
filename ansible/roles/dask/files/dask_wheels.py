#!/usr/bin/env python3
"""The controller's Dask, for the hosts (roles/dask/tasks/install.yml): run with the Python that
runs ansible-playbook (whose cellctl sweep is Dask's client), so the hosts get the same versions.

    dask_wheels.py PACKAGE... [--wheels OUTDIR]

Prints one JSON object: {"python", "versions": {package: version}, "pins": ["package==version"],
"id", "dir", "wheels", "changed"}. With --wheels, OUTDIR/<id>/ holds a wheel of every pin (pip wheel
--no-deps), built unless already there: <id> covers the pins and this Python, so the same versions
give the same folder and files (a second playbook run changes nothing).
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile


def main(argv: list[str]) -> int:
    out = None
    if "--wheels" in argv:
        i = argv.index("--wheels")
        out = os.path.abspath(argv[i + 1]) if i + 1 < len(argv) else None
        argv = argv[:i] + argv[i + 2:]
        if out is None:
            print(__doc__, file=sys.stderr)
            return 2
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    versions = {}
    for p in argv:
        try:
            versions[p] = importlib.metadata.version(p)
        except importlib.metadata.PackageNotFoundError:
            print(f"the controller's Python ({sys.executable}) has no {p}: install Cellbed's dependencies "
                  "(dask[distributed]) into it", file=sys.stderr)
            return 1
    pins = [f"{p}=={v}" for p, v in versions.items()]
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    key = f"{py}-{sys.platform}\n" + "\n".join(sorted(pins))
    ident = "dask-" + hashlib.sha256(key.encode()).hexdigest()[:16]
    res = {"python": py, "versions": versions, "pins": pins, "id": ident, "dir": "", "wheels": [], "changed": False}
    if out:
        folder = os.path.join(out, ident)
        if not os.path.isdir(folder):
            os.makedirs(out, exist_ok=True)
            # Into a temporary folder next to it, then renamed: the folder is complete or absent.
            tmp = tempfile.mkdtemp(prefix=".tmp-", dir=out)
            try:
                subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", tmp, *pins],
                               check=True, stdout=sys.stderr)
                os.chmod(tmp, 0o755)
                os.rename(tmp, folder)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            res["changed"] = True
        res["dir"] = folder
        res["wheels"] = sorted(n for n in os.listdir(folder) if n.endswith(".whl"))
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
