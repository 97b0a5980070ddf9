#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and etcd from this folder's Go module into
# DEST, once: a binary already there is kept. DEST defaults to the folder cluster.py looks
# in: $XLA_SENTINEL_CONTROL_PLANE, else ~/.cache/xla-sentinel/controlplane-<k8s version>,
# outside the source tree so every clone on the machine reuses one build. Needs Go and the
# Go module proxy; about 2 GiB of memory per link. `build.sh --dir` prints DEST.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$here/go.mod")"
default="${XLA_SENTINEL_CONTROL_PLANE:-${XDG_CACHE_HOME:-$HOME/.cache}/xla-sentinel/controlplane-$version}"
if [ "${1:-}" = "--dir" ]; then echo "$default"; exit 0; fi
dest="${1:-$default}"
command -v go >/dev/null || { echo "control-plane: needs Go (https://go.dev) on PATH" >&2; exit 1; }
mkdir -p "$dest"
cd "$here"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$version" | cut -d. -f2)"
build() {  # name package
  if [ -x "$dest/$1" ]; then return; fi
  echo "control-plane: building $1 ($2) into $dest" >&2
  start=$(date +%s)
  CGO_ENABLED=0 go build -trimpath -tags selinux,notest -ldflags "$ldflags" -o "$dest/$1.tmp" "$2"
  mv "$dest/$1.tmp" "$dest/$1"
  echo "control-plane: $1 built in $(( $(date +%s) - start )) s" >&2
}
build etcd go.etcd.io/etcd/server/v3
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
