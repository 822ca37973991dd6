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
      mode: {description: Octal mode as a quoted string of 0 and three digits, such as C("0640")., type: str, required: true}
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


MODE_FORMAT = "0 and three octal digits, quoted, such as \"0640\""


def _mode(text: str, dest: str) -> int:
    # Four characters, quoted in YAML: an unquoted 0640 reaches the module as the integer 416, whose
    # text "416" would be taken for mode 0416 if any octal text were accepted.
    if not (isinstance(text, str) and len(text) == 4 and text[0] == "0" and all(c in "01234567" for c in text)):
        raise FileError(f"{dest}: mode {text!r}: allowed {MODE_FORMAT}")
    return int(text, 8)


class Plan:
    """One file resolved against the host: its ids and mode, and what differs."""

    def __init__(self, f: dict, check: bool) -> None:
        self.dest, self.content = f["dest"], f["content"].encode()
        if not os.path.isabs(self.dest):
            raise FileError(f"{self.dest}: dest must be an absolute path")
        self.uid, self.gid = _ids(f.get("owner") or "root", f.get("group") or "root", self.dest)
        self.mode = _mode(f["mode"], self.dest)
        self.content_differs = self.attrs_differ = True
        if not os.path.isdir(os.path.dirname(self.dest)):
            if check:           # in check mode the task that makes the folder did not run either
                return
            raise FileError(f"{self.dest}: its folder does not exist")
        try:
            st = os.lstat(self.dest)
        except FileNotFoundError:
            return
        if not os.path.isfile(self.dest) or os.path.islink(self.dest):
            raise FileError(f"{self.dest}: exists and is not a regular file")
        with open(self.dest, "rb") as fh:
            self.content_differs = fh.read() != self.content
        self.attrs_differ = (st.st_uid, st.st_gid, st.st_mode & 0o7777) != (self.uid, self.gid, self.mode)

    @property
    def changes(self) -> bool:
        return self.content_differs or self.attrs_differ

    def apply(self) -> None:
        if self.content_differs:
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(self.dest), prefix=".cellbed-")
            try:
                os.fchmod(fd, self.mode)
                os.fchown(fd, self.uid, self.gid)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(self.content)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, self.dest)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
        os.chown(self.dest, self.uid, self.gid)
        os.chmod(self.dest, self.mode)


def sync(files: list[dict], check: bool) -> list[str]:
    """Every file checked first (a bad spec changes nothing), then the differing ones written."""
    dests = [f["dest"] for f in files]
    if len(set(dests)) != len(dests):
        raise FileError(f"files: a dest appears twice: {sorted({d for d in dests if dests.count(d) > 1})}")
    plans = [Plan(f, check) for f in files]
    if not check:
        for p in plans:
            if p.changes:
                p.apply()
    return [p.dest for p in plans if p.changes]


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
