#!/usr/bin/env bash
# scripts/install-deps.sh - install every Debian package Spillway's build, tests and benchmarks need.
# Idempotent: installs only what is missing; safe to run as root on a fresh Debian 12 machine.
set -euo pipefail

PKGS=(
  build-essential pkg-config make git
  libgrpc-dev protobuf-c-compiler libprotobuf-c-dev
  libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev libwebp-dev libfftw3-dev check libsubunit-dev
  libflac-dev libmpg123-dev libvorbis-dev libopusfile-dev
  libssl-dev libjansson-dev libdlpack-dev libmicrohttpd-dev libzstd-dev libarchive-dev libcurl4-openssl-dev
  nginx-light prometheus curl tmux gnuplot-nox
  python3 python3-numpy python3-pil python3-torchvision python3-torch libopenblas0 python3-tqdm
  python3-torchaudio python3-soundfile python3-scipy espeak-ng flac lame vorbis-tools opus-tools
  util-linux tar shellcheck python3-pyflakes mypy help2man iproute2 iptables
  python3-venv python3-pip python3-setuptools python3-wheel
  plasma-workspace-wallpapers mate-backgrounds
  podman buildah debootstrap runc uidmap patchelf
  clang libclang-rt-14-dev
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# The manifest checks (deploy/scripts/check.sh) run on Node.js; Debian's when the machine has none.
command -v node > /dev/null && command -v npm > /dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
