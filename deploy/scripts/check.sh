#!/usr/bin/env bash
# deploy/scripts/check.sh - checks deploy/: the Kubernetes manifests, the container image, and the image run
# as pods on this machine. `make deploy-check` (and so `make test`) runs all three (root; the image step
# installs podman, buildah, debootstrap and runc from Debian when they are missing).
#   manifests  kubectl kustomize renders every overlay and the trainer Job; every object validates against the
#              Kubernetes API schemas and unknown fields fail (deploy/check/validate.mjs); the checker itself
#              must fail on four broken copies (an unknown field, a wrong type, a misspelt probe, a misspelt
#              field of KEDA's ScaledObject)
#   image      podman builds deploy/Containerfile (multi-stage, on a Debian 12 base made by debootstrap:
#              nothing is pulled) and reports the runtime image's size
#   pods       deploy/scripts/pods.sh: the image's dispatcher, two workers and a trainer in network
#              namespaces on a bridge, with the rendered manifests' arguments and environment
# Outputs under build/deploy-check (rendered YAML, node_modules) and build/deploy (rootfs, image store).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=build/deploy-check
die() { echo "check-deploy: $*" >&2; exit 1; }

manifests() {
  command -v kubectl > /dev/null || die "kubectl (with kustomize) is needed to render deploy/k8s and is not installed"
  command -v node > /dev/null && command -v npm > /dev/null || die "node and npm are needed (apt-get install nodejs npm)"
  mkdir -p "$OUT"
  cp deploy/check/package.json deploy/check/package-lock.json deploy/check/*.mjs "$OUT/"
  if ! (cd "$OUT" && npm ls --silent > /dev/null 2>&1); then
    (cd "$OUT" && npm ci --no-audit --no-fund --silent) || die "npm ci of deploy/check failed"
  fi
  local files=()
  for d in deploy/k8s/overlays/* deploy/k8s/trainer; do
    local name
    name=$(basename "$d")
    kubectl kustomize "$d" > "$OUT/$name.yaml" || die "kubectl kustomize $d failed"
    files+=("$name.yaml")
  done
  (cd "$OUT" && node validate.mjs "${files[@]}") || die "the rendered manifests do not validate"
  # The checker must fail on broken manifests (else its ok means nothing).
  sed 's/^  replicas: 1$/  replica: 1/' "$OUT/dev.yaml" > "$OUT/broken-field.yaml"
  sed '0,/^  replicas: 1$/s//  replicas: "one"/' "$OUT/dev.yaml" > "$OUT/broken-type.yaml"
  sed '0,/readinessProbe:/s//readinesProbe:/' "$OUT/dev.yaml" > "$OUT/broken-probe.yaml"
  sed 's/minReplicaCount:/minReplicaCnt:/' "$OUT/keda.yaml" > "$OUT/broken-crd.yaml"     # a custom resource's field
  for b in broken-field broken-type broken-probe broken-crd; do
    if (cd "$OUT" && node validate.mjs "$b.yaml" > "$b.out" 2>&1); then
      die "the checker passed $OUT/$b.yaml, which is broken"
    fi
    echo "check-deploy: the checker refuses $b.yaml: $(head -1 "$OUT/$b.out")"
  done
  echo "check-deploy: manifests ok (${files[*]})"
}

case "${1:-all}" in
  manifests) manifests ;;
  image) bash deploy/scripts/image.sh ;;
  pods) bash deploy/scripts/pods.sh ;;
  all) manifests; bash deploy/scripts/image.sh; bash deploy/scripts/pods.sh ;;
  *) die "usage: deploy/scripts/check.sh [manifests|image|pods|all]" ;;
esac
