#!/usr/bin/env bash
# make k8s-check: the Kubernetes manifests of deploy/kubernetes, as CI checks them:
#   schemas     every manifest validates, strictly (an unknown or misspelt field is an error, and
#               so is a kind with no schema), against the schemas of each Kubernetes release
#               from K8S_MIN to K8S_MAX, with kubernetes-validate (PyPI, pinned: it bundles the
#               schemas, so nothing else is downloaded), installed into a virtualenv under target/
#   kustomize   each kustomization.yaml lists files that exist, every manifest but the example
#               Secret is listed, and both name the same image as the containers
#   lifecycle   scripts/k8s-lifecycle.py: the real `raptor serve` with the Deployment's probe
#               timings, preStop hook and grace period: a pod waiting to migrate is not
#               restarted, and a pod stopped under load exits within the grace period with every
#               request answered (builds raptor and finds Postgres like the other checks)
#
#   scripts/k8s-check.sh                    all three
#   scripts/k8s-check.sh --schemas-only     the first two (no build, no database)
#   scripts/k8s-check.sh -- ARGS            ARGS go to k8s-lifecycle.py (e.g. --deployment FILE)
# RAPTOR_BIN set: that binary is started instead of building one.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
KUBERNETES_VALIDATE_VERSION=1.37.0
K8S_MIN=29
K8S_MAX=37
dir=deploy/kubernetes
target="${CARGO_TARGET_DIR:-$root/target}"
venv="$target/k8s-venv"
log() { echo "k8s-check: $*" >&2; }

schemas_only=0
lifecycle_args=()
while (( $# > 0 )); do
  case "$1" in
    --schemas-only) schemas_only=1 ;;
    --) shift; lifecycle_args=("$@"); break ;;
    *) log "unknown argument $1"; exit 2 ;;
  esac
  shift
done

mkdir -p "$target"
exec 9>"$target/k8s-venv.lock"
flock 9
if [[ "$("$venv/bin/kubernetes-validate" --version 2>/dev/null)" != *"$KUBERNETES_VALIDATE_VERSION"* ]]; then
  log "installing kubernetes-validate $KUBERNETES_VALIDATE_VERSION into $venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" >&2
fi
flock -u 9

mapfile -t manifests < <(find "$dir" -name '*.yaml' ! -name kustomization.yaml | sort)
log "schemas: ${#manifests[@]} manifests, Kubernetes 1.$K8S_MIN to 1.$K8S_MAX (strict)"
failed=0
for (( minor = K8S_MIN; minor <= K8S_MAX; minor++ )); do
  out="$("$venv/bin/kubernetes-validate" --strict --quiet -k "1.$minor.0" "${manifests[@]}" 2>&1)" || failed=1
  # A kind or apiVersion without a schema is only a warning to the tool: an error here.
  if grep -q . <<<"$out"; then
    sed "s/^/k8s-check: 1.$minor: /" <<<"$out" >&2
    failed=1
  fi
done
(( failed == 0 )) || { log "FAILED: the manifests do not validate"; exit 1; }

log "kustomize: the kustomizations' resources and images"
"$venv/bin/python" - "$dir" <<'EOF'
import pathlib, sys, yaml
root = pathlib.Path(sys.argv[1])
problems, listed, images = [], set(), {}
for kfile in sorted(root.rglob("kustomization.yaml")):
    k = yaml.safe_load(kfile.read_text())
    for resource in k.get("resources", []):
        path = (kfile.parent / resource).resolve()
        if not path.is_file():
            problems.append(f"{kfile}: resource {resource} does not exist")
        listed.add(path)
    for image in k.get("images", []):
        images.setdefault(image["name"], set()).add((image.get("newName"), image.get("newTag")))
for manifest in sorted(root.rglob("*.yaml")):
    if manifest.name in ("kustomization.yaml", "secret.example.yaml"):
        continue
    if manifest.resolve() not in listed:
        problems.append(f"{manifest} is in no kustomization.yaml")
    for doc in yaml.safe_load_all(manifest.read_text()):
        spec = (doc or {}).get("spec", {})
        pod = spec.get("template", {}).get("spec", {})
        for c in pod.get("containers", []):
            if c["image"] not in images:
                problems.append(f"{manifest}: image {c['image']} is not set by a kustomization's images:")
for name, values in images.items():
    if len(values) > 1:
        problems.append(f"the kustomizations set image {name} differently: {sorted(values, key=str)}")
for p in problems:
    print(f"k8s-check: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
EOF

(( schemas_only == 0 )) || exit 0

if [[ -z "${RAPTOR_BIN:-}" ]]; then
  log "building raptor"
  cargo build --locked -q -p raptor-server --bin raptor
  export RAPTOR_BIN="$target/debug/raptor"
fi
eval "$(scripts/db.sh postgres)"
log "lifecycle: scripts/k8s-lifecycle.py"
exec "$venv/bin/python" scripts/k8s-lifecycle.py "${lifecycle_args[@]}"
