# shellcheck shell=bash disable=SC2034,SC2154  # variables are shared with the sourcing script
# Sourced by scripts/bench-api and scripts/bench-scale after common.sh, with appd_bin (the appd
# binary) and config (a configuration file, or empty) set; not meant to be run.
#
# daemon_start NAME makes a private state root under /var/tmp (on a fresh journaled ext4 in a
# file, its run/ on a tmpfs: a host's filesystems, see below), starts `appd serve` on it in the
# background and waits until it answers. It sets
#   base     /var/tmp/appd-NAME.XXXXXX: everything of this run, removed on exit
#   root     the state root ($base/root); work: scratch files ($base/work)
#   socket   the daemon's socket; daemon_pid: its pid
#   cgroup_parent  [Supervisor] CgroupParent= of this run (/appd-NAME-XXXXXX in every
#            hierarchy), so that its instances never mix with another daemon's
# and traps EXIT (and INT and TERM): whatever state the run is in, the step running under
# run_child is stopped, instances still alive are killed through the API, the daemon gets
# SIGTERM (SIGKILL after 15 s), processes left in this run's cgroups are killed by pid, the
# cgroups and $base are removed.

daemon_pid="" child_pid=""

# host_filesystems BASE NAME: the filesystems of a host under the folder BASE. BASE becomes a
# fresh ext4 with a journal (in the file BASE.img, loop-mounted), holding the state root
# BASE/root, whose run/ (the daemon's runtime directory: its socket, the instance records and
# status files) is a tmpfs named NAME, as /run is under systemd. This machine's / (and /run) is
# ext4 *without* a journal, where creating a file within minutes of many deletions (the last
# run's instances) scans every recently freed inode (ext4's recently_deleted): measured, a fifth
# of a 1,000-launch burst's CPU and 0.5-0.7 ms of each launch's two run/ files, which no host
# with a journal or a tmpfs /run pays. host_filesystems_release BASE undoes it (the loop device
# goes with the last umount: autoclear) and removes BASE.img; callers remove BASE.
host_filesystems() {
    local base=$1 name=$2
    truncate -s 8G "$base.img"
    mkfs.ext4 -q -F "$base.img" || die "mkfs.ext4 $base.img failed (apt-get install e2fsprogs)"
    mount -o loop "$base.img" "$base" || die "cannot loop-mount $base.img on $base"
    mkdir -m 0755 "$base/root" "$base/root/run"
    mount -t tmpfs -o mode=0755,size=256m,nosuid,nodev "$name" "$base/root/run" ||
        die "cannot mount a tmpfs on $base/root/run"
}
host_filesystems_release() {
    local base=$1
    if mountpoint -q "$base/root/run"; then umount -l "$base/root/run" || true; fi
    if mountpoint -q "$base"; then umount -l "$base" || true; fi
    rm -f "$base.img"
}

# Runs "$@" (stdin included) in the background and waits for it. bash acts on a signal only once
# its foreground command has finished; `wait` it leaves at once, and the cleanup ends the child.
run_child() {
    local status=0
    "$@" <&0 &
    child_pid=$!
    wait "$child_pid" || status=$?
    child_pid=""
    return "$status"
}

