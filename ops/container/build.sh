#!/usr/bin/env bash
# Builds the worker's image with podman on a machine with no Docker engine and no container
# registry (only Debian's mirror and PyPI), as the project's test machines are:
#   1. podman, runc and debootstrap from Debian's packages, when missing (needs root);
#   2. a base image, once: a minimal Debian bookworm rootfs with Python 3.11 and its venv module,
#      made by debootstrap and imported as $TASKZILLA_BASE_IMAGE (skipped when that image exists);
#   3. the worker's image from the repo's Dockerfile on that base (--build-arg BASE_IMAGE); podman's
#      layer cache makes a rerun take seconds, and a code change reinstall only the package.
# Every command's output is appended to $TASKZILLA_BUILD_LOG; this prints a line per step, and the
# log's last lines when a step fails. Podman runs with ops/container/containers.conf (runc, cgroupfs,
# ulimits: why is said there) unless CONTAINERS_CONF names another file.
#
#   ops/container/build.sh            # env: TASKZILLA_IMAGE, TASKZILLA_BASE_IMAGE,
#                                     #      TASKZILLA_BUILD_LOG, DEBIAN_MIRROR
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
IMAGE="${TASKZILLA_IMAGE:-localhost/taskzilla-sleep:local}"
BASE_IMAGE="${TASKZILLA_BASE_IMAGE:-localhost/taskzilla-base:bookworm}"
LOG="${TASKZILLA_BUILD_LOG:-$REPO/.tmp/container/build.log}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$REPO/ops/container/containers.conf}"
PATH_IN_BASE=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

mkdir -p "$(dirname "$LOG")"
echo "=== $(date -u +%FT%TZ) ops/container/build.sh image=$IMAGE base=$BASE_IMAGE" >>"$LOG"

# step NAME COMMAND...: the command's output to the log; a line with its time, or its failure.
step() {
    local name="$1" started=$SECONDS rc=0
    shift
    echo "--- $name: $*" >>"$LOG"
    "$@" >>"$LOG" 2>&1 || rc=$?
    if ((rc != 0)); then
        echo "$name failed (exit $rc); the last lines of $LOG:" >&2
        tail -n 25 "$LOG" >&2
        exit 1
    fi
    echo "$name: done in $((SECONDS - started)) s"
}

install_packages() {
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

missing=()
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v runc >/dev/null 2>&1 || missing+=(runc)
command -v debootstrap >/dev/null 2>&1 || podman image exists "$BASE_IMAGE" 2>/dev/null || missing+=(debootstrap)
if ((${#missing[@]})); then
    if ((EUID != 0)); then
        echo "needs ${missing[*]} (Debian packages) and is not root: install them, or run this as root" >&2
        exit 1
    fi
    step "install ${missing[*]}" install_packages "${missing[@]}"
fi

make_base() (
    rootfs="$(mktemp -d /var/tmp/taskzilla-rootfs.XXXXXX)"
    # The rootfs is only an input of the import: removed whatever happens (a subshell's own trap).
    trap 'rm -rf "$rootfs"' EXIT
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$rootfs" "$MIRROR"
    chroot "$rootfs" apt-get clean
    rm -rf "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | podman import \
        --change "ENV PATH=$PATH_IN_BASE" --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE"
)

if podman image exists "$BASE_IMAGE"; then
    echo "base image $BASE_IMAGE: cached"
else
    step "base image $BASE_IMAGE (debootstrap bookworm + python3)" make_base
fi

build_args=(--build-arg "BASE_IMAGE=$BASE_IMAGE" --tag "$IMAGE" --file "$REPO/Dockerfile")
# Behind a TLS-intercepting proxy the host trusts its CA through PIP_CERT/SSL_CERT_FILE: the RUN
# steps get that bundle mounted read-only for pip, and nothing of it stays in the image.
ca="${PIP_CERT:-${SSL_CERT_FILE:-}}"
if [[ -n "$ca" && -f "$ca" ]]; then
    build_args+=(--volume "$ca:/run/host-ca.crt:ro" --build-arg PIP_CERT=/run/host-ca.crt)
fi
before="$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
step "worker image $IMAGE" podman build "${build_args[@]}" "$REPO"
after="$(podman image inspect --format '{{.Id}}' "$IMAGE")"
if [[ -n "$before" && "$before" != "$after" ]]; then
    # The previous build of this tag, now untagged: removed (kept if a container still uses it).
    podman rmi "$before" >>"$LOG" 2>&1 || true
fi
echo "$IMAGE: ${after:0:12}, $(podman image inspect --format '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}')"
