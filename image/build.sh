#!/usr/bin/env bash
# Builds the gangsched image without a container engine and prints the
# directory holding it:
#   gangsched.oci.tar  an OCI image archive (two layers: the Debian base, then
#                      the package installed by image/install.sh)
#   rootfs/            that image unpacked, as a runtime would see it
#   config.json        the runtime spec of that image (user, args, environment)
#   size.txt           compressed and unpacked sizes
#
# The base is Debian's own packages (debootstrap, minbase variant: python3 and
# CA certificates, no compilers), since no registry is reachable to pull a
# python base from. Both steps are cached under ~/.cache/gangsched/image: the
# base by its package list and suite, the image by the hash of everything
# that goes into it (pyproject, lock file, sources, these scripts), so a
# second run with nothing changed prints the same directory at once.
#
# Exit status 3 means the host lacks debootstrap, umoci or runc and cannot
# install them (not root, or no apt-get). runc builds nothing: it is the OCI
# runtime tests/e2e/test_image.py runs the image with, installed here so that
# wherever the image builds it can be run.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cache="${GANGSCHED_CACHE:-$HOME/.cache/gangsched}/image"
suite=bookworm
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
packages=python3,python3-venv,ca-certificates
say() { echo "image: $*" >&2; }

need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v umoci >/dev/null || need+=(umoci)
command -v runc >/dev/null || need+=(runc)
keyring=/usr/share/keyrings/debian-archive-keyring.gpg  # to check Debian's signatures on Ubuntu too
[ -f "$keyring" ] || need+=(debian-archive-keyring)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    say "needs ${need[*]} (Debian packages) and cannot install them: run as root with apt-get"
    exit 3
  fi
  say "installing ${need[*]}"
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >&2
fi
if [ "$(id -u)" != 0 ]; then
  say "debootstrap and chroot need root"
  exit 3
fi

# -- the base root filesystem ------------------------------------------------
make_base() { # rootfs: Debian minbase with $packages, less what a runtime image never reads
  debootstrap --variant=minbase --keyring="$keyring" --include="$packages" "$suite" "$1" \
    "$mirror" >&2
  rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/* "$1"/usr/share/doc/* \
    "$1"/usr/share/man/* "$1"/usr/share/info/* "$1"/var/log/*.log "$1"/dev/*
  find "$1/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
}
base_key="$( (echo "$suite $packages"; declare -f make_base) | sha256sum | cut -c1-16)"
base="$cache/base-$base_key"
if [ ! -f "$base/done" ]; then
  say "debootstrap $suite minbase with $packages (a few minutes, once)"
  rm -rf "$base" && mkdir -p "$base"
  make_base "$base/rootfs"
  touch "$base/done"
fi

# -- the image ---------------------------------------------------------------
version="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$repo/gangsched/__init__.py")"
inputs=(pyproject.toml README.md image/install.sh image/build.sh)
[ -f "$repo/requirements.lock" ] && inputs+=(requirements.lock)
key="$( (cd "$repo" && sha256sum "${inputs[@]}" && find gangsched -name '*.py' -print0 \
  | sort -z | xargs -0 sha256sum; echo "$base_key") | sha256sum | cut -c1-16)"
out="$cache/gangsched-$version-$key"
if [ -f "$out/done" ]; then
  echo "$out"
  exit 0
fi
rm -rf "$out" && mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

say "wheels of gangsched $version and its dependencies"
python="${PYTHON:-python3}"
[ -x "$repo/.venv/bin/python" ] && python="$repo/.venv/bin/python"
constraints=()
[ -f "$repo/requirements.lock" ] && constraints=(--constraint "$repo/requirements.lock")
"$python" -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$work/wheels" \
  "${constraints[@]}" "$repo" >&2

say "OCI layout: base layer, then the package"
layout="$work/oci"
umoci init --layout "$layout"
umoci new --image "$layout:build"
umoci unpack --image "$layout:build" "$work/bundle" >&2
cp -a "$base/rootfs/." "$work/bundle/rootfs/"
# --refresh-bundle: the package's layer is then what changed since the base, on
# top of it; without it the next repack starts again from the empty image and
# the base is lost in one layer holding everything.
umoci repack --refresh-bundle --image "$layout:build" "$work/bundle"

rootfs="$work/bundle/rootfs"
cp -a "$work/wheels" "$rootfs/tmp/wheels"
cp "$repo/image/install.sh" "$rootfs/tmp/install.sh"
unshare --mount --fork sh -c "mount -t proc proc '$rootfs/proc' && mount --rbind /dev '$rootfs/dev' \
  && chroot '$rootfs' /bin/sh /tmp/install.sh /tmp/wheels" >&2
rm -rf "$rootfs/tmp/wheels" "$rootfs/tmp/install.sh"
umoci repack --image "$layout:build" "$work/bundle"

umoci config --image "$layout:build" --tag "$version" \
  --config.user 65532:65532 --config.workingdir / \
  --config.entrypoint gangsched --config.cmd run \
  --config.env PATH=/opt/gangsched/bin:/usr/local/bin:/usr/bin:/bin \
  --config.env PYTHONDONTWRITEBYTECODE=1 --config.env PYTHONUNBUFFERED=1 \
  --config.label org.opencontainers.image.title=gangsched \
  --config.label org.opencontainers.image.version="$version" \
  --config.label org.opencontainers.image.licenses=Apache-2.0 \
  --config.label org.opencontainers.image.source=https://github.com/gangsched/gangsched
umoci rm --image "$layout:build"
umoci gc --layout "$layout"
tar -C "$layout" -cf "$out/gangsched.oci.tar" .

# What the test runs is the image itself, unpacked as a runtime would.
# config.json is the runtime spec umoci derives from the image's config: the
# user, entrypoint and environment a runtime would start it with.
umoci unpack --image "$layout:$version" "$work/run" >&2
mv "$work/run/rootfs" "$work/run/config.json" "$out/"
layers="$(du -cb "$layout"/blobs/sha256/* | tail -1 | cut -f1)"
unpacked="$(du -sb "$out/rootfs" | cut -f1)"
printf 'compressed %s MB\nunpacked %s MB\n' \
  "$(( (layers + 500000) / 1000000 ))" "$(( (unpacked + 500000) / 1000000 ))" > "$out/size.txt"
say "$(tr '\n' ' ' < "$out/size.txt")"
touch "$out/done"
echo "$out"
