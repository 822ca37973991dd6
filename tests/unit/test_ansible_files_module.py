"""ansible/library/cellbed_files.py, the module that installs a host's certificates and keys in one
run: what it writes, what it leaves alone, and that a bad spec changes nothing (no Ansible run)."""
import grp
import importlib.util
import os
import pwd
from pathlib import Path

import pytest

SPEC = importlib.util.spec_from_file_location(
    "cellbed_files", Path(__file__).resolve().parents[2] / "ansible" / "library" / "cellbed_files.py")
mod = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(mod)

USER, GROUP = pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name


def spec(dest, content="PEM\n", mode="0644"):
    return {"dest": str(dest), "content": content, "owner": USER, "group": GROUP, "mode": mode}


def test_new_files_are_written_with_their_mode_and_a_second_sync_changes_nothing(tmp_path):
    files = [spec(tmp_path / "ca.crt"), spec(tmp_path / "node.key", "KEY\n", "0600")]
    assert mod.sync(files, check=False) == [str(tmp_path / "ca.crt"), str(tmp_path / "node.key")]
    assert (tmp_path / "node.key").read_text() == "KEY\n"
    assert oct(os.stat(tmp_path / "node.key").st_mode & 0o7777) == "0o600"
    assert mod.sync(files, check=False) == []
    assert sorted(os.listdir(tmp_path)) == ["ca.crt", "node.key"]      # no temporary file left


@pytest.mark.parametrize("before, before_mode, want_changed, same_inode", [
    ("PEM\n", 0o644, False, True),     # identical: untouched
    ("PEM", 0o644, True, False),       # the content differs (a newline): replaced by rename
    ("PEM\n", 0o600, True, True),      # only the mode differs: fixed in place
])
def test_an_existing_file(tmp_path, before, before_mode, want_changed, same_inode):
    f = tmp_path / "ca.crt"
    f.write_text(before)
    os.chmod(f, before_mode)
    ino = os.stat(f).st_ino
    assert mod.sync([spec(f)], check=False) == ([str(f)] if want_changed else [])
    assert f.read_text() == "PEM\n" and os.stat(f).st_mode & 0o7777 == 0o644
    assert (os.stat(f).st_ino == ino) == same_inode


def test_check_mode_counts_a_file_whose_folder_an_earlier_task_would_make(tmp_path):
    assert mod.sync([spec(tmp_path / "new-folder" / "ca.crt")], check=True) == [str(tmp_path / "new-folder" / "ca.crt")]
    assert not (tmp_path / "new-folder").exists()


def test_check_mode_reports_and_writes_nothing(tmp_path):
    (tmp_path / "a").write_text("old\n")
    assert mod.sync([spec(tmp_path / "a"), spec(tmp_path / "b")], check=True) == [str(tmp_path / "a"),
                                                                                  str(tmp_path / "b")]
    assert (tmp_path / "a").read_text() == "old\n" and not (tmp_path / "b").exists()


@pytest.mark.parametrize("bad, message", [
    ({"mode": "0999"}, "mode '0999': allowed 0 and three octal digits"),
    ({"mode": "rw"}, "mode 'rw': allowed 0 and three octal digits"),
    ({"mode": "416"}, "mode '416': allowed"),          # YAML's unquoted 0640, as the module receives it
    ({"mode": "4755"}, "mode '4755': allowed"),         # no setuid through this module
    ({"owner": "no-such-user-cb"}, "owner 'no-such-user-cb' is not a user on this host"),
    ({"group": "no-such-group-cb"}, "group 'no-such-group-cb' is not a group on this host"),
    ({"dest": "relative/key"}, "dest must be an absolute path"),
    ({"dest": "/nonexistent-cb/key"}, "its folder does not exist"),
])
def test_a_bad_spec_names_the_file_and_changes_nothing(tmp_path, bad, message):
    first = spec(tmp_path / "first.crt")
    second = {**spec(tmp_path / "second.key"), **bad}
    with pytest.raises(mod.FileError, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        mod.sync([first, second], check=False)
    assert str(e.value).startswith(second["dest"])
    assert os.listdir(tmp_path) == []                  # the good first file was not written either


def test_a_folder_in_the_way_and_a_dest_given_twice_are_refused(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(mod.FileError, match="exists and is not a regular file"):
        mod.sync([spec(tmp_path / "d")], check=False)
    with pytest.raises(mod.FileError, match="a dest appears twice"):
        mod.sync([spec(tmp_path / "x"), spec(tmp_path / "x", "other\n")], check=False)
    assert not (tmp_path / "x").exists()
