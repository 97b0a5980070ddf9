#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and etcd (the control plane), and kubelet,
# kube-scheduler, kube-proxy and the accelerator device plugin (the real node,
# tests/controlplane/node.py); `build.sh kwok` builds kwok alone (make kwok), `build.sh
# kube-router` the node's NetworkPolicy engine alone (make policy-engine); from this folder's
# Go module into DEST, once: a binary already there is kept. DEST defaults to the folder cluster.py looks
# in: $XLA_SENTINEL_CONTROL_PLANE, else ~/.cache/xla-sentinel/controlplane-<k8s version>,
# outside the source tree so every clone on the machine reuses one build. Needs Go and the
# Go module proxy; about 2 GiB of memory per link. `build.sh --dir` prints DEST.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$here/go.mod")"
default="${XLA_SENTINEL_CONTROL_PLANE:-${XDG_CACHE_HOME:-$HOME/.cache}/xla-sentinel/controlplane-$version}"
if [ "${1:-}" = "--dir" ]; then echo "$default"; exit 0; fi
only=""
case "${1:-}" in  # `build.sh kwok [DEST]`: kwok alone (make kwok); likewise kube-router
  kwok|kube-router) only="$1"; shift ;;
esac
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
# kwok (sigs.k8s.io/kwok), which plays the kubelet of many Nodes (tests/controlplane/kwok.py:
# tests/k8s/test_kwok.py, bench/operator_scale.py --kwok-nodes). Its go.mod has no replace or
# exclude directives, so `go install pkg@version` builds it against its own pinned
# dependencies (k8s.io/client-go v0.33, within the skew of this kube-apiserver); its Stage
# manifests (the module's kustomize/stage folder) go beside it as kwok-stages/.
kwok_version=v0.7.0
build_kwok() {
  [ -x "$dest/kwok" ] && [ -f "$dest/kwok-stages/pod/fast/pod-ready.yaml" ] && return 0
  echo "control-plane: building kwok ($kwok_version) into $dest" >&2
  start=$(date +%s)
  local tmp src
  tmp="$(mktemp -d)"
  CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$kwok_version"
  src="$(go mod download -json "sigs.k8s.io/kwok@$kwok_version" | awk -F'"' '$2 == "Dir" {print $4}')"
  rm -rf "$dest/kwok-stages" "$dest/kwok-stages.tmp"
  cp -r "$src/kustomize/stage" "$dest/kwok-stages.tmp"; chmod -R u+w "$dest/kwok-stages.tmp"
  mv "$dest/kwok-stages.tmp" "$dest/kwok-stages"
  mv "$tmp/kwok" "$dest/kwok"; rmdir "$tmp"
  echo "control-plane: kwok built in $(( $(date +%s) - start )) s" >&2
}
# kube-router (github.com/cloudnativelabs/kube-router), whose network policy controller
# (--run-firewall alone) enforces NetworkPolicy on the real node with iptables and ipset
# (tests/controlplane/node.py start_policy_engine, tests/node/test_networkpolicy_node.py). Chosen
# over sigs.k8s.io/kube-network-policies because it takes a --kubeconfig (the other reads only
# the in-cluster service-account files, a fixed host path) and needs nothing but iptables and
# Debian's ipset (make node-deps). v2.1.0: the newest release the Go module proxy serves here
# (later v2 tags are refused); its go.mod has no replace or exclude directives, so `go
# install pkg@version` builds it against its own pinned dependencies (client-go v0.29:
# networking.k8s.io/v1 NetworkPolicy is unchanged since, and within client-go's skew for
# the stable APIs it watches).
kube_router_version=v2.1.0
build_kube_router() {
  [ -x "$dest/kube-router" ] && return 0
  echo "control-plane: building kube-router ($kube_router_version) into $dest" >&2
  start=$(date +%s)
  local tmp
  tmp="$(mktemp -d)"
  CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath \
    -ldflags "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$kube_router_version" \
    "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$kube_router_version"
  mv "$tmp/kube-router" "$dest/kube-router"; rmdir "$tmp"
  echo "control-plane: kube-router built in $(( $(date +%s) - start )) s" >&2
}
if [ "$only" = kwok ]; then build_kwok; exit 0; fi
if [ "$only" = kube-router ]; then build_kube_router; exit 0; fi
build etcd go.etcd.io/etcd/server/v3
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
build kubelet k8s.io/kubernetes/cmd/kubelet
build kube-proxy k8s.io/kubernetes/cmd/kube-proxy
# containerd for the real node: Debian bookworm's containerd is 1.6.20, older than the 1.7
# line kubelet 1.34 is tested against, so containerd, its runc shim and ctr are built from
# containerd's own Go module, as its main module (its go.mod has exclude directives, which
# `go install pkg@version` refuses, and its dependencies are older than kubernetes' ones in
# this folder's go.mod). runc and the CNI plugins stay Debian's (make node-deps).
containerd_version=v1.7.35
containerd_cmds=(containerd containerd-shim-runc-v2 ctr)
build_containerd() {
  local missing=0 c
  for c in "${containerd_cmds[@]}"; do [ -x "$dest/$c" ] || missing=1; done
  [ "$missing" = 1 ] || return 0
  echo "control-plane: building ${containerd_cmds[*]} (containerd $containerd_version) into $dest" >&2
  start=$(date +%s)
  local src work
  src="$(go mod download -json "github.com/containerd/containerd@$containerd_version" | awk -F'"' '$2 == "Dir" {print $4}')"
  work="$(mktemp -d)"
  cp -r "$src/." "$work"; chmod -R u+w "$work"
  for c in "${containerd_cmds[@]}"; do
    (cd "$work" && CGO_ENABLED=0 go build -mod=mod -trimpath -tags no_btrfs,no_devmapper,no_zfs,no_aufs \
      -ldflags "-s -w -X github.com/containerd/containerd/version.Version=${containerd_version#v}" \
      -o "$dest/$c.tmp" "./cmd/$c")
    mv "$dest/$c.tmp" "$dest/$c"
  done
  rm -rf "$work"
  echo "control-plane: containerd built in $(( $(date +%s) - start )) s" >&2
}
build_containerd
build pause ./pause
# The test node's accelerator device plugin (google.com/tpu, nvidia.com/gpu chips that do
# not exist here), from this module: the kubelet's own device-plugin stub (k8s.io/kubernetes)
# with the same k8s.io/kubelet API as the kubelet. Its source is this repository's, not a
# pinned release, so it is built again when that source changes (its hash beside it): a cache
# filled from an older checkout does not keep an older plugin.
plugin_src="$(cat deviceplugin/*.go go.mod go.sum | sha256sum | cut -d' ' -f1)"
[ "$(cat "$dest/deviceplugin.src" 2>/dev/null)" = "$plugin_src" ] || rm -f "$dest/deviceplugin"
build deviceplugin ./deviceplugin
echo "$plugin_src" > "$dest/deviceplugin.src"
# JobSet's controller (sigs.k8s.io/jobset), for multi-host TPU slices (tests/controlplane/jobset.py
# runs it beside the Job controller): built from its own Go module as its main module (its
# go.sum pins its dependencies), with its CRD and webhook manifests beside it.
jobset_version=v0.10.1
build_jobset() {
  [ -x "$dest/jobset-controller" ] && [ -f "$dest/jobset-crds.yaml" ] && [ -f "$dest/jobset-webhooks.yaml" ] && return 0
  echo "control-plane: building jobset-controller (jobset $jobset_version) into $dest" >&2
  start=$(date +%s)
  local src work
  src="$(go mod download -json "sigs.k8s.io/jobset@$jobset_version" | awk -F'"' '$2 == "Dir" {print $4}')"
  work="$(mktemp -d)"
  cp -r "$src/." "$work"; chmod -R u+w "$work"
  (cd "$work" && CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "-s -w" -o "$dest/jobset-controller.tmp" .)
  mv "$dest/jobset-controller.tmp" "$dest/jobset-controller"
  cp "$src/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml" "$dest/jobset-crds.yaml"
  cp "$src/config/components/webhook/manifests.yaml" "$dest/jobset-webhooks.yaml"
  rm -rf "$work"
  echo "control-plane: jobset-controller built in $(( $(date +%s) - start )) s" >&2
}
build_jobset
# CoreDNS, the cluster DNS of the real node: pods resolve kubernetes.default.svc (kopf's
# in-cluster login dials that name) through it. Its go.mod has no replace or exclude
# directives, so `go install pkg@version` builds it against its own dependencies.
coredns_version=v1.15.0
if [ ! -x "$dest/coredns" ]; then
  echo "control-plane: building coredns ($coredns_version) into $dest" >&2
  start=$(date +%s)
  tmp="$(mktemp -d)"
  CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$coredns_version"
  mv "$tmp/coredns" "$dest/coredns"; rmdir "$tmp"
  echo "control-plane: coredns built in $(( $(date +%s) - start )) s" >&2
fi
