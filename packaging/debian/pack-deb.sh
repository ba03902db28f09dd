#!/bin/bash
# Packs a Debian package from a package tree, with one file first in its
# directory in the package's data:
#
#     bash packaging/debian/pack-deb.sh ROOT DEB FIRST
#
# ROOT is the tree (ROOT/DEBIAN/control and the maintainer scripts), DEB
# the package to write (an absolute path), FIRST a path in the tree
# (/usr/lib/<multiarch>/slurm-gpu-gres/libgres_rs-<version>.so). Run as
# root or under fakeroot, with ROOT's files owned by root.
#
# Why: dpkg unpacks a package's files in the order of its data tarball and
# renames each into place in that order, and dpkg-deb sorts them by name,
# so the plugin files (gpu_*, gres_*) come before libgres_rs-*.so. On an
# upgrade a slurmstepd starting between the rename of a new plugin file
# and that of the new library would find a plugin file naming a library
# that is not there yet. With the library first, every plugin file, old or
# new, finds its own library at every instant (dpkg removes the old
# library only after every new file is in place).
#
# dpkg-deb builds the package (control archive, checks); the data tarball
# is then written again in dpkg-deb's order with FIRST moved to just after
# its directory, and the package assembled with ar as dpkg-deb does.
set -euo pipefail
root="${1:?pack-deb: ROOT DEB FIRST}"
deb="${2:?pack-deb: ROOT DEB FIRST}"
first="${3:?pack-deb: ROOT DEB FIRST}"
first="./${first#/}"
case "$deb" in /*) ;; *) deb="$PWD/$deb" ;; esac

dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >&2
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && ar x "$deb" && [ -f debian-binary ] && [ -f control.tar.xz ] && [ -f data.tar.xz ])
(cd "$root" && find . -path ./DEBIAN -prune -o -print | LC_ALL=C sort) |
    awk -v first="$first" -v dir="$(dirname "$first")" '$0 == first { next } { print } $0 == dir { print first }' >"$work/files"
if ! grep -qxF "$first" "$work/files"; then
    echo "pack-deb: no $first in $root" >&2
    exit 2
fi
tar -C "$root" --no-recursion --numeric-owner --owner=0 --group=0 --format=gnu -T "$work/files" -cf - | xz -6 >"$work/data.tar.xz"
rm -f "$deb"
(cd "$work" && ar rcD "$deb" debian-binary control.tar.xz data.tar.xz)
dpkg-deb --info "$deb" >/dev/null
