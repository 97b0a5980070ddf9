#!/usr/bin/env bash
# The container images of ./Dockerfile, built where a registry may not be reachable, and
# left as archives that `docker load` and `ctr images import` take (`make images`).
#
#   deploy/images/build.sh [build]  build the operator image and the runner image of each
#                                   flavour in FLAVORS; archive each under IMAGES_OUT and
#                                   print its path
#   deploy/images/build.sh engine   start the engine if none answers; print DOCKER=,
#                                   DOCKER_HOST= and (when known) CONTAINERD_ADDRESS= lines
#   deploy/images/build.sh stop     stop the dockerd this script started
#
# The engine: DOCKER_HOST when set (it must answer), else a Docker that answers `docker
# info`, else Debian's dockerd (apt-get install docker.io when missing; root), started with
# its own data root, exec root, socket, pid file and config under XS_DOCKER_DIR and no change
# to the host's network (--iptables=false --ip-forward=false --bridge=none; builds use the
# host's network). It keeps running for `docker load`/`docker run` (tests/chart/test_images.py).
#
# The base: PYTHON_IMAGE (default: the Dockerfile's ARG) when the engine has it or can pull
# it. Where the Dockerfile's default cannot be pulled, a base made once from Debian's packages
# with mmdebstrap (python3.11 with venv, from this machine's own apt sources, trusting what
# this machine trusts), cached as a root filesystem archive under XS_IMAGES_CACHE and imported
# with `docker import`. The Dockerfile itself stays an ordinary one.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${XS_CACHE:-$HOME/.cache/xla-sentinel}
XS_DOCKER_DIR=${XS_DOCKER_DIR:-$CACHE/docker}
XS_IMAGES_CACHE=${XS_IMAGES_CACHE:-$CACHE/images-build}
IMAGES_OUT=${IMAGES_OUT:-$CACHE/images}
REGISTRY=${REGISTRY:-ghcr.io/xla-sentinel}
TAG=${TAG:-0.1.0}
FLAVORS=${FLAVORS:-cpu}
PULL_TIMEOUT=${PULL_TIMEOUT:-60}
DEFAULT_BASE=$(sed -n 's/^ARG PYTHON_IMAGE=//p' "$ROOT/Dockerfile" | head -n1)
# Bumped when the recipe of the Debian base below changes (part of its cache key).
BASE_RECIPE=1

say() { echo "images: $*"; }
die() { echo "make images: $*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f s", b - a }'; }

need_root() {
  [ "$(id -u)" = 0 ] || die "$1 (run as root, or start a Docker engine and set DOCKER_HOST)"
}

apt_install() {  # PACKAGE...: install Debian packages without starting their services
  need_root "apt-get install $*"
  say "installing $* with apt-get"
  local policy=/usr/sbin/policy-rc.d made=""
  if [ ! -e "$policy" ]; then
    # docker.io and containerd would otherwise start system daemons that set up iptables
    # and a bridge; the one this script runs is its own.
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made=1
  fi
  local rc=0
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends "$@" >/dev/null; } || rc=$?
  [ -z "$made" ] || rm -f "$policy"
  [ "$rc" = 0 ] || die "apt-get install $* failed"
}

# --- the engine ---------------------------------------------------------------------------

DOCKER=docker
PRIVATE=""
SOCK=$XS_DOCKER_DIR/docker.sock

private_running() {
  [ -S "$SOCK" ] && DOCKER_HOST="unix://$SOCK" timeout 20 "$DOCKER" info >/dev/null 2>&1
}

start_private() {
  # Debian's client speaks the daemon's API version and builds with the legacy builder
  # (a newer client on the PATH would ask for the buildx plugin, which Debian lacks).
  command -v dockerd >/dev/null && [ -x /usr/bin/docker ] || apt_install docker.io
  DOCKER=/usr/bin/docker
  PRIVATE=1
  export DOCKER_HOST="unix://$SOCK"
  private_running && return 0
  need_root "starting dockerd"
  mkdir -p "$XS_DOCKER_DIR"
  # One start at a time (parallel test workers ask for the engine together).
  exec 8>"$XS_DOCKER_DIR.lock"
  flock 8
  private_running && return 0
  local pidfile=$XS_DOCKER_DIR/dockerd.pid log=$XS_DOCKER_DIR/dockerd.log
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    die "dockerd $(cat "$pidfile") of $XS_DOCKER_DIR runs but does not answer on $SOCK; see $log"
  fi
  rm -f "$pidfile" "$SOCK"
  unmount_leftovers
  [ -f "$XS_DOCKER_DIR/daemon.json" ] || echo '{}' >"$XS_DOCKER_DIR/daemon.json"
  say "starting dockerd (data in $XS_DOCKER_DIR, log $log)"
  # setsid and closed descriptors: the daemon outlives make, and holds neither a pipe of its
  # caller nor this script's locks.
  setsid dockerd --config-file "$XS_DOCKER_DIR/daemon.json" \
    --data-root "$XS_DOCKER_DIR/root" --exec-root "$XS_DOCKER_DIR/exec" \
    -H "unix://$SOCK" --pidfile "$pidfile" \
    --iptables=false --ip-forward=false --ip-masq=false --bridge=none \
    </dev/null >>"$log" 2>&1 8>&- 9>&- &
  for _ in $(seq 120); do
    private_running && return 0
    kill -0 $! 2>/dev/null || die "dockerd exited; last lines of $log: $(tail -n 5 "$log")"
    sleep 0.5
  done
  die "dockerd did not answer on $SOCK within 60 s; see $log"
}