daemon_cleanup() {
    local status=$? pid dir
    trap - EXIT
    if [[ -n "$child_pid" ]]; then
        kill -TERM "$child_pid" 2>/dev/null || true
        wait "$child_pid" 2>/dev/null || true
    fi
    if [[ -n "$daemon_pid" ]] && kill -0 "$daemon_pid" 2>/dev/null; then
        # appd leaves apps running when it stops (the next start re-adopts them): kill them first.
        local live
        live=$(curl -sS -m 10 --unix-socket "$socket" http://localhost/v1/instances 2>/dev/null |
            python3 -c 'import json, sys; print(" ".join(i["id"] for i in json.load(sys.stdin)))' 2>/dev/null || true)
        for id in $live; do
            curl -sS -m 5 -o /dev/null --unix-socket "$socket" -X POST "http://localhost/v1/instances/$id/kill" || true
        done
        kill -TERM "$daemon_pid" 2>/dev/null || true
        for _ in $(seq 150); do
            kill -0 "$daemon_pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$daemon_pid" 2>/dev/null; then
            say "appd serve (pid $daemon_pid) ignored SIGTERM for 15 s: SIGKILL"
            kill -KILL "$daemon_pid" 2>/dev/null || true
        fi
        wait "$daemon_pid" 2>/dev/null || true
    fi
    if [[ -n "${cgroup_parent:-}" ]]; then
        # Deepest first: the leaves (app, relay), instance, app, parent.
        while IFS= read -r dir; do
            if [[ -f "$dir/cgroup.procs" ]]; then
                while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done <"$dir/cgroup.procs"
            fi
            rmdir "$dir" 2>/dev/null || true
        done < <(find /sys/fs/cgroup/ -maxdepth 6 -type d -path "*$cgroup_parent*" 2>/dev/null | sort -r)
    fi
    [[ -z "${temporary_config:-}" ]] || rm -f "$temporary_config"
    if [[ -n "${base:-}" ]]; then
        host_filesystems_release "$base"
        rm -rf "$base"
    fi
    exit "$status"
}

daemon_start() {
    local name=$1
    base=$(mktemp -d "/var/tmp/appd-$name.XXXXXX")
    trap daemon_cleanup EXIT
    # A signal ends the script through exit, so that the EXIT trap runs.
    trap 'exit 130' INT
    trap 'exit 143' TERM
    # The filesystems of a host (host_filesystems above).
    # daemon_filesystems=same (bench-install) keeps everything on /var/tmp's filesystem: its
    # rows compare the daemon with `cp -a` and `--no-daemon` on the same disk.
    root="$base/root" work="$base/work"
    if [[ "${daemon_filesystems:-host}" == host ]]; then
        host_filesystems "$base" "appd-$name"
    else
        mkdir -m 0755 "$root"
    fi
    mkdir -m 0755 "$work"
    socket="$root/run/appd.sock"
    cgroup_parent="/appd-$name-${base##*.}"
    {
        [[ -z "$config" ]] || cat "$config"
        printf '\n[Supervisor]\nCgroupParent=%s\n' "$cgroup_parent"
        # The generated apps are unsigned: these benchmarks measure the API, not signatures
        # (scripts/bench-install measures those). The host programs they name are allowed.
        printf '\n[Signing]\nAllowUnsigned=yes\nUnsignedHostExecutables=/bin/* /usr/bin/*\n'
        # The Probe as `swift build` links it (even a C target) loads the toolchain's Swift
        # runtime, which the default SystemPaths (/usr) does not show apps.
        if [[ -d "$SWIFT_ROOT/usr/lib/swift/linux" ]]; then
            printf '\n[Sandbox]\nSystemPaths=/usr %s\n' "$SWIFT_ROOT/usr/lib/swift/linux"
        fi
    } >"$work/appd.conf"
    say "appd serve --root $root"
    "$appd_bin" --config "$work/appd.conf" --root "$root" serve 2>"$work/appd.log" &
    daemon_pid=$!
    for _ in $(seq 100); do
        curl -sf -o /dev/null --unix-socket "$socket" http://localhost/v1/version 2>/dev/null && return
        kill -0 "$daemon_pid" 2>/dev/null || die "appd serve exited: $(tail -5 "$work/appd.log")"
        sleep 0.1
    done
    die "appd serve did not answer on $socket within 10 s: $(tail -5 "$work/appd.log")"
}

# VmRSS / VmHWM of the daemon in KiB.
daemon_rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$daemon_pid/status"; }
daemon_hwm() { awk '/^VmHWM:/ { print $2 }' "/proc/$daemon_pid/status"; }
# utime + stime of the daemon in clock ticks (every thread).
daemon_cpu() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$daemon_pid/stat"; }
# Busy clock ticks of the whole machine (every CPU): user, nice, system, irq, softirq, steal.
machine_cpu() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
