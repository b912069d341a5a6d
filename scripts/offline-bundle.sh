#!/bin/sh
# Gathers the Debian packages zeus-pipe builds and runs against (with their
# library dependencies) as .deb files into DIR (default .offline/), plus env.sh,
# for a GPU host without network access. There:
#
#   scripts/offline-bundle.sh --unpack DIR PREFIX   # dpkg -x every .deb into PREFIX
#   . PREFIX/env.sh                                 # PKG_CONFIG_*, LD_LIBRARY_PATH
#   scripts/build.sh                                # CMake finds them in PREFIX
#
# Nothing is installed into /; the host needs a C compiler, CMake, pkg-config
# and (for the cuda backend) the CUDA toolkit already.
set -eu
cd "$(dirname "$0")/.."
PKGS="libzmq3-dev liblmdb-dev libyaml-dev libmsgpack-dev libopenblas-dev libxxhash-dev
libcmocka-dev zlib1g-dev libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev libprotobuf-c-dev protobuf-c-compiler"

if [ "${1:-}" = "--unpack" ]; then
    dir=${2:?usage: offline-bundle.sh --unpack DIR PREFIX}
    prefix=${3:?usage: offline-bundle.sh --unpack DIR PREFIX}
    mkdir -p "$prefix"
    prefix=$(cd "$prefix" && pwd)
    n=0
    for deb in "$dir"/*.deb; do
        dpkg -x "$deb" "$prefix"
        n=$((n + 1))
    done
    arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
    cat > "$prefix/env.sh" <<ENV
# Source this before scripts/build.sh: libraries from $prefix, not from /.
export ZP_OFFLINE_PREFIX="$prefix"
export PKG_CONFIG_SYSROOT_DIR="$prefix"
export PKG_CONFIG_LIBDIR="$prefix/usr/lib/$arch/pkgconfig:$prefix/usr/lib/$arch/openblas-pthread/pkgconfig:$prefix/usr/share/pkgconfig:$prefix/usr/lib/pkgconfig"
export LD_LIBRARY_PATH="$prefix/usr/lib/$arch:$prefix/usr/lib/$arch/openblas-pthread\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PATH="$prefix/usr/bin:\$PATH" # protoc-c, for the build
export LIBRARY_PATH="$prefix/usr/lib/$arch:$prefix/usr/lib/$arch/openblas-pthread"
ENV
    echo "unpacked $n packages into $prefix; now: . $prefix/env.sh && scripts/build.sh"
    exit 0
fi

dir=${1:-.offline}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# every package the dev packages need, minus what any Debian system has
deps=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances $PKGS | grep -v '^ ' | grep -v '^<' | sort -u)
keep=""
for p in $deps; do
    case "$p" in
        libc6-dev|libcrypt-dev) ;;
        *-dev) keep="$keep $p" ;; # headers and .pc files: pkg-config needs every one
        libc6|libc6-dev|libgcc-s1|libstdc++6|gcc-*-base|debconf|dpkg|perl-base|tar|libc-dev-bin|linux-libc-dev|libcrypt1|libcrypt-dev|libnsl*|rpcsvc-proto|libtirpc*|libgssapi*|libkrb5*|libk5crypto*|libcom-err*|libkeyutils*|libssl*|libselinux*|libpcre*|libzstd1|liblzma5|libbz2-1.0|zlib1g|libmd0|libbsd0|*debconf*) ;;
        *) keep="$keep $p" ;;
    esac
done
cd "$dir"
# shellcheck disable=SC2086
apt-get download $keep >/dev/null
echo "$(ls "$dir"/*.deb | wc -l) packages in $dir ($(du -sh "$dir" | cut -f1)); on the GPU host:"
echo "  scripts/offline-bundle.sh --unpack $dir PREFIX && . PREFIX/env.sh && scripts/build.sh"
