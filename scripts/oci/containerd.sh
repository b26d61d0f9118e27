# shellcheck shell=bash
# A private containerd for the ctr and cri parts: its own root, state, sockets, runtime root and
# CNI configuration under $WORK, never the system's /run/containerd socket or /var/lib/containerd.
# Started once, stopped (and every pod, task, netns and mount it left removed) at exit.

CTRD=$WORK/containerd
CTRD_SOCK=$CTRD/containerd.sock
CNI_BRIDGE=appdh0
CRI_HANDLER=harness
APP_HANDLER=appd

ctr_() { ctr --address "$CTRD_SOCK" "$@"; }
# The shim's SystemdCgroup option, and the CRI pods' cgroup_parent (a slice with systemd's driver).
SYSTEMD_CGROUP=false
CRI_CGROUP_PARENT=/appd-oci-harness
if [[ ${CGROUP_DRIVER:-cgroupfs} == systemd ]]; then
    SYSTEMD_CGROUP=true
    CRI_CGROUP_PARENT=$HARNESS_SLICE
fi
# ctr_cgroup ID NAMESPACE: ctr run's cgroup flags for task ID (cgroupfs: ctr's default
# /NAMESPACE/ID; systemd: the runtime gets --systemd-cgroup and slice:prefix:name).
ctr_cgroup() {
    if [[ $SYSTEMD_CGROUP == true ]]; then
        echo "--runc-systemd-cgroup --cgroup $HARNESS_SLICE:ctr:$1"
    else
        echo "--cgroup /$2/$1"
    fi
}

start_containerd() {
    [[ -S $CTRD_SOCK ]] && return 0
    mkdir -p "$CTRD" "$WORK/cni/net.d" "$WORK/cni/ipam"
    cat >"$WORK/cni/net.d/10-harness.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "appd-harness", "plugins": [{
  "type": "bridge", "bridge": "$CNI_BRIDGE", "isGateway": false, "ipMasq": false,
  "ipam": {"type": "host-local", "dataDir": "$WORK/cni/ipam",
           "ranges": [[{"subnet": "10.213.0.0/24"}]]}}]}
JSON
    cat >"$CTRD/config.toml" <<TOML
version = 2
root = "$CTRD/root"
state = "$CTRD/state"
oom_score = 0
[grpc]
  address = "$CTRD_SOCK"
[ttrpc]
  address = "$CTRD_SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$CTRD/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Root here lacks CAP_SYS_RESOURCE: the pause container's -998 cannot be applied.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$WORK/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.$CRI_HANDLER]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.$CRI_HANDLER.options]
        BinaryName = "$RUNTIME"
        Root = "$CTRD/runtime-root"
        SystemdCgroup = $SYSTEMD_CGROUP
TOML
    if [[ -n ${APP_RUNTIME:-} ]]; then
        cat >>"$CTRD/config.toml" <<TOML
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.$APP_HANDLER]
      runtime_type = "io.containerd.runc.v2"
      pod_annotations = ["org.appd.plain"]
      container_annotations = ["org.appd.plain"]
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.$APP_HANDLER.options]
        BinaryName = "$APP_RUNTIME"
        Root = "$CTRD/appd-root"
        SystemdCgroup = $SYSTEMD_CGROUP
TOML
    fi
    # The v2 shims keep their sockets in /run/containerd/s, whatever the config says.
    [[ -e /run/containerd ]] || on_exit "find /run/containerd -depth -type d -empty -delete"
    # CNI makes /var/run/netns a bind mount of itself; when it was not there, leave none.
    [[ -e /var/run/netns ]] || on_exit "mountpoint -q /var/run/netns && umount /var/run/netns; rmdir /var/run/netns"
    ls /var/run/netns 2>/dev/null | sort >"$WORK/netns-before" || true
    containerd --config "$CTRD/config.toml" >"$CTRD/containerd.log" 2>&1 &
    local pid=$!
    echo "$pid" >"$CTRD/pid"
    on_exit "stop_containerd $pid"
    wait_ready "$pid" 10 ctr_ version && return 0
    fail "containerd: did not answer on $CTRD_SOCK: $(tail -3 "$CTRD/containerd.log")"
    return 1
}

# Removes what containerd and its shims leave when a run stops half-way: pods (through CRI),
# tasks and containers (through ctr), then the daemon, its mounts, the pods' netns, the bridge.
stop_containerd() {
    local pid=$1 ns id
    /usr/bin/python3 "$OCI_DIR/cri.py" --cleanup --socket "$CTRD_SOCK" >/dev/null 2>&1 || true
    for ns in $(ctr_ namespaces ls -q 2>/dev/null); do
        for id in $(ctr_ -n "$ns" tasks ls -q 2>/dev/null); do
            ctr_ -n "$ns" tasks kill -s SIGKILL "$id"; sleep 0.2; ctr_ -n "$ns" tasks rm -f "$id"
        done >/dev/null 2>&1
        for id in $(ctr_ -n "$ns" containers ls -q 2>/dev/null); do ctr_ -n "$ns" containers rm "$id"; done >/dev/null 2>&1
    done
    stop_daemon "$pid"
    # What a runtime under test may have left running: containers in the cgroups the engines were
    # given, and the shims (their command lines name this containerd's socket).
    kill_cgroup appd-oci-harness; kill_cgroup appd-oci-harness-ctr; kill_cgroup appd-oci-harness-docker
    kill_work_processes "$CTRD_SOCK"
    umount_under "$CTRD"
    local netns
    for netns in $(ls /var/run/netns 2>/dev/null | sort | comm -13 "$WORK/netns-before" -); do
        [[ $netns == cni-* ]] && { umount "/var/run/netns/$netns" 2>/dev/null; rm -f "/var/run/netns/$netns"; }
    done
    ip link del "$CNI_BRIDGE" 2>/dev/null || true
    remove_cgroups appd-oci-harness; remove_cgroups appd-oci-harness-ctr
    return 0
}
