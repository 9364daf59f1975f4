#!/usr/bin/env bash
# deploy/scripts/image.sh - builds Spillway's image (deploy/Containerfile, target runtime) with podman as root,
# pulling nothing: the Debian 12 base is made by debootstrap from the Debian mirror and imported under the
# names the Containerfile uses; the build stages install their packages from the same mirror (host network).
# Keeps its image store in build/deploy/store (podman --root); prints the image's size and runs --version in
# it. Env: SPW_IMAGE (localhost/spillway:dev).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
IMAGE=${SPW_IMAGE:-localhost/spillway:dev}
DEP=build/deploy
export CONTAINERS_CONF=$ROOT/deploy/containers.conf
die() { echo "deploy-image: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root (podman's image store and debootstrap)"
need=()
for p in podman buildah debootstrap runc uidmap; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "deploy-image: installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" > /dev/null
fi
mkdir -p "$DEP/store" "$DEP/run"
P() { podman --root "$ROOT/$DEP/store" --runroot "$ROOT/$DEP/run" "$@"; }
if ! P image exists docker.io/library/debian:bookworm-slim; then
  mirror=$(sed -n 's/^URIs: \(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
  [ -n "$mirror" ] || mirror=$(sed -n 's/^deb \(http[^ ]*\) bookworm main.*/\1/p' /etc/apt/sources.list | head -1)
  [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
  if [ ! -x "$DEP/rootfs/usr/bin/apt-get" ]; then
    rm -rf "$DEP/rootfs"
    echo "deploy-image: debootstrap bookworm from $mirror"
    debootstrap --variant=minbase bookworm "$DEP/rootfs" "$mirror" > "$DEP/debootstrap.log" 2>&1 ||
      die "debootstrap failed (see $DEP/debootstrap.log)"
  fi
  tar -C "$DEP/rootfs" -c . | P import - docker.io/library/debian:bookworm > /dev/null 2>&1
  P tag docker.io/library/debian:bookworm docker.io/library/debian:bookworm-slim
fi
# The CUDA plugin goes in when this build made one (nvcc here), and only then (deploy/gpu/README).
rm -f deploy/gpu/libspillway-gpu.so
[ -f build/lib/libspillway-gpu.so ] && cp build/lib/libspillway-gpu.so deploy/gpu/
version=$(git describe --always --dirty 2>/dev/null || echo unknown)
echo "deploy-image: building $IMAGE ($version)"
t0=$(date +%s)
P build --pull=never --network host -f deploy/Containerfile --target runtime --build-arg SPW_VERSION="$version" \
  -t "$IMAGE" . > "$DEP/build.log" 2>&1 || { tail -30 "$DEP/build.log"; die "podman build failed (see $DEP/build.log)"; }
size=$(P image inspect --format '{{.Size}}' "$IMAGE")
echo "deploy-image: built $IMAGE in $(( $(date +%s) - t0 )) s, $((size / 1000000)) MB"
got=$(P run --rm --network none "$IMAGE" worker --version)
[ "$got" = "spillway $version (protocol $(sed -n 's/^#define SPW_PROTOCOL_VERSION \([0-9]*\)$/\1/p' lib/version.h))" ] ||
  die "the image's worker --version says \"$got\""
echo "deploy-image: $got"
if [ -f deploy/gpu/libspillway-gpu.so ]; then
  P run --rm --network none --entrypoint /bin/sh "$IMAGE" -c 'test -f /usr/local/lib/libspillway-gpu.so' ||
    die "the image lacks the CUDA plugin this build has"
  echo "deploy-image: with the CUDA plugin (/usr/local/lib/libspillway-gpu.so)"
else
  echo "deploy-image: no CUDA plugin (this build has none: no nvcc here); GPU workers serve on CPUs"
fi
