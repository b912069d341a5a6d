#!/bin/sh
# Installs the Debian packages zeus-pipe builds, tests and runs with — only the
# missing ones, with sudo when not root. Does nothing when all are present.
# Usage: scripts/deps.sh [--bench]   (--bench adds PyTorch for bench/)
set -eu
# An offline build (scripts/offline-bundle.sh's env.sh) brings its own libraries.
[ -n "${ZP_OFFLINE_PREFIX:-}" ] && exit 0

PKGS="build-essential cmake pkg-config libzmq3-dev liblmdb-dev libyaml-dev libmsgpack-dev
zlib1g-dev libopenblas-dev libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev libcmocka-dev libxxhash-dev libhdf5-dev dataset-fashion-mnist python3
python3-lmdb lmdb-utils clang iproute2 strace slurm-wlm munge
libprotobuf-c-dev protobuf-c-compiler protobuf-compiler python3-protobuf
python3-pil python3-torchvision python3-h5py python3-yaml python3-venv python3-pip python3-setuptools python3-wheel mypy
chromium"
if [ "${1:-}" = "--bench" ]; then
    PKGS="$PKGS python3-torch python3-numpy valgrind"
fi

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

echo "zeus-pipe: installing Debian packages:$missing" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "zeus-pipe: need root or sudo to install:$missing" >&2; exit 1; }
    SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
