#!/usr/bin/env bash
# Cellbed's entry point. Two commands do all the setup on a fresh Debian 12 machine (root):
#   ./cellbed.sh demo   installs what is missing, then runs the demo cell
#   ./cellbed.sh test   installs what is missing, then runs the whole test suite
# Other verbs: setup (install only), proto (regenerate gRPC stubs), bench-migration.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
VENV=$ROOT/.venv
APT_PKGS=(libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients libvirt-dev pkg-config mosquitto
          iproute2 util-linux busybox-static gcc libc6-dev python3-dev python3-venv gzip xz-utils zstd
          mount procps
          python3 openssh-server openssh-client supervisor python3-apt python3-debian debootstrap e2fsprogs
          prometheus
          chromium chromium-driver)   # the web UI's browser tests (cellctl ui, issue 30): Debian's, no browser download
BPO_PKGS=(qemu-system-x86 qemu-utils)

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

need_root() {
  [ "$(id -u)" = 0 ] || { echo "cellbed.sh: must run as root (namespaces, libvirtd, cgroups)" >&2; exit 1; }
}

apt_setup() {
  export DEBIAN_FRONTEND=noninteractive
  local src=/etc/apt/sources.list.d/cellbed-backports.sources updated=0
  if [ ! -f "$src" ] && ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    say "Adding the bookworm-backports apt source (QEMU 10: 7.2 loses guest writes in TCG live migration)"
    cat > "$src" <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    apt-get update -q; updated=1
  fi
  local missing=()
  for p in "${APT_PKGS[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
  local qv; qv=$(dpkg-query -W -f='${Version}' qemu-system-x86 2>/dev/null || true)
  case "$qv" in *bpo12*|1:1[0-9].*) ;; *) missing+=("${BPO_PKGS[@]}");; esac
  if [ ${#missing[@]} -gt 0 ]; then
    say "Installing Debian packages: ${missing[*]}"
    [ $updated = 1 ] || apt-get update -q
    local base=() p
    for p in "${APT_PKGS[@]}"; do [ "$p" = prometheus ] || base+=("$p"); done
    apt-get install -y -q --no-install-recommends "${base[@]}"
    apt-get install -y -q --no-install-recommends -t bookworm-backports "${BPO_PKGS[@]}"
    without_service_starts apt-get install -y -q --no-install-recommends prometheus
  fi
  prometheus_service_off
  # The kernel package for the guest is fetched by guest/build.sh with apt-get download.
}

# Runs "$@" (one apt-get install) under a policy-rc.d that refuses every service start; the
# policy-rc.d that was there, if any, is put back afterwards (also by the next run, after a crash).
without_service_starts() {
  local policy=/usr/sbin/policy-rc.d saved=/usr/sbin/policy-rc.d.cellbed-saved rc=0
  if [ -e "$policy" ] && [ ! -e "$saved" ]; then mv "$policy" "$saved"; fi
  printf '#!/bin/sh\n# Written by cellbed.sh for one apt-get install, and removed after it.\nexit 101\n' > "$policy"
  chmod 755 "$policy"
  "$@" || rc=$?
  if [ -e "$saved" ]; then mv -f "$saved" "$policy"; else rm -f "$policy"; fi
  return $rc
}

# Debian's prometheus package comes with a service that listens on every interface (:9090).
# Cellbed runs Prometheus itself (its tests; the Ansible role, on its own address), so the
# packaged service must be neither running nor enabled: with systemd as PID 1, disable --now;
# without it, no init script start links, no unit enabled for a later systemd boot, and no
# process started by the init script.
prometheus_service_off() {
  [ -e /lib/systemd/system/prometheus.service ] || [ -e /etc/init.d/prometheus ] || return 0
  if [ -d /run/systemd/system ]; then
    if systemctl is-enabled --quiet prometheus.service 2>/dev/null || systemctl is-active --quiet prometheus.service; then
      say "Stopping and disabling the packaged prometheus service (it listens on every interface)"
      systemctl disable --now prometheus.service
    fi
    return 0
  fi
  if compgen -G '/etc/rc[2-5].d/S??prometheus' >/dev/null; then
    say "Disabling the packaged prometheus init script (it would listen on every interface)"
    update-rc.d prometheus disable >/dev/null
  fi
  if [ -e /etc/systemd/system/multi-user.target.wants/prometheus.service ]; then
    deb-systemd-helper disable prometheus.service >/dev/null
  fi
  if [ -s /run/prometheus/prometheus.pid ] && kill -0 "$(cat /run/prometheus/prometheus.pid)" 2>/dev/null; then
    say "Stopping the prometheus that the packaged init script started"
    /etc/init.d/prometheus stop
  fi
}

venv_setup() {
  local stamp=$VENV/.cellbed-stamp want
  want=$(sha256sum pyproject.toml | cut -c1-16)
  if [ ! -x "$VENV/bin/python" ]; then
    say "Creating the venv with Debian's python3"
    /usr/bin/python3 -m venv "$VENV"
  fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    say "Installing Cellbed and its Python dependencies into .venv"
    "$VENV/bin/pip" install -q --upgrade pip
    "$VENV/bin/pip" install -q -e ".[dev]"
    echo "$want" > "$stamp"
  fi
}

# The outside plugin package of docs/policies.md, installed the way a user installs one (not
# editable), so that its entry points are found like any distribution's; again when its files change.
example_setup() {
  local stamp=$VENV/.refarch-policies-stamp want
  want=$(find examples/refarch-policies -type f \( -name '*.py' -o -name '*.toml' \) -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    say "Installing the example policy package examples/refarch-policies into .venv"
    "$VENV/bin/pip" install -q --no-build-isolation --no-deps ./examples/refarch-policies
    echo "$want" > "$stamp"
  fi
}

guest_setup() { bash guest/build.sh "$ROOT/build/guest"; }

# The web UI's chart library (Apache ECharts), from the npm registry at the version and integrity
# that cellbed/ui/assets/package-lock.json pins, into the git-ignored build/ui-assets (the page
# loads it from there: no CDN). Skipped when the lock file has not changed since the last install.
ui_assets_setup() {
  local src=$ROOT/cellbed/ui/assets dst=$ROOT/build/ui-assets want
  want=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -c1-16)
  if [ "$(cat "$dst/.cellbed-stamp" 2>/dev/null)" = "$want" ] && [ -f "$dst/node_modules/echarts/dist/echarts.min.js" ]; then
    return 0
  fi
  if ! command -v npm >/dev/null; then
    say "Installing Debian's npm (for the web UI's chart library)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends npm
  fi
  say "Installing the web UI's chart library (npm ci) into build/ui-assets"
  mkdir -p "$dst"
  cp "$src/package.json" "$src/package-lock.json" "$dst/"
  (cd "$dst" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  echo "$want" > "$dst/.cellbed-stamp"
}

# The suite in two tiers (issue 27). Tier 1 is everything that brings up no cell and no VM (unit,
# component, the example package's tests), on 2 pytest-xdist workers, one test file per worker
# (--dist loadfile: a file's module fixtures stay in one process). Tier 2 is the integration tests
# (real cells: namespaces, libvirtd, TCG guests), two test files at a time: a cell test keeps about
# 0.8 of this box's 2 cores busy (a per-test /proc/stat probe), so one file at a time left half the
# box idle (docs/results/suite.md). A cell test's module runs its tests in file order on one cell,
# so tier 2 never takes pytest-randomly's shuffle. Running the Ansible test beside tier 1 was
# measured slower than one after the other: both are CPU-bound, and three lanes on 2 cores thrash.
# `test` runs both and fails if either fails; `test --quick` runs tier 1 without the tests marked
# slow (a minute or more of CPU: the scale equivalence, the 500-host MASB run, the RPC fuzz,
# ansible-lint); `test ARGS...` (a path, -k, -m ...) hands ARGS to one serial pytest, as before.
run_tests() {
  local py="$VENV/bin/python" quick=0 rc1=0 rc2=0 t0 t1 args=()
  # The suite starts hundreds of Python processes (daemons, cellctl, sweep workers, golden runs):
  # where the environment sets PYTHONDONTWRITEBYTECODE, each compiled the tree again and pytest
  # rewrote every test module again in each worker. The tests cache bytecode in the tree's
  # __pycache__ folders (git ignores them; the wheelhouse skips them) whatever the environment says.
  export PYTHONDONTWRITEBYTECODE=
  for a in "$@"; do
    if [ "$a" = "--quick" ]; then quick=1; else args+=("$a"); fi
  done
  if [ ${#args[@]} -gt 0 ]; then
    if [ $quick = 1 ]; then
      exec "$py" -m pytest -ra -m "not integration and not slow" -n 2 --dist loadfile "${args[@]}"
    fi
    exec "$py" -m pytest -ra "${args[@]}"
  fi
  t0=$(date +%s)
  local tier1="not integration"
  if [ $quick = 1 ]; then tier1="not integration and not slow"; fi
  say "Tier 1: unit and component tests (no cell, no VM: -m '$tier1'), 2 workers"
  "$py" -m pytest -ra -m "$tier1" -n 2 --dist loadfile || rc1=$?
  t1=$(date +%s)
  say "Tier 1: exit $rc1 in $((t1 - t0)) s"
  if [ $quick = 1 ]; then return $rc1; fi
  # Tier 2 on CELLBED_TEST_LANES workers (default 2; 1: serially), a test file at a time per worker:
  # a file's cell lives on one worker, and no two files share a cell name or subnet
  # (tests/unit/test_integration_isolation.py).
  local lanes="${CELLBED_TEST_LANES:-2}" dist=()
  case "$lanes" in 1|2) ;; *) echo "CELLBED_TEST_LANES=$lanes: allowed 1..2" >&2; return 2 ;; esac
  if [ "$lanes" != 1 ]; then dist=(-n "$lanes" --dist loadfile --no-loadscope-reorder); fi
  say "Tier 2: integration tests (real cells), $lanes lane(s)"
  "$py" -m pytest -ra -p no:randomly -m integration "${dist[@]}" || rc2=$?
  say "Tier 2: exit $rc2 in $(($(date +%s) - t1)) s; whole suite $(($(date +%s) - t0)) s"
  [ $rc1 = 0 ] && [ $rc2 = 0 ]
}

setup() { need_root; apt_setup; venv_setup; example_setup; guest_setup; ui_assets_setup; }

case "${1:-}" in
  setup) setup ;;
  demo) setup; exec "$VENV/bin/python" -m cellbed.cli.demo "${@:2}" ;;
  test) setup; shift; run_tests "$@" ;;
  proto) "$VENV/bin/python" scripts/genproto.py ;;
  bench-migration) setup; exec "$VENV/bin/python" -m cellbed.cli.demo --bench "${@:2}" ;;
  *) echo "usage: ./cellbed.sh demo|test|setup|proto|bench-migration" >&2; exit 2 ;;
esac
