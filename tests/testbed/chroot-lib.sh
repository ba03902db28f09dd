# Shell functions shared by debian-chroot.sh and slurm-source.sh (sourced;
# the caller defines log()).  Both build a chroot in a temporary directory
# next to its target, named <prefix>.tmp.<pid>, and rename it into place.

# Removes the temporary directories of interrupted builds, <prefix>.tmp.*
# (their mounts died with the namespace they were made in); exits when one
# still has mounts.
remove_unfinished() {
    local old
    for old in "$1".tmp.*; do
        [ -e "$old" ] || continue
        if findmnt -rn -o TARGET | grep -qF "$old"; then
            log "$old still has mounts; not removing it"
            exit 1
        fi
        log "removing unfinished build $old"
        rm -rf --one-file-system "$old"
    done
}

# Sets the finished chroot $1 aside (<prefix> $2 .tmp.stale.<pid>) and
# removes it, so that a new build never mixes with it; exits when it still
# has mounts.
remove_stale() {
    if findmnt -rn -o TARGET | grep -qF "$1/"; then
        log "$1 still has mounts; not removing it"
        exit 1
    fi
    mv -T "$1" "$2.tmp.stale.$$"
    rm -rf --one-file-system "$2.tmp.stale.$$"
}

# The EXIT trap of a build: stops the builder's whole process group
# ($BUILDER: debootstrap, apt, dpkg, make) first, so that nothing writes
# into the directory being removed, then removes the unfinished $TMP and
# any extra paths given.
cleanup_build() {
    if [ -n "${BUILDER:-}" ] && kill -0 "$BUILDER" 2>/dev/null; then
        kill -TERM -- "-$BUILDER" 2>/dev/null || true
        wait "$BUILDER" 2>/dev/null || true
    fi
    if [ -n "${TMP:-}" ] && [ -e "$TMP" ]; then
        log "build incomplete; removing $TMP"
        rm -rf --one-file-system "$TMP" "$@"
    fi
}
