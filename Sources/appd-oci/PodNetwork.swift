import AppdBase
import CLinux
import Foundation
import Glibc
import Sandbox

/// Which network namespace a plain container may join by path (docs/oci-runtime.md, "Plain
/// containers"): its pod's, never an app's own. An app container without a network entitlement
/// (and an app the daemon runs) has a namespace of its own whose loopback only it reaches, its
/// listeners included; the loopback guard keeps other apps out of it, and a plain container,
/// which has no guard, must not be let in by path either.
///
/// An app's namespace is told by who is in it, as the kernel shows it: a process of an app
/// container (its cgroup marked `app` by appd-oci at create, from the launcher's birth on) or
/// one running as an app's uid (appd's `[Users] UIDRange`, the node's app uids), and no pod
/// sandbox (a plain container's process: its cgroup marked `plain`, or its range's uid). A pod's
/// namespace holds its sandbox ("pause") container; a namespace an engine pinned with nobody in
/// it yet is the pod's being made.
enum PodNetwork {
    static let kindMarker = "trusted.appd-oci.kind"

    enum Member { case app, plain, other }

    /// Marks the container's cgroup v2 directory with its kind.
    static func mark(_ cgroup: any InstanceCgroup, plain: Bool) {
        guard let directory = cgroup.birthDirectory else { return }
        _ = Array((plain ? "plain" : "app").utf8).withUnsafeBytes {
            appd_setxattr(directory, kindMarker, $0.baseAddress, $0.count)
        }
    }

    /// Throws when the network namespace open at `fd` (given by `path`) is an app's own;
    /// `type` another kind (`pid`, `ipc`, `uts`: a pod's, joined by path, by the same rule).
    static func refuseAppNamespace(
        fd: Int32, path: String, appUIDs: [ClosedRange<UInt32>], type: String = "network"
    ) throws {
        let file = type == "network" ? "net" : type
        var namespace = stat()
        guard fstat(fd, &namespace) == 0 else { return }
        let unified = CgroupLayout.detect().unified
        let plainIDs =
            PlainIDRange.first...(PlainIDRange.first + PlainIDRange.slots * PlainIDRange.size - 1)
        var app: pid_t?
        var sandbox = false
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries.prefix(1 << 20) {
            guard let pid = pid_t(entry) else { continue }
            var info = stat()
            guard stat("/proc/\(pid)/ns/\(file)", &info) == 0, info.st_dev == namespace.st_dev,
                info.st_ino == namespace.st_ino
            else { continue }
            switch member(pid, unified: unified, appUIDs: appUIDs, plainIDs: plainIDs) {
            case .app: app = app ?? pid
            case .plain: sandbox = true
            case .other: continue
            }
        }
        if let app, !sandbox {
            throw AppdError(
                .permissionDenied,
                "config.json's \(type) namespace \(path) is an app's own (process \(app) is an app's): a plain container joins its pod's namespaces only",
                hint: "an app's namespaces are its own; give the container its pod's"
            )
        }
    }

    /// Whose process `pid` is: by its cgroup's mark, else by its uid.
    static func member(
        _ pid: pid_t, unified: CgroupLayout.Hierarchy?, appUIDs: [ClosedRange<UInt32>],
        plainIDs: ClosedRange<UInt32>
    ) -> Member {
        if let unified,
            let text = try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("0::") }),
            let directory = unified.directory(of: String(line.dropFirst(3)))
        {
            var kind = [UInt8](repeating: 0, count: 16)
            let count = appd_getxattr(directory, kindMarker, &kind, kind.count)
            if count > 0 {
                return String(decoding: kind[..<count], as: UTF8.self) == "plain" ? .plain : .app
            }
        }
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") }),
            let uid = line.split(whereSeparator: \.isWhitespace).dropFirst().first.flatMap({
                UInt32($0)
            })
        else { return .other }
        if plainIDs.contains(uid) { return .plain }
        return appUIDs.contains { $0.contains(uid) } ? .app : .other
    }
}
