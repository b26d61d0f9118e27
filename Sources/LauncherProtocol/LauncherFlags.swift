/// The options of `appd-exec`'s command line (docs/launcher-protocol.md): each takes a value
/// but `template`. The daemon passes them, the launcher parses them.
public enum LauncherFlag {
    public static let profileFD = "--profile-fd"
    public static let seccompFD = "--seccomp-fd"
    public static let statusFD = "--status-fd"
    /// The app's end of the lifecycle channel: fd 3 in the app (docs/lifecycle.md).
    public static let channelFD = "--channel-fd"
    /// The output relay (docs/app-output.md): the pipe's read end, the log folder, the log's
    /// name and bound, the journal and its fields.
    public static let outputFD = "--output-fd"
    public static let logDirectoryFD = "--log-dir-fd"
    public static let logName = "--log-name"
    public static let logMaxBytes = "--log-max-bytes"
    public static let journalFD = "--journal-fd"
    public static let journalField = "--journal-field"
    /// The app's shared namespaces to join ("Shared namespaces").
    public static let mountNamespaceFD = "--mount-ns-fd"
    public static let rootFD = "--root-fd"
    public static let netNamespaceFD = "--net-ns-fd"
    public static let utsNamespaceFD = "--uts-ns-fd"
    /// A pod's ipc and pid namespaces (appd-oci's plain containers, given by path): joined
    /// instead of created; with the pid namespace PID 1 of the launch is a process of the pod's.
    public static let ipcNamespaceFD = "--ipc-ns-fd"
    public static let pidNamespaceFD = "--pid-ns-fd"
    /// Build the shared namespaces, say `ready` and wait (no value).
    public static let template = "--template"
    /// A created-but-not-started container (appd-oci, docs/oci-runtime.md): the app process
    /// writes `ready` on this pipe once the sandbox is built, then waits at the start gate.
    public static let readyFD = "--ready-fd"
    /// The start gate: a FIFO opened read-write. The app process reads one byte from it,
    /// which `appd-oci start` writes, and only then drops its credentials, applies Landlock
    /// and seccomp and execs.
    public static let startFD = "--start-fd"
    /// A pidfd of a process of a running sandbox: the launcher enters its namespaces (mount,
    /// pid, and the others the profile names) instead of creating them, and builds nothing
    /// (`appd-oci exec`).
    public static let enterFD = "--enter-fd"
    /// PID 1's signal rule for the app (no value; appd-oci): a forwarded signal reaches the
    /// app only if it handles it, as the kernel delivers signals to a pid namespace's init, so
    /// an engine's `stop` of a program without a SIGTERM handler falls back to SIGKILL as it
    /// does under runc.
    public static let initSignals = "--init-signals"

    public static let usage =
        "usage: appd-exec \(profileFD) N \(seccompFD) M [\(statusFD) S] [\(channelFD) C] "
        + "[\(outputFD) R \(logDirectoryFD) D \(logName) NAME \(logMaxBytes) N [\(journalFD) J] "
        + "[\(journalField) KEY=VALUE]...] "
        + "[\(mountNamespaceFD) F \(rootFD) F] [\(netNamespaceFD) F] [\(utsNamespaceFD) F] "
        + "[\(ipcNamespaceFD) F] [\(pidNamespaceFD) F] "
        + "[\(readyFD) R \(startFD) F] [\(enterFD) P] [\(initSignals)]; "
        + "or: appd-exec \(template) \(profileFD) N \(statusFD) S"
}
