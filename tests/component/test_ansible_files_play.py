"""roles/prometheus/tasks/tls.yml through ansible-playbook on this machine (connection local, into a
temporary folder): the role's certificate task, now one run of library/cellbed_files.py, installs
the three files with their modes, notifies its handler once, and a second run changes nothing. The
cellbed, libvirt_host, dask and mqtt roles' tasks run on real hosts in integration/test_ansible.py."""
import grp
import json
import os
import subprocess
import sys
from pathlib import Path

ANSIBLE_DIR = Path(__file__).resolve().parents[2] / "ansible"
PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"

PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: The role's TLS tasks
      ansible.builtin.include_tasks: {tasks}
  handlers:
    - name: Reload prometheus
      ansible.builtin.copy:
        content: "reloaded"
        dest: "{{{{ prometheus_tls_dir }}}}/../reloaded-{{{{ run }}}}"
        mode: "0644"
"""


def play(tmp: Path, run: int, extra: dict) -> subprocess.CompletedProcess:
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCAL_TEMP": str(tmp / "local"),
           "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg")}
    return subprocess.run([str(PLAYBOOK), "-i", "localhost,", str(tmp / "play.yml"), "-e", json.dumps({**extra, "run": run})],
                          cwd=ANSIBLE_DIR, env=env, capture_output=True, text=True, timeout=300)


def test_the_certificate_task_installs_three_files_once_and_a_second_run_changes_nothing(tmp_path):
    src = tmp_path / "controller"
    src.mkdir()
    for name, text in (("ca.crt", "CA\n"), ("p.crt", "CERT\n"), ("p.key", "KEY\n\n")):
        (src / name).write_text(text)
    (tmp_path / "play.yml").write_text(PLAY.format(tasks=ANSIBLE_DIR / "roles" / "prometheus" / "tasks" / "tls.yml"))
    pki = tmp_path / "etc" / "cellbed-pki"
    extra = {"prometheus_tls": True, "prometheus_tls_dir": str(pki), "prometheus_group": grp.getgrgid(os.getgid()).gr_name,
             "prometheus_tls_ca_src": str(src / "ca.crt"), "prometheus_tls_cert_src": str(src / "p.crt"),
             "prometheus_tls_key_src": str(src / "p.key"), "prometheus_tls_ca_file": str(pki / "ca.crt"),
             "prometheus_tls_cert_file": str(pki / "prometheus.crt"), "prometheus_tls_key_file": str(pki / "prometheus.key")}
    (tmp_path / "etc").mkdir()
    first = play(tmp_path, 1, extra)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    assert (pki / "prometheus.key").read_text() == "KEY\n\n"            # byte for byte: no newline stripped
    assert {f.name: oct(f.stat().st_mode & 0o777) for f in pki.iterdir()} == {
        "ca.crt": "0o644", "prometheus.crt": "0o644", "prometheus.key": "0o640"}
    assert (tmp_path / "etc" / "reloaded-1").exists()                  # the handler ran
    assert "KEY" not in first.stdout                                   # the key's content is never shown
    second = play(tmp_path, 2, extra)
    assert second.returncode == 0, second.stdout[-3000:]
    assert "changed=0" in second.stdout and not (tmp_path / "etc" / "reloaded-2").exists(), second.stdout[-3000:]
