# shellcheck shell=bash
# The docker part: Debian's dockerd on a private data-root, exec-root and socket, with the runtime
# under test as a daemon.json `runtimes` entry, on the harness's private containerd. No bridge and
# no iptables: dockerd touches none of the host's network.
source "$OCI_DIR/containerd.sh"

DOCKER_DIR=$WORK/docker
DOCKER_RUNTIME=harness
dk() { /usr/bin/docker --host "unix://$DOCKER_DIR/docker.sock" "$@"; }

start_dockerd() {
    mkdir -p "$DOCKER_DIR"
    local app_runtime=""
    [[ -n ${APP_RUNTIME:-} ]] && app_runtime=", \"appd\": {\"path\": \"$APP_RUNTIME\"}"
    # systemd's driver takes a slice as the parent (dockerd refuses a path with it).
    local cgroup_parent=/appd-oci-harness-docker
    [[ ${CGROUP_DRIVER:-cgroupfs} == systemd ]] && cgroup_parent=$DOCKER_SLICE
    cat >"$DOCKER_DIR/daemon.json" <<JSON
{
  "data-root": "$DOCKER_DIR/data", "exec-root": "$DOCKER_DIR/exec", "pidfile": "$DOCKER_DIR/dockerd.pid",
  "hosts": ["unix://$DOCKER_DIR/docker.sock"], "containerd": "$CTRD_SOCK",
  "containerd-namespace": "appd-harness-docker", "containerd-plugins-namespace": "appd-harness-docker-plugins",
  "bridge": "none", "iptables": false, "ip6tables": false, "ip-forward": false, "ip-masq": false,
  "storage-driver": "overlay2", "cgroup-parent": "$cgroup_parent", "exec-opts": ["native.cgroupdriver=${CGROUP_DRIVER:-cgroupfs}"],
  "runtimes": {"$DOCKER_RUNTIME": {"path": "$RUNTIME"}$app_runtime}
}
JSON
    dockerd --config-file "$DOCKER_DIR/daemon.json" >"$DOCKER_DIR/dockerd.log" 2>&1 &
    local pid=$!
    on_exit "stop_dockerd $pid"
    wait_ready "$pid" 30 dk version && return 0
    fail "docker: dockerd did not answer on $DOCKER_DIR/docker.sock: $(grep -m3 -i 'level=error\|failed' "$DOCKER_DIR/dockerd.log" | tail -3)"
    return 1
}

stop_dockerd() {
    local pid=$1
    dk rm --force $(dk ps -aq) >/dev/null 2>&1
    dk network rm appd-harness >/dev/null 2>&1
    stop_daemon "$pid"
    umount_under "$DOCKER_DIR"
    remove_cgroups appd-oci-harness-docker
    return 0
}

docker_checks() {
    local P=docker out rc id run=(--runtime "$DOCKER_RUNTIME" --network none)
    start_containerd || return 1
    start_dockerd || return 1
    check $P "docker info lists the runtime from daemon.json" yes \
        "$(dk info --format '{{range $name, $_ := .Runtimes}}{{$name}} {{end}}' | grep -qw "$DOCKER_RUNTIME" && echo yes)"
    out=$(dk load -i "$WORK/busybox.tar" 2>&1)
    check $P "docker load of the docker-archive" "Loaded image: $IMAGE" "$(tail -1 <<<"$out")"
    out=$(dk run --rm "${run[@]}" "$IMAGE" echo hello from docker 2>&1)
    check $P "run --rm --runtime $DOCKER_RUNTIME: output" "hello from docker" "$out"
    dk run --rm "${run[@]}" "$IMAGE" sh -c 'exit 8' >/dev/null 2>&1 && rc=0 || rc=$?
    check $P "run --rm: exit code" 8 "$rc"
    id=$(dk run -d "${run[@]}" "$IMAGE" sh -c 'trap "exit 42" TERM; while :; do sleep 0.1; done')
    check $P "inspect: the container's runtime" "$DOCKER_RUNTIME" "$(dk inspect --format '{{.HostConfig.Runtime}}' "$id")"
    out=$(dk exec "$id" echo in-exec 2>&1)
    check $P "exec: output" in-exec "$out"
    out=$(dk exec -t "$id" sh -c 'test -t 1 && echo tty || echo no-tty' 2>&1 | tr -d '\r')
    check $P "exec -t: a terminal" tty "$out"
    # dockerd hands the shim runc.v1 Options; field 6 is BinaryName, field 7 the runtime's root.
    check $P "the shim's options name the runtime from daemon.json (BinaryName)" "$RUNTIME" \
        "$(ctr_ -n appd-harness-docker containers info "$id" | /usr/bin/python3 "$OCI_DIR/runc-options.py" 6)"
    check $P "the runtime's own state under the root dockerd gave it" running \
        "$(runtime_status "$RUNTIME" "$DOCKER_DIR/exec/runtime-runc/appd-harness-docker" "$id")"
    dk kill --signal TERM "$id" >/dev/null
    check $P "kill --signal TERM: the trap's exit code" 42 "$(dk wait "$id")"
    dk rm "$id" >/dev/null
    if [[ -n ${APP_RUNTIME:-} ]]; then
        # Docker's bridge network: dockerd's libnetwork-setkey prestart hook (docker adds it to
        # every container, --network none too) moves the veth in. A hook runs as root outside
        # the sandbox: appd-oci runs only those appd.conf's [OCI] Hooks= lists (dockerd unless set).
        dk network create --driver bridge --internal --subnet 10.213.77.0/24 \
            -o com.docker.network.bridge.name=appdh0 appd-harness >/dev/null
        out=$(dk run --rm --runtime "$DOCKER_RUNTIME" --network appd-harness "$IMAGE" busybox ip -4 -o addr show 2>&1)
        check $P "bridge network (dockerd's hook, allowed by default): the container's eth0 has its address" yes \
            "$(grep -q 'eth0 *inet 10\.213\.77\.' <<<"$out" && echo yes || echo "$out")"
        cp "$WORK/appd/appd.conf" "$WORK/appd/appd.conf.saved"
        printf '[OCI]\nHooks=\n' >>"$WORK/appd/appd.conf"
        out=$(dk run --rm --runtime "$DOCKER_RUNTIME" --network appd-harness "$IMAGE" true 2>&1) && rc=0 || rc=$?
        check $P "[OCI] Hooks= empty: dockerd's hook refused at create, naming it" refused \
            "$( ((rc != 0)) && grep -q 'prestart hook /proc/[0-9]*/exe is not an executable this node allows' <<<"$out" && echo refused || echo "rc $rc: $(tail -1 <<<"$out")")"
        mv "$WORK/appd/appd.conf.saved" "$WORK/appd/appd.conf"
        dk network rm appd-harness >/dev/null
        dk load -i "$WORK/app.tar" >/dev/null 2>&1
        dk run --rm --runtime appd --network none "$APP_IMAGE" exit 8 >/dev/null 2>&1 && rc=0 || rc=$?
        check $P "docker run --runtime appd of a signed .app image: the app's exit code" 8 "$rc"
        out=$(dk run --rm --runtime appd --network none "$APP_IMAGE" read /etc/shadow 2>&1)
        check $P "attack under docker: the host's /etc/shadow" "read: refused ENOENT" "$out"
        out=$(dk run --rm --runtime appd --privileged "$APP_IMAGE" exit 0 2>&1) && rc=0 || rc=$?
        check $P "docker run --privileged of an app: refused at create" refused \
            "$( ((rc != 0)) && grep -q 'widen the sandbox' <<<"$out" && echo refused || echo "rc $rc: $(tail -1 <<<"$out")")"
    fi
}
