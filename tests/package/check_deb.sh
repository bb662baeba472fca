#!/usr/bin/env bash
# Installs the .deb built by `cmake --build build --target package` on this (Debian 12) machine
# and checks it as an operator would: the config passes --check-config, the service user
# exists, the unit is in place, and kpoold run as the service runs it (as kpool, on /run/kpool)
# hands out a real python3 kernel. Then purges the package. Needs root: scripts/dev test runs it
# in CI (a throwaway machine); set KPOOL_SKIP_PACKAGE_TEST=1 to skip it elsewhere.
set -euo pipefail
cd "$(dirname "$0")/../.."
deb=$(ls build/kpool_*_amd64.deb)
endpoint=ipc:///run/kpool/control
daemon_pid=

cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" || true
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq kpool >/dev/null 2>&1 || true
}
trap cleanup EXIT

DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "./$deb" >/dev/null
echo "installed $deb"
/usr/bin/kpoold --check-config /etc/kpool/kpool.toml
getent passwd kpool >/dev/null || { echo "no kpool user" >&2; exit 1; }
test -f /lib/systemd/system/kpoold.service || test -f /usr/lib/systemd/system/kpoold.service
dpkg-query -W -f='${Conffiles}\n' kpool | grep -q /etc/kpool/kpool.toml

# What systemd would do (no systemd runs in a CI container): a fresh /run/kpool for the user
# (RuntimeDirectory=), HOME (StateDirectory=).
if [ -S /run/kpool/control ]; then
  echo "a kpoold is serving /run/kpool/control already: not touching it" >&2
  exit 1
fi
rm -rf /run/kpool
install -d -o kpool -g kpool -m 0700 /run/kpool
# setpriv execs, so $! is kpoold itself and its exit status is kpoold's.
setpriv --reuid=kpool --regid=kpool --init-groups env HOME=/var/lib/kpool \
  /usr/bin/kpoold --config /etc/kpool/kpool.toml >/tmp/kpool-package-test.log 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do
  /usr/bin/kpool --endpoint "$endpoint" ping >/dev/null 2>&1 && break
  sleep 0.1
done
/usr/bin/kpool --endpoint "$endpoint" ping
reply=$(/usr/bin/kpool --endpoint "$endpoint" acquire python3 --timeout 60s --json)
field() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$reply" "$1"; }
file=$(field connection_file)
id=$(field kernel_id)
test "$(stat -c %U:%a "$file")" = "kpool:600"
/usr/bin/kpool --endpoint "$endpoint" release "$id"
kill -TERM "$daemon_pid"
wait "$daemon_pid"
daemon_pid=

# A sandboxed pool with the installed helper (/usr/lib/kpool/kpool-sandbox), kpoold as the
# service's user: the kernel is pid 2 of its own pid namespace and sees no kpoold.
test -x /usr/lib/kpool/kpool-sandbox
sandboxed=/tmp/kpool-package-sandbox.toml
printf '[daemon]\ncontrol = "%s"\nruntime_dir = "/run/kpool"\n[pools.box]\nkernelspec = "python3"\nsize = 1\nisolation = "sandbox"\n' \
  "$endpoint" >"$sandboxed"
chmod 644 "$sandboxed"
setpriv --reuid=kpool --regid=kpool --init-groups env HOME=/var/lib/kpool \
  /usr/bin/kpoold --config "$sandboxed" >/tmp/kpool-package-sandbox.log 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do
  /usr/bin/kpool --endpoint "$endpoint" ping >/dev/null 2>&1 && break
  sleep 0.1
done
seen=$(/usr/bin/kpool --endpoint "$endpoint" exec --pool box --timeout 60s \
  'import os; print(os.getpid(), any(p.isdigit() and int(p) > 2 and open("/proc/%s/comm" % p).read().startswith("kpoold") for p in os.listdir("/proc")))')
test "$seen" = "2 False" || { echo "sandboxed kernel saw: $seen" >&2; cat /tmp/kpool-package-sandbox.log >&2; exit 1; }
kill -TERM "$daemon_pid"
wait "$daemon_pid"
daemon_pid=
rm -f "$sandboxed"
rm -rf /run/kpool
echo "package check passed: $deb (acquired kernel $id as user kpool; a sandboxed kernel too)"
