#!/usr/bin/python
"""Install a set of small files (certificates, keys) on a host in one module run.

ansible.builtin.copy in a loop runs two modules per file (a stat, then the copy or the attributes):
about 2.5 s per file on a namespace host, 25 s for libvirt's ten TLS files, at every run of
site.yml even when nothing changed. This module takes every file's content at once and writes
only what differs, each file atomically (a temporary file in the same folder, then rename).
"""
from __future__ import annotations

DOCUMENTATION = r"""
module: cellbed_files
short_description: Install several small files with their owner, group and mode in one run
description:
  - Each file is written only if its content differs, atomically, then given its owner, group and mode.
  - Reports changed if any file's content or attributes changed. Supports check mode.
options:
  files:
    description: The files. C(content) is never shown in the output.
    type: list
    elements: dict
    required: true
    suboptions:
      dest: {description: Absolute path; its folder must exist., type: path, required: true}
      content: {description: The file's exact content., type: str, required: true}
      owner: {description: User name., type: str, default: root}
      group: {description: Group name., type: str, default: root}
      mode: {description: Octal mode as a string, such as C(0640)., type: str, required: true}
author: Cellbed
"""

EXAMPLES = r"""
- name: Install the host's certificate and key
  cellbed_files:
    files:
      - {dest: /etc/x/cert.pem, content: "{{ lookup('file', 'cert.pem', rstrip=false) }}", mode: "0644"}
      - {dest: /etc/x/key.pem, content: "{{ lookup('file', 'key.pem', rstrip=false) }}", mode: "0600"}
"""

RETURN = r"""
changed_files:
  description: The files whose content or attributes changed (or would change in check mode).
  type: list
  elements: str
  returned: always
"""

import grp
import os
import pwd
import tempfile

from ansible.module_utils.basic import AnsibleModule


class FileError(Exception):
    pass


def _ids(owner: str, group: str, dest: str) -> tuple[int, int]:
    try:
        uid = pwd.getpwnam(owner).pw_uid
    except KeyError:
        raise FileError(f"{dest}: owner {owner!r} is not a user on this host") from None
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        raise FileError(f"{dest}: group {group!r} is not a group on this host") from None
    return uid, gid


def _mode(text: str, dest: str) -> int:
    try:
        m = int(text, 8)
    except (TypeError, ValueError):
        m = -1
    if not 0 <= m <= 0o7777:
        raise FileError(f"{dest}: mode {text!r} is not an octal mode (0000..7777)")
    return m


def plan(f: dict) -> tuple[bool, bool]:
    """(content differs, attributes differ) for one file spec, reading the host."""
    dest = f["dest"]
    if not os.path.isabs(dest):
        raise FileError(f"{dest}: dest must be an absolute path")
    if not os.path.isdir(os.path.dirname(dest)):
        raise FileError(f"{dest}: its folder does not exist")
    uid, gid = _ids(f.get("owner") or "root", f.get("group") or "root", dest)
    mode = _mode(f["mode"], dest)
    want = f["content"].encode()
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        return True, True
    if not os.path.isfile(dest) or os.path.islink(dest):
        raise FileError(f"{dest}: exists and is not a regular file")
    with open(dest, "rb") as fh:
        content_differs = fh.read() != want
    attrs_differ = (st.st_uid, st.st_gid, st.st_mode & 0o7777) != (uid, gid, mode)
    return content_differs, attrs_differ


def apply(f: dict, content_differs: bool) -> None:
    dest = f["dest"]
    uid, gid = _ids(f.get("owner") or "root", f.get("group") or "root", dest)
    mode = _mode(f["mode"], dest)
    if content_differs:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dest), prefix=".cellbed-")
        try:
            os.fchmod(fd, mode)
            os.fchown(fd, uid, gid)
            with os.fdopen(fd, "wb") as fh:
                fh.write(f["content"].encode())
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, dest)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    os.chown(dest, uid, gid)
    os.chmod(dest, mode)


def sync(files: list[dict], check: bool) -> list[str]:
    """Every file checked first (a bad spec changes nothing), then the differing ones written."""
    plans = [(f, *plan(f)) for f in files]
    dests = [f["dest"] for f in files]
    if len(set(dests)) != len(dests):
        raise FileError(f"files: a dest appears twice: {sorted({d for d in dests if dests.count(d) > 1})}")
    changed = [f["dest"] for f, c, a in plans if c or a]
    if not check:
        for f, c, a in plans:
            if c or a:
                apply(f, c)
    return changed


def main() -> None:
    module = AnsibleModule(argument_spec={"files": {"type": "list", "elements": "dict", "required": True, "options": {
        "dest": {"type": "path", "required": True}, "content": {"type": "str", "required": True, "no_log": True},
        "owner": {"type": "str", "default": "root"}, "group": {"type": "str", "default": "root"},
        "mode": {"type": "str", "required": True}}}}, supports_check_mode=True)
    try:
        changed = sync(module.params["files"], module.check_mode)
    except (FileError, OSError) as e:
        module.fail_json(msg=str(e), changed_files=[])
    module.exit_json(changed=bool(changed), changed_files=changed)


if __name__ == "__main__":
    main()
