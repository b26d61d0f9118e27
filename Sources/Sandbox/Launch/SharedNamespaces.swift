import Glibc

/// An app's shared namespaces for one launch to join instead of building its own
/// (docs/launcher-protocol.md, "Shared namespaces"): fds the launch owns, handed to appd-exec
/// and closed by the caller after the start. -1: that namespace is not shared.
public struct SharedNamespaces: Sendable {
    public var mount: Int32
    /// The template's root directory (the builder's `/proc/PID/root`): the launcher enters
    /// it after joining the mount namespace. The namespace's own root is not it when appd
    /// runs chrooted (systemd's RootDirectory=, a VM's init): there the template's root is
    /// a directory below it, and `setns` alone would leave the launcher at the host's.
    public var root: Int32
    public var net: Int32
    public var uts: Int32
    /// A pod's ipc and pid namespaces (appd-oci's plain containers); -1: not joined.
    public var ipc: Int32
    public var pid: Int32

    public init(mount: Int32, root: Int32, net: Int32, uts: Int32, ipc: Int32 = -1, pid: Int32 = -1)
    {
        self.mount = mount
        self.root = root
        self.net = net
        self.uts = uts
        self.ipc = ipc
        self.pid = pid
    }

    public func close() {
        for fd in [mount, root, net, uts, ipc, pid] where fd >= 0 { Glibc.close(fd) }
    }
}
