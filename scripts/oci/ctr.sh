# shellcheck shell=bash
# The ctr part: containerd's io.containerd.runc.v2 shim calling the runtime under test
# (ctr run --runc-binary PATH): create/start/kill/delete, exec, pause/resume, metrics.
# ctr_cgroup (containerd.sh) gives each task its cgroup for the harness's cgroup driver.
# shellcheck disable=SC2046  # $(ctr_cgroup ...) is two or three flags, split on purpose
source "$OCI_DIR/containerd.sh"

ctr_checks() {
    local P=ctr out rc ns=(-n appd-oci-harness-ctr) run=(--runtime io.containerd.runc.v2 --runc-binary "$RUNTIME"
        --runc-root "$CTRD/runc-root" --fifo-dir "$CTRD/fifo")
    start_containerd || return 1
    on_exit "remove_cgroups appd-oci-harness-ctr" # ctr's cgroups are /NAMESPACE/ID
    out=$(ctr_ "${ns[@]}" images import "$WORK/busybox.tar" 2>&1)
    check $P "images import of the docker-archive: the tag" "$IMAGE" "$(ctr_ "${ns[@]}" images ls -q)"

    out=$(ctr_ "${ns[@]}" run --rm "${run[@]}" $(ctr_cgroup h-out appd-oci-harness-ctr) "$IMAGE" h-out echo hello through the shim 2>&1)
    check $P "run --rm: output" "hello through the shim" "$out"
    ctr_ "${ns[@]}" run --rm "${run[@]}" $(ctr_cgroup h-exit appd-oci-harness-ctr) "$IMAGE" h-exit sh -c 'exit 9' >/dev/null 2>&1 && rc=0 || rc=$?
    check $P "run --rm: exit code" 9 "$rc"

    ctr_ "${ns[@]}" run -d "${run[@]}" $(ctr_cgroup h-long appd-oci-harness-ctr) "$IMAGE" h-long sh -c 'trap "exit 42" TERM; while :; do sleep 0.1; done' >/dev/null
    sleep 0.3
    check $P "task ls: running" RUNNING "$(ctr_ "${ns[@]}" tasks ls | awk '$1 == "h-long" {print $3}')"
    if [[ $SYSTEMD_CGROUP == true ]]; then
        check $P "systemd driver: the task's cgroup is systemd's active unit ctr-h-long.scope in $HARNESS_SLICE" \
            "active /$HARNESS_SLICE/ctr-h-long.scope" \
            "$(unit_properties ctr-h-long.scope ActiveState ControlGroup)"
    fi
    check $P "the runtime's own state (under the --runc-root the shim passed)" running \
        "$(runtime_status "$RUNTIME" "$CTRD/runc-root/appd-oci-harness-ctr" h-long)"
    out=$(ctr_ "${ns[@]}" tasks exec --fifo-dir "$CTRD/fifo" --exec-id e1 h-long sh -c 'echo in-exec; exit 0' 2>&1)
    check $P "tasks exec: output" in-exec "$out"
    ctr_ "${ns[@]}" tasks exec --fifo-dir "$CTRD/fifo" --exec-id e2 h-long sh -c 'exit 6' >/dev/null 2>&1 && rc=0 || rc=$?
    check $P "tasks exec: exit code" 6 "$rc"
    # OCI_HARNESS_EXEC_STRESS=N: N short execs in a row, each one's output checked (a short exec's
    # output was lost once through ctr's fifos under load, its exit code right).
    if [[ ${OCI_HARNESS_EXEC_STRESS:-0} -gt 0 ]]; then
        local i lost=0 first_lost=""
        for ((i = 0; i < OCI_HARNESS_EXEC_STRESS; i++)); do
            out=$(ctr_ "${ns[@]}" tasks exec --fifo-dir "$CTRD/fifo" --exec-id "s$i" h-long sh -c 'echo in-exec; exit 0' 2>&1)
            if [[ $out != in-exec ]]; then
                lost=$((lost + 1))
                [[ -n $first_lost ]] || first_lost="exec $i: '$out'"
            fi
        done
        check $P "tasks exec x$OCI_HARNESS_EXEC_STRESS: output every time (${first_lost:-none lost})" 0 "$lost"
    fi
    out=$(ctr_ "${ns[@]}" tasks metrics h-long 2>&1)
    if grep -q 'memory.usage_in_bytes\|memory.current\|memory.usage' <<<"$out"; then
        pass "$P: tasks metrics: the shim read the container's memory cgroup ($(grep -m1 -o 'memory[.a-z_]*usage[a-z_]* *[0-9]*' <<<"$out"))"
    else
        fail "$P: tasks metrics: no memory figure in: $(head -c 300 <<<"$out")"
    fi
    ctr_ "${ns[@]}" tasks pause h-long
    check $P "tasks pause: state" PAUSED "$(ctr_ "${ns[@]}" tasks ls | awk '$1 == "h-long" {print $3}')"
    ctr_ "${ns[@]}" tasks resume h-long
    check $P "tasks resume: state" RUNNING "$(ctr_ "${ns[@]}" tasks ls | awk '$1 == "h-long" {print $3}')"
    ctr_ "${ns[@]}" tasks kill -s SIGTERM h-long
    sleep 0.5
    check $P "tasks kill SIGTERM: stopped" STOPPED "$(ctr_ "${ns[@]}" tasks ls | awk '$1 == "h-long" {print $3}')"
    out=$(ctr_ "${ns[@]}" tasks rm h-long 2>&1)
    check $P "tasks rm: the exit status the shim reaped (the trap's)" "42" "$(grep -o 'exit code [0-9]*' <<<"$out" | awk '{print $3}')"
    ctr_ "${ns[@]}" containers rm h-long
    check $P "no container left" "" "$(ctr_ "${ns[@]}" containers ls -q)"
    check $P "the runtime's state for the namespace lists no container" "" \
        "$("$RUNTIME" --root "$CTRD/runc-root/appd-oci-harness-ctr" list -q 2>&1)"
}
