#!/usr/bin/env bash
# The container image, built and run for real with podman (Debian's): a Debian 12 base made
# offline-friendly with mmdebstrap (no image registry is needed) and cached under build/, the
# image built from deploy/container/Containerfile with the .deb the package test just built
# (KPOOL_DEB=prebuilt: no second compile), then tests/container/test_container.py runs pods of
# it. Needs root (rootful podman), like the package test: scripts/dev test runs it after that.
set -euo pipefail
cd "$(dirname "$0")/../.."

cache=build/container
mkdir -p "$cache"
# This machine's podman: runc and cgroupfs (crun refuses hybrid cgroups), and default ulimits
# within the hard limits here (podman's own exceed them; its pods' infra containers use these).
cat > "$cache/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
EOF
export CONTAINERS_CONF=$PWD/$cache/containers.conf

deb=$(ls build/kpool_*.deb 2>/dev/null | head -n1 || true)
if [ -z "$deb" ]; then
  echo "no build/kpool_*.deb: build it first (cmake --build build --target package)" >&2
  exit 1
fi

base=localhost/kpool-base:bookworm
if ! podman image exists "$base"; then
  if [ ! -s "$cache/base-bookworm.tar" ]; then
    echo "container: making the Debian 12 base with mmdebstrap (once; cached in $cache)"
    # --format=tar: mmdebstrap infers the format from the name, and a name that does not end in
    # .tar (this .part) would make it a directory. The .part is renamed once complete, so an
    # interrupted run never leaves a truncated base that the -s test above takes as made.
    rm -rf "$cache/base-bookworm.tar.part"
    mmdebstrap --quiet --format=tar --variant=minbase --mode=root bookworm \
      "$cache/base-bookworm.tar.part" \
      "deb http://deb.debian.org/debian bookworm main" \
      "deb http://deb.debian.org/debian bookworm-updates main" \
      "deb http://deb.debian.org/debian-security bookworm-security main"
    mv "$cache/base-bookworm.tar.part" "$cache/base-bookworm.tar"
  fi
  podman import --quiet "$cache/base-bookworm.tar" "$base" >/dev/null
fi

started=$(date +%s)
podman build --quiet -f deploy/container/Containerfile --build-arg BASE="$base" \
  --build-arg KPOOL_DEB=prebuilt -t localhost/kpool:test . >/dev/null
echo "container: image built in $(( $(date +%s) - started )) s," \
  "$(podman image inspect localhost/kpool:test --format '{{.Size}}' | awk '{printf "%.0f MB", $1 / 1e6}')"

KPOOL_IMAGE=localhost/kpool:test KPOOL_CLI=$PWD/build/kpool \
  /usr/bin/python3 -m pytest -q -p no:cacheprovider --durations=10 tests/container
