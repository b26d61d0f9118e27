# shellcheck shell=bash
# The cri part: containerd's CRI plugin with a runtime handler whose BinaryName is the runtime
# under test, driven by scripts/oci/cri.py (two pods on a CNI bridge with no host address).
source "$OCI_DIR/containerd.sh"

cri_checks() {
    start_containerd || return 1
    local out
    for image in busybox pause; do
        out=$(ctr_ -n k8s.io images import "$WORK/$image.tar" 2>&1) || { fail "cri: import $image: $out"; return 1; }
    done
    sleep 1 # the CRI plugin learns of imported images from containerd's events
    local rc=0
    /usr/bin/python3 "$OCI_DIR/cri.py" --socket "$CTRD_SOCK" --handler "$CRI_HANDLER" --image "$IMAGE" \
        --cgroup-parent "$CRI_CGROUP_PARENT" --work "$WORK/cri" >"$WORK/cri.out" 2>&1 || rc=$?
    cat "$WORK/cri.out"
    passed=$((passed + $(grep -c '^PASS' "$WORK/cri.out" || true)))
    failed=$((failed + $(grep -c '^FAIL' "$WORK/cri.out" || true)))
    if ((rc != 0)) && ! grep -q '^FAIL' "$WORK/cri.out"; then
        fail "cri: the client stopped with status $rc: $(tail -1 "$WORK/cri.out")"
    fi
}
