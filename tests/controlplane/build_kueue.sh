#!/usr/bin/env bash
# Builds Kueue's controller manager (sigs.k8s.io/kueue, `make kueue`) into DEST, once: a
# binary already there is kept, with its CRD manifests (kueue-crds.yaml) and webhook
# manifests (kueue-webhooks.yaml) beside it; tests/controlplane/kueue.py runs it beside the
# test control plane as jobset.py runs JobSet's controller. DEST defaults to the folder
# cluster.py looks in (build.sh --dir). Needs Go 1.25 or newer (the go directive of Kueue's
# go.mod; an older go fetches that toolchain from the proxy itself) and the Go module proxy.
#
# v0.14.0: its go.mod pins k8s.io/api and client-go v0.34 (this control plane's minor, so
# every API it watches is served as it expects) and sigs.k8s.io/jobset v0.10.1 (the JobSet
# controller build.sh builds); v0.14.1+ and v0.13.x are refused by the module proxy here,
# and v0.15+ move to client-go v0.35. Built as its main module, so its go.sum pins its
# dependencies (`go install pkg@version` would refuse a go.mod with replace directives if a
# later version gained one; the same recipe as build.sh's JobSet and containerd).
#
# One line of its main package is changed: without Kueue's internal certificate management
# (which issues a webhook certificate for an in-cluster Service DNS name, where the test API
# server calls webhooks by URL on 127.0.0.1) the manager reads its metrics serving
# certificate from the fixed path /etc/kueue/metrics/certs, a mounted Secret in a pod, and
# exits when it is absent. KUEUE_METRICS_CERT_DIR, when set, names that folder instead, so
# the tests give it the control plane's serving pair without writing under /etc.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${1:-$("$here/build.sh" --dir)}"
kueue_version=v0.14.0
command -v go >/dev/null || { echo "kueue: needs Go (https://go.dev) on PATH" >&2; exit 1; }
# The ProvisioningRequest CRD (autoscaling.x-k8s.io, from cluster-autoscaler's API module at
# the version Kueue's go.mod pins), fetched on its own so that a cached controller gains it:
# Kueue runs its provisioning admission check only where that API exists when it starts
# (tests/k8s/test_kueue_provisioning.py installs it first).
provreq_module=k8s.io/autoscaler/cluster-autoscaler/apis@v0.0.0-20240830133931-adfbe7e45277
if [ ! -f "$dest/provisioningrequest-crd.yaml" ]; then
  mkdir -p "$dest"
  dir="$(go mod download -json "$provreq_module" | awk -F'"' '$2 == "Dir" {print $4}')"
  [ -n "$dir" ] && [ -f "$dir/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml" ] \
    || { echo "kueue: go mod download gave no $provreq_module CRD" >&2; exit 1; }
  cp "$dir/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml" "$dest/provisioningrequest-crd.yaml.tmp"
  chmod u+w "$dest/provisioningrequest-crd.yaml.tmp"
  mv "$dest/provisioningrequest-crd.yaml.tmp" "$dest/provisioningrequest-crd.yaml"
fi
[ -x "$dest/kueue-controller" ] && [ -f "$dest/kueue-crds.yaml" ] && [ -f "$dest/kueue-webhooks.yaml" ] && exit 0
mkdir -p "$dest"
echo "control-plane: building kueue-controller (kueue $kueue_version) into $dest" >&2
start=$(date +%s)
src="$(go mod download -json "sigs.k8s.io/kueue@$kueue_version" | awk -F'"' '$2 == "Dir" {print $4}')"
[ -n "$src" ] && [ -f "$src/go.mod" ] || { echo "kueue: go mod download gave no module folder" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$src/." "$work"; chmod -R u+w "$work"
sed -i 's|^\(\t*\)metricsCertPath := "/etc/kueue/metrics/certs"$|&; if d := os.Getenv("KUEUE_METRICS_CERT_DIR"); d != "" { metricsCertPath = d }|' \
  "$work/cmd/kueue/main.go"
grep -q KUEUE_METRICS_CERT_DIR "$work/cmd/kueue/main.go" || { echo "kueue: cannot patch the metrics certificate path" >&2; exit 1; }
(cd "$work" && CGO_ENABLED=0 go build -mod=mod -trimpath \
  -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$kueue_version" \
  -o "$dest/kueue-controller.tmp" ./cmd/kueue)
# The CRDs as one multi-document file, in a stable order (the API server takes them in any).
for f in "$src"/config/components/crd/bases/*.yaml; do
  printf -- '---\n'; cat "$f"
done > "$dest/kueue-crds.yaml.tmp"
cp "$src/config/components/webhook/manifests.yaml" "$dest/kueue-webhooks.yaml.tmp"; chmod u+w "$dest/kueue-webhooks.yaml.tmp"
mv "$dest/kueue-crds.yaml.tmp" "$dest/kueue-crds.yaml"
mv "$dest/kueue-webhooks.yaml.tmp" "$dest/kueue-webhooks.yaml"
mv "$dest/kueue-controller.tmp" "$dest/kueue-controller"
echo "control-plane: kueue-controller built in $(( $(date +%s) - start )) s" >&2