engine() {
  if [ -n "${DOCKER_HOST:-}" ]; then
    if [ "$DOCKER_HOST" = "unix://$SOCK" ]; then start_private; return; fi
    timeout 20 docker info >/dev/null 2>&1 \
      || die "no Docker engine answers 'docker info' at DOCKER_HOST=$DOCKER_HOST; unset DOCKER_HOST to build with this machine's Docker, or with Debian's dockerd started here"
    return
  fi
  if command -v docker >/dev/null && timeout 20 docker info >/dev/null 2>&1; then return; fi
  start_private
}

unmount_leftovers() {  # what a stopped or killed daemon left mounted (its netns file, layers)
  awk -v d="$XS_DOCKER_DIR/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r \
    | while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
}

containerd_address() {  # the containerd a private dockerd manages (for `ctr images import`)
  local a=$XS_DOCKER_DIR/exec/containerd/containerd.sock
  if [ -n "$PRIVATE" ] && [ -S "$a" ]; then echo "$a"
  elif [ -n "$PRIVATE" ] && [ -S /run/containerd/containerd.sock ]; then echo /run/containerd/containerd.sock
  fi
}

# --- the base image -----------------------------------------------------------------------

debian_base() {  # prints the tag of a python3.11 base made from Debian's packages
  local sources=() f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -s "$f" ] && sources+=("$f")
  done
  [ ${#sources[@]} -gt 0 ] || die "no apt sources on this machine for mmdebstrap"
  local cas=(/usr/local/share/ca-certificates/*.crt) pipconf=()
  [ -e "${cas[0]}" ] || cas=()
  [ -f /etc/pip.conf ] && pipconf=(/etc/pip.conf)
  local key
  key=$( { echo "recipe $BASE_RECIPE"; cat "${sources[@]}" "${cas[@]}" "${pipconf[@]}"; } \
        | sha256sum | cut -c1-12)
  local tag=xla-sentinel/debian-python:3.11-bookworm-$key
  if "$DOCKER" image inspect "$tag" >/dev/null 2>&1; then echo "$tag"; return; fi
  local rootfs=$XS_IMAGES_CACHE/base/debian-python-$key.tar
  if [ ! -s "$rootfs" ]; then
    command -v mmdebstrap >/dev/null || apt_install mmdebstrap >&2
    need_root "mmdebstrap"
    mkdir -p "$(dirname "$rootfs")"
    local t0; t0=$(now)
    say "making a Debian bookworm base with python3.11 (mmdebstrap) in $rootfs" >&2
    # The machine's own apt sources (one list, in both formats); the machine's extra CA
    # certificates and pip.conf, so pip inside the build reaches PyPI as pip here does.
    local list=$XS_IMAGES_CACHE/base/sources.list
    : >"$list"
    for f in "${sources[@]}"; do
      case $f in *.sources) ;; *) grep -E '^\s*deb\s' "$f" >>"$list" || true ;; esac
    done
    local mirrors=()
    [ -s "$list" ] && mirrors+=("$list")
    for f in "${sources[@]}"; do case $f in *.sources) mirrors+=("$f") ;; esac; done
    local hooks=(--customize-hook='ln -sf python3 "$1/usr/bin/python"')
    if [ ${#cas[@]} -gt 0 ]; then
      hooks+=(--customize-hook="cp ${cas[*]} \"\$1/usr/local/share/ca-certificates/\" && chroot \"\$1\" update-ca-certificates >/dev/null 2>&1")
    fi
    [ ${#pipconf[@]} -eq 0 ] || hooks+=(--customize-hook='cp /etc/pip.conf "$1/etc/pip.conf"')
    mmdebstrap --variant=minbase --mode=root --format=tar \
      --include=python3,python3-venv,ca-certificates,passwd \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      "${hooks[@]}" bookworm "$rootfs.tmp" "${mirrors[@]}" >&2 \
      || { rm -f "$rootfs.tmp"; die "mmdebstrap failed"; }
    mv "$rootfs.tmp" "$rootfs"
    say "base root filesystem made in $(since "$t0") ($(du -m "$rootfs" | cut -f1) MB)" >&2
  fi
  # What python:3.11-slim sets too: an image made by `docker import` has no PATH.
  "$DOCKER" import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' \
    "$rootfs" "$tag" >/dev/null
  say "imported $rootfs as $tag" >&2
  echo "$tag"
}

base_image() {
  local want=${PYTHON_IMAGE:-$DEFAULT_BASE}
  if "$DOCKER" image inspect "$want" >/dev/null 2>&1; then echo "$want"; return; fi
  say "pulling $want" >&2
  if timeout "$PULL_TIMEOUT" "$DOCKER" pull -q "$want" >/dev/null 2>&1; then echo "$want"; return; fi
  [ -z "${PYTHON_IMAGE:-}" ] || die "PYTHON_IMAGE=$PYTHON_IMAGE is not in the engine and cannot be pulled"
  say "$want cannot be pulled here: using a base made from Debian's packages" >&2
  debian_base
}

# --- build and archive --------------------------------------------------------------------

MANIFEST_ROWS=()

build_one() {  # TARGET NAME [BUILD ARG...]
  local target=$1 name=$2; shift 2
  local ref=$REGISTRY/$name:$TAG t0
  t0=$(now)
  say "building $ref (target $target) on $BASE"
  local opts=() log=$XS_IMAGES_CACHE/logs/$name.log replaced
  replaced=$("$DOCKER" image inspect -f '{{.Id}}' "$ref" 2>/dev/null || true)
  mkdir -p "$(dirname "$log")"
  # A dockerd started with --bridge=none gives build steps no network of their own; its
  # BuildKit would want the buildx plugin, so the legacy builder (the Dockerfile needs no more).
  [ -z "$PRIVATE" ] || { opts=(--network host); export DOCKER_BUILDKIT=0; }
  "$DOCKER" build "${opts[@]}" --target "$target" --build-arg "PYTHON_IMAGE=$BASE" "$@" \
    -t "$ref" "$ROOT" >"$log" 2>&1 \
    || die "docker build --target $target failed; last lines of $log:
$(tail -n 25 "$log")"
  say "built $ref in $(since "$t0")"
  local id archive=$IMAGES_OUT/$name-$TAG.tar
  id=$("$DOCKER" image inspect -f '{{.Id}}' "$ref")
  if [ -n "$PRIVATE" ] && [ -n "$replaced" ] && [ "$replaced" != "$id" ]; then
    # The image this build took the tag from (1.2 GB for the runner) is left untagged: on a
    # machine that keeps this cache from run to run such images piled up until the disk was
    # full. This engine is the script's own, so it goes (its layers the new image shares stay;
    # `docker image prune` would take the legacy builder's cache with it: every build a full one).
    "$DOCKER" rmi "$replaced" >/dev/null 2>&1 && say "removed $replaced, the image it replaced"
  fi
  if [ -s "$archive" ] && [ "$(cat "$archive.id" 2>/dev/null)" = "$id" ]; then
    say "$archive holds $id already"
  else
    t0=$(now)
    rm -f "$archive" "$archive.id"
    "$DOCKER" save -o "$archive.tmp" "$ref"
    mv "$archive.tmp" "$archive"
    echo "$id" >"$archive.id"
    say "saved in $(since "$t0")"
  fi
  local mb; mb=$(du -m "$archive" | cut -f1)
  say "$target archive: $archive ($mb MB, $ref)"
  MANIFEST_ROWS+=("$(printf '{"target": "%s", "flavor": "%s", "ref": "%s", "id": "%s", "archive": "%s"}' \
    "$target" "${FLAVOR:-}" "$ref" "$id" "$archive")")
}

build() {
  local t_all; t_all=$(now)
  mkdir -p "$IMAGES_OUT"
  exec 9>"$IMAGES_OUT/.lock"  # one build at a time into the same archives
  flock 9
  engine
  BASE=$(base_image)
  FLAVOR="" build_one operator xla-sentinel-operator
  local flavor name
  for flavor in $FLAVORS; do
    case $flavor in
      cpu) name=xla-sentinel-runner ;;
      cuda|tpu) name=xla-sentinel-runner-$flavor ;;
      *) die "FLAVORS: cpu, cuda or tpu, not '$flavor'" ;;
    esac
    FLAVOR=$flavor build_one runner "$name" --build-arg "FLAVOR=$flavor"
  done
  local IFS=,
  printf '{"base": "%s", "docker_host": "%s", "images": [%s]}\n' \
    "$BASE" "${DOCKER_HOST:-}" "${MANIFEST_ROWS[*]}" >"$IMAGES_OUT/images.json"
  say "manifest: $IMAGES_OUT/images.json; all done in $(since "$t_all")"
}

case ${1:-build} in
  build) build ;;
  engine)
    engine
    echo "DOCKER=$(command -v "$DOCKER")"
    echo "DOCKER_HOST=${DOCKER_HOST:-}"
    addr=$(containerd_address)
    [ -z "$addr" ] || echo "CONTAINERD_ADDRESS=$addr"
    ;;
  stop)
    pidfile=$XS_DOCKER_DIR/dockerd.pid
    if [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null; then
      for _ in $(seq 60); do [ -f "$pidfile" ] || break; sleep 0.5; done
      say "stopped dockerd of $XS_DOCKER_DIR"
    fi
    unmount_leftovers
    ;;
  *) echo "usage: $0 [build|engine|stop]" >&2; exit 2 ;;
esac
