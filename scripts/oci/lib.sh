# shellcheck shell=bash
# Sourced by scripts/oci-harness and scripts/bench-oci: the check helpers, the cleanup stack and
# the test image. Not meant to be run.

passed=0
failed=0
failures=()

pass() { echo "PASS $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); failures+=("$*"); }

# check PART NAME EXPECTED ACTUAL: compares two strings and says what it compared.
check() {
    local part=$1 name=$2 expected=$3 actual=$4
    if [[ "$expected" == "$actual" ]]; then
        pass "$part: $name (expected '$expected', got '$actual')"
    else
        fail "$part: $name (expected '$expected', got '$actual')"
    fi
}

# same PART NAME A B: like check, for two values read at run time, which must also be non-empty
# (two failed reads are equal and prove nothing).
same() {
    local part=$1 name=$2 a=$3 b=$4
    if [[ -n "$a" && "$a" == "$b" ]]; then
        pass "$part: $name ('$a' both)"
    else
        fail "$part: $name ('$a' and '$b')"
    fi
}

# Cleanup stack: each `on_exit CMD...` runs at exit, last first, even after a failure.
cleanups=()
on_exit() { cleanups+=("$*"); }
run_cleanups() {
    local i
    for ((i = ${#cleanups[@]} - 1; i >= 0; i--)); do
        eval "${cleanups[i]}" >/dev/null 2>&1 || true
    done
    cleanups=()
}

# runtime_status RUNTIME ROOT ID: the `status` the runtime's own `state` reports (the command
# conmon calls), or its error.
runtime_status() {
    "$1" --root "$2" state "$3" 2>&1 | /usr/bin/python3 -c 'import json, sys
text = sys.stdin.read()
try:
    print(json.loads(text)["status"])
except (ValueError, KeyError):
    print(text.strip()[:200])'
}

# wait_ready PID SECONDS COMMAND...: polls COMMAND every 0.1 s until it succeeds (0), the daemon
# PID exits or SECONDS pass (1).
wait_ready() {
    local pid=$1 tries=$(($2 * 10)) i
    shift 2
    for ((i = 0; i < tries; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# stop_daemon PID: SIGTERM, up to 10 s for it to exit, then SIGKILL.
stop_daemon() {
    local i
    kill "$1" 2>/dev/null || return 0
    for ((i = 0; i < 100; i++)); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
    kill -9 "$1" 2>/dev/null
    return 0
}

# unit_properties UNIT PROPERTY...: the values systemd has for the unit, in the order given.
unit_properties() {
    local unit=$1 property values=()
    shift
    for property in "$@"; do values+=("$(systemctl show -p "$property" --value "$unit" 2>&1)"); done
    echo "${values[*]}"
}

# umount_under DIR: lazily unmounts every mount at or under DIR, deepest first.
umount_under() {
    grep -o " $1[^ ]*" /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null
    return 0
}

# remove_cgroups NAME: removes the (empty) cgroup NAME and its children under every hierarchy,
# deepest first; a cgroup that still holds a process stays and is named on stderr.
remove_cgroups() {
    local dir
    for dir in /sys/fs/cgroup/*/"$1" /sys/fs/cgroup/"$1"; do
        [[ -d $dir ]] || continue
        find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null || true
        [[ -d $dir ]] && echo "warning: cgroup $dir still in use" >&2
    done
    return 0
}

# kill_cgroup CGROUP: the last resort when a runtime under test left a container behind (one that
# lies about pause, or crashes half-way): thaws CGROUP and every cgroup below it and SIGKILLs each
# process in them, by pid. Only cgroups this harness made are given to it.
kill_cgroup() {
    local dir pid
    for dir in $(find /sys/fs/cgroup/*/"$1" /sys/fs/cgroup/"$1" -type d 2>/dev/null); do
        [[ -w $dir/freezer.state ]] && echo THAWED >"$dir/freezer.state"
        [[ -w $dir/cgroup.freeze ]] && echo 0 >"$dir/cgroup.freeze"
        while read -r pid; do kill -9 "$pid"; done <"$dir/cgroup.procs"
    done 2>/dev/null
    return 0
}

# kill_work_processes DIR: SIGKILLs, by pid, the processes whose command line names DIR (the
# conmon and shim processes of this harness's engines, which all run with paths under $WORK).
kill_work_processes() {
    local proc pid
    for proc in /proc/[0-9]*; do
        pid=${proc#/proc/}
        ((pid == $$ || pid == BASHPID)) && continue
        tr '\0' ' ' <"$proc/cmdline" 2>/dev/null | grep -qF -- "$1" && kill -9 "$pid" 2>/dev/null
    done
    return 0
}

# The test image: Debian's static busybox with its applets as links, a world-writable /tmp, /var
# and /run as an image has them (root's, 0755: nginx and postgres write there), and
# (for the CRI pod sandbox) a second image of Debian's static catatonit as the pause process.
make_images() {
    local dir=$1 links=() applet
    for applet in sh echo sleep nc true false cat kill ls seq tail head test sync mkdir; do
        links+=(--link "/bin/$applet:busybox")
    done
    /usr/bin/python3 "$OCI_DIR/image.py" "$dir/busybox.tar" --tag "$IMAGE" \
        --file /usr/bin/busybox:/bin/busybox "${links[@]}" --dir /tmp:1777 --dir /proc --dir /sys \
        --dir /dev --dir /etc --dir /var --dir /run --cmd '["/bin/true"]' >/dev/null
    /usr/bin/python3 "$OCI_DIR/image.py" "$dir/pause.tar" --tag "$PAUSE_IMAGE" \
        --file /usr/bin/catatonit:/catatonit --dir /proc --dir /sys --dir /dev --dir /etc \
        --entrypoint '["/catatonit", "-P"]' >/dev/null
}

# With --cgroup-driver systemd: the slices the CRI pods, ctr's tasks and docker's containers go
# to (no '-' inside: a '-' in a slice name nests it under another slice), and podman's own
# (machine.slice, libpod-ID.scope).
HARNESS_SLICE=appdharness.slice
DOCKER_SLICE=appdharnessdocker.slice

IMAGE=localhost/appd-harness/busybox:1
PAUSE_IMAGE=localhost/appd-harness/pause:1
# runc and crun cannot raise a limit past root's hard limit here (no CAP_SYS_RESOURCE).
ULIMITS=(--ulimit nofile=1024:1024 --ulimit nproc=4096:4096)
