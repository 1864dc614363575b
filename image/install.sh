#!/bin/sh
# Installs gangsched into the filesystem this runs in, from a directory of
# wheels (the package's and every dependency's): the one way the image gets
# its contents, run by the published Dockerfile (RUN) and by `make image`
# (chroot into a Debian root filesystem) alike.
#
# The result: a virtualenv at /opt/gangsched with no pip or setuptools left in
# it, byte-compiled ahead of time (the root filesystem is read-only at run
# time, so nothing could be cached later), `gangsched` on PATH, and the
# non-root user 65532 that the image runs as.
set -eu
wheels="${1:?usage: install.sh WHEEL_DIR}"
prefix=/opt/gangsched

python3 -m venv "$prefix"
"$prefix/bin/python" -m pip install --quiet --no-index --no-deps --no-cache-dir \
  --disable-pip-version-check "$wheels"/*.whl
"$prefix/bin/python" -m pip uninstall --quiet --yes pip setuptools 2>/dev/null || true
find "$prefix" -name '__pycache__' -type d -prune -exec rm -rf {} +
"$prefix/bin/python" -m compileall -q "$prefix/lib" >/dev/null
ln -sf "$prefix/bin/gangsched" /usr/local/bin/gangsched

if ! getent passwd 65532 >/dev/null; then
  groupadd --gid 65532 gangsched
  useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin gangsched
fi
gangsched --version
