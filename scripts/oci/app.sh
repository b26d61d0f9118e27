# shellcheck shell=bash
# The app part: appd-oci's own contract, with a signed .app image (the Probe sample, written by
# `appd image`) run by each engine: podman, ctr (containerd's shim), docker, and containerd's
# CRI (two pods of .app containers). The attacks come from the app inside the sandbox, and from
# the config an engine hands the runtime. Runs with `scripts/oci-harness --appd PATH`.
source "$OCI_DIR/containerd.sh"

APP_IMAGE=localhost/appd-harness/probe:1
TAMPERED_IMAGE=localhost/appd-harness/probe-tampered:1

# Builds Probe.app (network client and server entitlements), a key the node trusts, the signed
# image, and a tampered image (the same bundle with its executable changed after signing).
make_app_images() {
    local dir=$WORK/appd bundle probe
    mkdir -p "$dir/data"
    probe=${PROBE:-$(cd "$REPO_ROOT" && swift build "${swift_flags[@]}" --show-bin-path)/Probe}
    [[ -x $probe ]] || die "build the Probe sample first (swift build --product Probe), or give --probe PATH"
    bundle=$dir/src/Probe.app
    mkdir -p "$bundle"
    install -m 0755 "$probe" "$bundle/Probe"
    local plist='<?xml version="1.0" encoding="UTF-8"?><!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd"><plist version="1.0"><dict>'
    printf '%s%s</dict></plist>\n' "$plist" '<key>CFBundleIdentifier</key><string>com.example.ociprobe</string><key>CFBundleExecutable</key><string>Probe</string><key>CFBundleName</key><string>Probe</string><key>CFBundleVersion</key><string>1</string><key>CFBundleShortVersionString</key><string>1.0</string><key>CFBundlePackageType</key><string>APPL</string>' >"$bundle/Info.plist"
    printf '%s%s</dict></plist>\n' "$plist" '<key>com.apple.security.app-sandbox</key><true/><key>com.apple.security.network.client</key><true/><key>com.apple.security.network.server</key><true/>' >"$bundle/Entitlements.plist"
    "$APPD" keygen --out "$dir" --name harness >/dev/null
    {
        printf '[Signer harness]\nKey=%s/harness.public-key\nBundleIDs=com.example.*\n' "$dir"
        printf 'Entitlements=com.apple.security.network.client com.apple.security.network.server\n'
        # The Probe as `swift build` links it (even a C target) loads the toolchain's Swift
        # runtime, which the default SystemPaths (/usr) does not show apps; the VM guests' probe
        # (clang, glibc only) does not.
        if readelf -d "$probe" 2>/dev/null | grep -q 'libswiftCore'; then
            printf '[Sandbox]\nSystemPaths=/usr %s\n' "$SWIFT_ROOT/usr/lib/swift/linux"
        fi
    } >"$dir/appd.conf"
    "$APPD" --config "$dir/appd.conf" sign --key "$dir/harness.signing-key" "$bundle" >/dev/null
    "$APPD" --config "$dir/appd.conf" image "$bundle" -o "$WORK/app.tar" --tag "$APP_IMAGE" >/dev/null
    # The tampered image: every file of the signed bundle, the executable with one byte more.
    cp "$bundle/Probe" "$dir/Probe.tampered"
    printf 'x' >>"$dir/Probe.tampered"
    local files=() path
    while IFS= read -r path; do
        local relative=${path#"$dir/src/"} mode
        mode=$(stat -c %a "$path")
        if [[ $relative == Probe.app/Probe ]]; then
            files+=(--file "$dir/Probe.tampered:/$relative:$mode")
        else
            files+=(--file "$path:/$relative:$mode")
        fi
    done < <(find "$bundle" -type f | sort)
    /usr/bin/python3 "$OCI_DIR/image.py" "$WORK/app-tampered.tar" --tag "$TAMPERED_IMAGE" \
        "${files[@]}" --entrypoint '["/Probe.app/Probe"]' >/dev/null
}

app_checks() {
    local P=app out rc id pid volume
    # podman, with the app runtime (appd-oci without --plain).
    mkdir -p "$WORK/podman"
    [[ -f $WORK/podman/containers.conf ]] ||
        printf '[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]\n' >"$WORK/podman/containers.conf"
    app_pm() {
        CONTAINERS_CONF=$WORK/podman/containers.conf podman --root "$WORK/podman/root" --runroot "$WORK/podman/run" \
            --tmpdir "$WORK/podman/tmp" --storage-driver "$STORAGE_DRIVER" --cgroup-manager "${CGROUP_DRIVER:-cgroupfs}" \
            --events-backend none --runtime "$APP_RUNTIME" "$@"
    }
    on_exit "CONTAINERS_CONF=$WORK/podman/containers.conf podman --root '$WORK/podman/root' --runroot '$WORK/podman/run' --tmpdir '$WORK/podman/tmp' --storage-driver '$STORAGE_DRIVER' --cgroup-manager '${CGROUP_DRIVER:-cgroupfs}' --events-backend none --runtime '$APP_RUNTIME' rm --all --force --time 0 >/dev/null 2>&1; CONTAINERS_CONF=$WORK/podman/containers.conf podman --root '$WORK/podman/root' --runroot '$WORK/podman/run' --tmpdir '$WORK/podman/tmp' --storage-driver '$STORAGE_DRIVER' --cgroup-manager '${CGROUP_DRIVER:-cgroupfs}' --events-backend none volume rm --all --force >/dev/null 2>&1"
    out=$(app_pm load -i "$WORK/app.tar" 2>&1) || { fail "$P: podman load of the appd image: $out"; return 1; }
    app_pm load -i "$WORK/app-tampered.tar" >/dev/null 2>&1 || { fail "$P: podman load of the tampered image"; return 1; }

    app_pm run --rm --network none "$APP_IMAGE" exit 7 >/dev/null 2>&1 && rc=0 || rc=$?
    check $P "podman run of a signed .app image: the app's exit code" 7 "$rc"
    out=$(app_pm run --rm --network none "$APP_IMAGE" env 2>&1)
    check $P "the app's HOME is its data container at /appd/data, not a host path" yes \
        "$(grep -Eq '^env: value HOME=/appd/data$' <<<"$out" && echo yes || echo "no: $(grep 'HOME=' <<<"$out")")"
    out=$(app_pm run --rm --network none "$APP_IMAGE" read /etc/shadow 2>&1)
    check $P "attack: the app reads the host's /etc/shadow" "read: refused ENOENT" "$out"
    out=$(app_pm run --rm --network none "$APP_IMAGE" ptrace 2>&1)
    check $P "attack: ptrace" yes "$(grep -q '^ptrace-attach: refused' <<<"$out" && echo yes || echo "no: $out")"
    out=$(app_pm run --rm --network none "$APP_IMAGE" code 2>&1)
    check $P "attack: code the app writes itself (W^X, memfd exec, tmp exec): nothing allowed" "" \
        "$(grep -E ': (allowed|killed)' <<<"$out" | grep -v 'code-mprotect-rx\|code-shared-anon-rx' || true)"
    out=$(app_pm run --rm --network none "$APP_IMAGE" write /usr/lib/appd-oci-probe 2>&1)
    check $P "attack: the app writes to a host system folder" yes "$(grep -q '^write: refused' <<<"$out" && echo yes || echo "no: $out")"

    # The config may narrow, never widen: each of these is refused at create, naming it.
    for flags in "--privileged" "--cap-add SYS_ADMIN" "-v /etc:/host-etc" "--pid host" "--network host" \
        "--device /dev/loop-control" "--ipc host" "--sysctl net.ipv4.ip_forward=1"; do
        # shellcheck disable=SC2086
        out=$(app_pm run --rm $flags "$APP_IMAGE" exit 0 2>&1) && rc=0 || rc=$?
        check $P "widening refused: podman run $flags" "refused" \
            "$( ((rc != 0)) && grep -q 'widen the sandbox\|host' <<<"$out" && echo refused || echo "rc $rc: $(tail -1 <<<"$out")")"
    done
    out=$(app_pm run --rm --network none "$TAMPERED_IMAGE" exit 0 2>&1) && rc=0 || rc=$?
    check $P "a tampered image is refused at create" refused \
        "$( ((rc != 0)) && grep -q 'does not match its code signature' <<<"$out" && echo refused || echo "rc $rc: $(tail -1 <<<"$out")")"
    out=$(app_pm run --rm --network none --memory 64m "$APP_IMAGE" exit 0 2>&1) && rc=0 || rc=$?
    check $P "narrowing accepted: --memory 64m" 0 "$rc"
    # The engine's limit as set, above the sandbox's 512 MiB default too, and raised in place.
    id=$(app_pm run -d --network none --memory 768m "$APP_IMAGE" sleep 60)
    pid=$(app_pm inspect --format '{{.State.Pid}}' "$id")
    app_memory_limit() {
        local path
        path=$(awk -F: '$2 == "memory" {print $3}' "/proc/$pid/cgroup")
        if [[ -n $path ]]; then cat "/sys/fs/cgroup/memory$path/memory.limit_in_bytes"; else
            cat "/sys/fs/cgroup$(awk -F: '$1 == "0" {print $3}' "/proc/$pid/cgroup")/memory.max"
        fi 2>&1
    }
    check $P "podman run --memory 768m: the container's memory limit" $((768 << 20)) "$(app_memory_limit)"
    app_pm update --memory 1g "$id" >/dev/null 2>&1 || true
    check $P "podman update --memory 1g raises it in place" $((1 << 30)) "$(app_memory_limit)"
    app_pm rm -f --time 0 "$id" >/dev/null

    # stop: the app has no SIGTERM handler, so it keeps running (PID 1's rule) until SIGKILL.
    id=$(app_pm run -d --network none "$APP_IMAGE" sleep 300)
    app_pm stop --time 1 "$id" >/dev/null
    check $P "stop --time 1 of an app without a SIGTERM handler: killed" 137 \
        "$(app_pm inspect --format '{{.State.ExitCode}}' "$id")"
    app_pm rm -f "$id" >/dev/null
    id=$(app_pm run -d --network none "$APP_IMAGE" sleep 300)
    app_pm exec "$id" /Probe.app/Probe exit 3 && rc=0 || rc=$?
    check $P "exec: the exit code of a second app process" 3 "$rc"
    out=$(app_pm exec "$id" /Probe.app/Probe read /etc/shadow 2>&1)
    check $P "attack through exec: the exec'd process is sandboxed too" "read: refused ENOENT" "$out"
    pid=$(app_pm inspect --format '{{.State.Pid}}' "$id")
    check $P "the app runs as its node uid, not root" yes \
        "$(ps -o uid= --ppid "$(pgrep -P "$pid" | head -1)" | awk '$1>=2000200000 && $1<=2000299999 {print "yes"; exit}')"
    app_pm pause "$id" >/dev/null
    check $P "pause" paused "$(app_pm inspect --format '{{.State.Status}}' "$id")"
    app_pm unpause "$id" >/dev/null
    check $P "unpause" running "$(app_pm inspect --format '{{.State.Status}}' "$id")"
    app_pm rm -f --time 0 "$id" >/dev/null

    # The data container in a volume at /appd/data outlives the container.
    app_pm volume create appd-probe-data >/dev/null
    volume=$(app_pm volume inspect --format '{{.Mountpoint}}' appd-probe-data)
    app_pm run --rm --network none -v appd-probe-data:/appd/data "$APP_IMAGE" home file Documents/first 10 >/dev/null 2>&1
    app_pm run --rm --network none -v appd-probe-data:/appd/data "$APP_IMAGE" home file Documents/second 10 >/dev/null 2>&1
    check $P "a volume at /appd/data keeps one data container across containers" "first second" \
        "$(ls "$volume"/*/Documents 2>/dev/null | sort | xargs)"
    check $P "the data container in the volume belongs to the app's uid" yes \
        "$(stat -c %u "$volume"/*/Documents 2>/dev/null | awk '$1>=2000200000 {print "yes"}')"

    # ctr, through containerd's runc shim.
    start_containerd || return 1
    out=$(ctr_ -n appd-app images import "$WORK/app.tar" 2>&1) || { fail "$P: ctr import: $out"; return 1; }
    ctr_ -n appd-app run --rm --runtime io.containerd.runc.v2 --runc-binary "$APP_RUNTIME" \
        --runc-root "$CTRD/appd-root" $(ctr_cgroup app1 appd-oci-harness-ctr) "$APP_IMAGE" app1 /Probe.app/Probe exit 9 \
        >/dev/null 2>&1 && rc=0 || rc=$?
    check $P "ctr run (the shim's contract): the app's exit code" 9 "$rc"

    # CRI: two pods of .app containers, handler appd.
    for image in app pause; do
        out=$(ctr_ -n k8s.io images import "$WORK/$image.tar" 2>&1) || { fail "$P: import $image: $out"; return 1; }
    done
    sleep 1
    rc=0
    /usr/bin/python3 "$OCI_DIR/cri.py" --socket "$CTRD_SOCK" --handler "$APP_HANDLER" --app-image "$APP_IMAGE" \
        --cgroup-parent "$CRI_CGROUP_PARENT" --work "$WORK/cri-app" >"$WORK/cri-app.out" 2>&1 || rc=$?
    cat "$WORK/cri-app.out"
    passed=$((passed + $(grep -c '^PASS' "$WORK/cri-app.out" || true)))
    failed=$((failed + $(grep -c '^FAIL' "$WORK/cri-app.out" || true)))
    if ((rc != 0)) && ! grep -q '^FAIL' "$WORK/cri-app.out"; then
        fail "cri app: the client stopped with status $rc: $(tail -1 "$WORK/cri-app.out")"
    fi
    return 0
}
