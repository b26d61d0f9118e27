# shellcheck shell=bash
# The podman part of scripts/oci-harness: podman --runtime PATH on a private storage root
# (overlay works on this host; vfs is the fallback with --storage-driver vfs), no network
# (--network none: nothing touches the host's), the harness's cgroup driver (cgroupfs unless
# --cgroup-driver systemd; systemd is not PID 1 on the build host).

pm() {
    CONTAINERS_CONF=$WORK/podman/containers.conf podman --root "$WORK/podman/root" \
        --runroot "${PODMAN_RUNROOT:-$WORK/podman/run}" --tmpdir "${PODMAN_TMPDIR:-$WORK/podman/tmp}" \
        --storage-driver "$STORAGE_DRIVER" --cgroup-manager "${CGROUP_DRIVER:-cgroupfs}" --events-backend none \
        --runtime "$RUNTIME" "$@"
}

# A container's pid on the host, to read its /proc and cgroup from outside.
pm_pid() { pm inspect --format '{{.State.Pid}}' "$1"; }

podman_checks() {
    local P=podman out rc id pid before after cgroup limit
    mkdir -p "$WORK/podman"
    # The pod's infra container takes no --ulimit: give every container limits runc can set.
    printf '[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]\n' \
        >"$WORK/podman/containers.conf"
    on_exit "remove_cgroups libpod_parent"
    on_exit "for id in \$(ls '$WORK/podman/root/overlay-containers' 2>/dev/null); do \
        kill_cgroup libpod_parent/libpod-\$id; kill_cgroup machine.slice/libpod-\$id.scope; \"\$RUNTIME\" delete --force \$id; done; kill_work_processes '$WORK/podman'"
    # The storage is removed with the work directory (its mounts first, by the caller's trap).
    on_exit "pm pod rm --all --force --time 0; pm rm --all --force --time 0; pm rmi --all --force"
    out=$(pm load -i "$WORK/busybox.tar" 2>&1) || { fail "$P: podman load of the docker-archive: $out"; return; }
    check $P "podman load of the docker-archive" "Loaded image: $IMAGE" "$(tail -1 <<<"$out")"

    out=$(pm run --rm --network none "${ULIMITS[@]}" "$IMAGE" echo hello from the image 2>&1)
    check $P "run --rm: output" "hello from the image" "$out"
    pm run --rm --network none "${ULIMITS[@]}" "$IMAGE" sh -c 'exit 7' >/dev/null 2>&1 && rc=0 || rc=$?
    check $P "run --rm: exit code" 7 "$rc"
    # The root lists as the image's (an overlay rootfs under appd-oci --plain too).
    out=$(pm run --rm --network none "${ULIMITS[@]}" "$IMAGE" ls / 2>&1 | tr '\n' ' ')
    check $P "run --rm ls /: the image's top level" yes \
        "$(grep -q 'bin' <<<"$out" && grep -q 'etc' <<<"$out" && echo yes || echo "no: $out")"

    # The root is writable as under runc (overlay: appd-oci's own overlay of the engine's layers,
    # its upper layer in its state): an image's /var and /run written by its root.
    out=$(pm run --rm --network none "${ULIMITS[@]}" "$IMAGE" sh -c 'echo x > /var/x && mkdir /run/y && echo wrote' 2>&1)
    check $P "run: the root's /var and /run are writable" wrote "$out"

    # Volumes (`-v`): mounted where asked with the host's ids. A folder open to others is
    # written by the container's root (runc's root, appd-oci's unprivileged range alike); under
    # appd-oci a writable volume of /etc, /, or a link to /etc is refused naming the rule.
    mkdir -p "$WORK/podman/volume" && chmod 0777 "$WORK/podman/volume"
    out=$(pm run --rm --network none "${ULIMITS[@]}" -v "$WORK/podman/volume:/data" "$IMAGE" \
        sh -c 'echo from-volume > /data/file && cat /data/file' 2>&1)
    check $P "run -v DIR:/data: writes a file the host sees" "from-volume from-volume" \
        "$(echo $out $(cat "$WORK/podman/volume/file" 2>/dev/null))"
    out=$(pm run --rm --network none "${ULIMITS[@]}" -v "$WORK/podman/volume:/data:ro" "$IMAGE" \
        sh -c 'echo x > /data/ro-file; echo rc=$?' 2>&1)
    check $P "run -v DIR:/data:ro: read-only" "no" \
        "$([[ -e $WORK/podman/volume/ro-file ]] && echo yes || echo no)"
    if [[ -n $APPD_OCI ]]; then
        ln -sfn /etc "$WORK/podman/etc-link"
        for source in /etc / "$WORK/podman/etc-link"; do
            out=$(pm run --rm --network none "${ULIMITS[@]}" -v "$source:/data" "$IMAGE" echo ran 2>&1)
            check $P "run -v $source:/data: refused naming the rule" refused \
                "$(grep -v ran <<<"$out" | grep -qE "system folder|appd's own state" && echo refused || echo "no: $out")"
        done
    fi

    # --device: the host's node at the same path (appd-oci --plain binds it; its 0600 root's
    # node is nobody's to the container's unprivileged ids, so only its presence is compared).
    out=$(pm run --rm --network none "${ULIMITS[@]}" --device /dev/loop-control "$IMAGE" \
        sh -c 'test -c /dev/loop-control && echo present' 2>&1)
    check $P "run --device /dev/loop-control: the node is there" present "$out"
    # -t: the terminal is also /dev/console, as runc makes it.
    out=$(pm run --rm --network none "${ULIMITS[@]}" -t "$IMAGE" \
        sh -c 'test -c /dev/console && echo hi > /dev/console && echo console' </dev/null 2>&1 | tr -d '\r')
    check $P "run -t: /dev/console is the terminal" "hi console" "$(echo $out)"

    # SIGTERM reaches the program (busybox sh as pid 1 only exits on it when it traps it).
    id=$(pm run -d --network none "${ULIMITS[@]}" "$IMAGE" sh -c 'trap "exit 42" TERM; while :; do sleep 0.1; done')
    sleep 0.5
    pm kill --signal TERM "$id" >/dev/null
    check $P "kill --signal TERM: the trap's exit code" 42 "$(pm wait "$id")"
    pm rm -f "$id" >/dev/null
    id=$(pm run -d --network none "${ULIMITS[@]}" "$IMAGE" sleep 300)
    pm kill --signal KILL "$id" >/dev/null
    check $P "kill --signal KILL: exit code 128+9" 137 "$(pm wait "$id")"
    pm rm -f "$id" >/dev/null
    # stop: pid 1 ignores SIGTERM without a handler, so stop must fall back to SIGKILL.
    id=$(pm run -d --network none "${ULIMITS[@]}" "$IMAGE" sleep 300)
    pm stop --time 1 "$id" >/dev/null
    check $P "stop --time 1 of a program that ignores SIGTERM: killed" 137 \
        "$(pm inspect --format '{{.State.ExitCode}}' "$id")"
    pm rm -f "$id" >/dev/null

    # pause/unpause: a counter the program writes every 0.1 s stands still while paused.
    id=$(pm run -d --network none "${ULIMITS[@]}" "$IMAGE" \
        sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/n; sleep 0.1; done')
    sleep 0.5
    pid=$(pm_pid "$id")
    pm pause "$id" >/dev/null
    check $P "pause: state" paused "$(pm inspect --format '{{.State.Status}}' "$id")"
    before=$(cat "/proc/$pid/root/tmp/n"); sleep 0.6; after=$(cat "/proc/$pid/root/tmp/n")
    same $P "pause: the counter stands still over 0.6 s" "$before" "$after"
    pm unpause "$id" >/dev/null
    sleep 0.6; after=$(cat "/proc/$pid/root/tmp/n")
    if [[ -n $before && -n $after ]] && ((after > before)); then pass "$P: unpause: the counter moves again ($before -> $after)"
    else fail "$P: unpause: the counter moves again ($before -> $after)"; fi

    # exec, without and with a terminal.
    out=$(pm exec "$id" sh -c 'echo in-exec; test -t 0 && echo tty || echo no-tty')
    check $P "exec without -t: output, no terminal" "in-exec no-tty" "$(echo $out)"
    pm exec "$id" sh -c 'exit 3' && rc=0 || rc=$?
    check $P "exec: exit code" 3 "$rc"
    out=$(pm exec -t "$id" sh -c 'test -t 0 && test -t 1 && echo tty || echo no-tty' </dev/null 2>&1 | tr -d '\r')
    check $P "exec -t: stdin and stdout are a terminal" tty "$out"
    # exec of a bare name the container wrote into its root (appd-oci: its overlay's upper
    # layer, which the engine's rootfs folder does not show) is found in the container.
    pm exec "$id" sh -c 'printf "#!/bin/sh\necho from-upper-layer\n" > /bin/upper-tool && chmod 755 /bin/upper-tool'
    out=$(pm exec "$id" upper-tool 2>&1)
    check $P "exec of a program the container wrote into its root, by name" from-upper-layer "$out"

    # update --memory: the runtime's `update` writes the container's memory cgroup.
    pm update --memory 64m "$id" >/dev/null 2>&1 || fail "$P: podman update --memory 64m failed"
    cgroup=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' "/proc/$pid/cgroup")
    if [[ -n $cgroup ]]; then
        limit=$(cat "/sys/fs/cgroup/memory$cgroup/memory.limit_in_bytes")
    else
        cgroup=$(awk -F: '$1 == 0 {print $3}' "/proc/$pid/cgroup")
        limit=$(cat "/sys/fs/cgroup$cgroup/memory.max")
    fi
    check $P "update --memory 64m: the container's cgroup limit" $((64 << 20)) "$limit"
    if [[ ${CGROUP_DRIVER:-cgroupfs} == systemd ]]; then
        # systemd's driver: the runtime asked systemd for the container's scope, so systemd knows
        # it as a unit (a cgroup made by hand would be "inactive").
        check $P "systemd driver: the container's cgroup is systemd's active unit libpod-ID.scope" \
            "active /machine.slice/libpod-$id.scope" \
            "$(unit_properties "libpod-$id.scope" ActiveState ControlGroup)"
        # ... and the unit's MemoryMax is the update's, or systemd's next realization of the
        # unit writes the old limit back. podman calls `update` without --systemd-cgroup:
        # appd-oci sets the unit anyway; crun 1.8.1 leaves it at its start value ("infinity",
        # seen in the bookworm guest; docs/oci-harness.md), so this is checked for appd-oci only.
        if [[ -n ${APP_RUNTIME:-} ]]; then
            check $P "systemd driver: the unit's MemoryMax is the update's" $((64 << 20)) \
                "$(unit_properties "libpod-$id.scope" MemoryMax)"
        fi
    fi
    pm rm -f --time 0 "$id" >/dev/null

    # --cpus 0.5 --cpuset-cpus 0: the runtime writes the container's CPU bandwidth and cpuset
    # (v1: cpu.cfs_quota_us and cpu.cfs_period_us, the cpuset hierarchy's cpuset.cpus; v2, and
    # systemd's driver, which writes them from CPUQuotaPerSecUSec and AllowedCPUs: cpu.max and
    # cpuset.cpus), read from the container's cgroup on the host.
    id=$(pm run -d --network none --cpus 0.5 --cpuset-cpus 0 "${ULIMITS[@]}" "$IMAGE" sleep 300)
    pid=$(pm_pid "$id")
    cgroup=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ {print $3}' "/proc/$pid/cgroup")
    if [[ -n $cgroup ]]; then
        limit="$(cat "/sys/fs/cgroup/cpu$cgroup/cpu.cfs_quota_us") $(cat "/sys/fs/cgroup/cpu$cgroup/cpu.cfs_period_us")"
        cgroup=$(awk -F: '$2 ~ /(^|,)cpuset(,|$)/ {print $3}' "/proc/$pid/cgroup")
        limit="$limit cpus $(cat "/sys/fs/cgroup/cpuset$cgroup/cpuset.cpus")"
    else
        cgroup=$(awk -F: '$1 == 0 {print $3}' "/proc/$pid/cgroup")
        limit="$(cat "/sys/fs/cgroup$cgroup/cpu.max") cpus $(cat "/sys/fs/cgroup$cgroup/cpuset.cpus")"
    fi
    check $P "run --cpus 0.5 --cpuset-cpus 0: the container's cgroup quota, period and cpus" \
        "50000 100000 cpus 0" "$limit"
    pm rm -f --time 0 "$id" >/dev/null

    # A pod of two containers: one serves on the pod's loopback, the other connects.
    pm pod create --name appd-harness-pod --network none >/dev/null
    pm run -d --pod appd-harness-pod --name appd-harness-server "${ULIMITS[@]}" "$IMAGE" \
        sh -c 'while :; do echo pong | nc -l -p 8080; done' >/dev/null
    out=$(pm run --pod appd-harness-pod --name appd-harness-client "${ULIMITS[@]}" "$IMAGE" \
        sh -c 'for i in $(seq 50); do r=$(nc 127.0.0.1 8080 </dev/null) && [ -n "$r" ] && echo "$r" && exit 0; sleep 0.1; done; exit 1' 2>&1)
    check $P "pod: the client container reads the server's reply on the pod's loopback" pong "$out"
    local net_server net_infra
    net_server=$(readlink "/proc/$(pm_pid appd-harness-server)/ns/net")
    net_infra=$(readlink "/proc/$(pm_pid "$(pm pod inspect --format '{{.InfraContainerID}}' appd-harness-pod)")/ns/net")
    same $P "pod: the server joined the infra container's network namespace" "$net_infra" "$net_server"
    pm pod rm --force --time 0 appd-harness-pod >/dev/null
    check $P "pod rm: no container left" "" "$(pm ps -aq)"
}
