#!/usr/bin/env python3
"""Build Cellbed's wheels on the Ansible controller, for hosts that install without PyPI.

    build_wheelhouse.py SOURCE OUTDIR [--deps]

SOURCE is a Cellbed checkout. Writes, unless already there:
  OUTDIR/cellbed-<source hash>/cellbed-<version>-py3-none-any.whl
  OUTDIR/deps-<dependency hash>/*.whl         (with --deps: every dependency, for this Python)
  OUTDIR/deps-<dependency hash>.tar           (the same wheels in one file, cheap to copy)
and prints one JSON object: {"changed", "wheel", "deps_dir", "deps_tar", "deps_id", "deps_last",
"python", "source_sha256"}.
The hashes cover what goes into the wheel, so an unchanged checkout builds nothing and the
hosts see byte-identical files (a second playbook run changes nothing).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib

# What the wheel is built from: pyproject's package folders and the project file itself.
SKIP_DIRS = {"__pycache__", ".pytest_cache", "build", ".venv", ".git", "cellbed.egg-info"}


def package_dirs(src: str, pyproject: dict) -> list[str]:
    tool = pyproject.get("tool", {}).get("setuptools", {})
    dirs = set(tool.get("package-dir", {}).values()) or {pyproject["project"]["name"]}
    return sorted(d for d in dirs if os.path.isdir(os.path.join(src, d)))


def source_sha256(src: str, pyproject: dict) -> str:
    h = hashlib.sha256()
    files = ["pyproject.toml"]
    for d in package_dirs(src, pyproject):
        for root, subdirs, names in os.walk(os.path.join(src, d)):
            subdirs[:] = sorted(s for s in subdirs if s not in SKIP_DIRS)
            files += [os.path.relpath(os.path.join(root, n), src) for n in sorted(names)
                      if not n.endswith((".pyc", ".pyo"))]
    for rel in sorted(files):
        h.update(rel.encode() + b"\0")
        with open(os.path.join(src, rel), "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def deps_sha256(pyproject: dict) -> str:
    deps = "\n".join(sorted(pyproject["project"].get("dependencies", [])))
    tag = f"{sys.version_info.major}.{sys.version_info.minor}-{sys.platform}"
    return hashlib.sha256(f"{tag}\n{deps}".encode()).hexdigest()


def pip_wheel(args: list[str], dest: str) -> None:
    """Build into a temporary folder next to *dest*, then rename: *dest* is complete or absent."""
    tmp = tempfile.mkdtemp(prefix=".tmp-", dir=os.path.dirname(dest))
    try:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--wheel-dir", tmp, *args],
                       check=True, stdout=sys.stderr)
        os.rename(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_tar(folder: str, path: str) -> None:
    """The wheels of *folder*, flat, in name order, with fixed owners and times: the same
    wheels always give the same bytes."""
    def norm(ti: tarfile.TarInfo) -> tarfile.TarInfo:
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = "root"
        ti.mtime = 0
        ti.mode = 0o644
        return ti
    tmp = path + ".tmp"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as t:
        for name in sorted(os.listdir(folder)):
            t.add(os.path.join(folder, name), arcname=name, filter=norm)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3) or (len(argv) == 3 and argv[2] != "--deps"):
        print(__doc__, file=sys.stderr)
        return 2
    src, out = os.path.abspath(argv[0]), os.path.abspath(argv[1])
    with open(os.path.join(src, "pyproject.toml"), "rb") as f:
        pyproject = tomllib.load(f)
    os.makedirs(out, exist_ok=True)
    changed = False
    ssha = source_sha256(src, pyproject)
    wdir = os.path.join(out, f"cellbed-{ssha[:16]}")
    if not os.path.isdir(wdir):
        # A copy of the sources: setuptools writes build/ and *.egg-info next to what it builds.
        with tempfile.TemporaryDirectory() as stage:
            shutil.copy(os.path.join(src, "pyproject.toml"), stage)
            for d in package_dirs(src, pyproject):
                shutil.copytree(os.path.join(src, d), os.path.join(stage, d),
                                ignore=shutil.ignore_patterns(*SKIP_DIRS, "*.pyc"))
            pip_wheel(["--no-deps", stage], wdir)
        changed = True
    wheels = sorted(n for n in os.listdir(wdir) if n.endswith(".whl"))
    res = {"wheel": os.path.join(wdir, wheels[0]), "deps_dir": "", "deps_tar": "", "deps_id": "", "deps_last": "",
           "source_sha256": ssha,
           "python": f"{sys.version_info.major}.{sys.version_info.minor}"}
    if len(argv) == 3:
        ddir = os.path.join(out, f"deps-{deps_sha256(pyproject)[:16]}")
        if not os.path.isdir(ddir):
            pip_wheel(list(pyproject["project"].get("dependencies", [])), ddir)
            changed = True
        tar = ddir + ".tar"
        if not os.path.exists(tar):
            write_tar(ddir, tar)
            changed = True
        res.update(deps_dir=ddir, deps_tar=tar, deps_id=os.path.basename(ddir), deps_last=sorted(os.listdir(ddir))[-1])
    res["changed"] = changed
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
