import AppdBase
import CLinux
import Foundation
import Glibc
import Sandbox

/// One container, one cgroup of its own (docs/oci-runtime.md, "Cgroups"): never inside another
/// container's, and its removal touches nothing outside it.
///
/// Each container's cgroup v2 directory carries the extended attribute `trusted.appd-oci` (its
/// id), set at `create`: the kernel keeps it with the cgroup, whatever state root or engine made
/// the container. A `cgroupsPath` that lies below a marked cgroup is refused at `create`, naming
/// both; one that would hold an existing container's is refused already, as its directory exists.
/// `delete` kills only its own cgroup's processes when something else lives below it (the
/// kernel's `cgroup.kill` would reach the whole subtree), and gives up on the removal within 2 s
/// per hierarchy in all, with a warning.
enum ContainerCgroup {
    static let marker = "trusted.appd-oci"

    /// Throws when the cgroup `parent/app/instance` would lie inside a container's cgroup.
    static func refuseNesting(parent: String, app: String, instance: String) throws {
        guard let unified = CgroupLayout.detect().unified else { return }
        var path = ""
        let components = (parent.split(separator: "/") + (app.isEmpty ? [] : [Substring(app)]))
        for component in components {
            path += "/\(component)"
            guard let directory = unified.directory(of: path) else { continue }
            var owner = [UInt8](repeating: 0, count: 1100)
            let count = appd_getxattr(directory, marker, &owner, owner.count)
            if count > 0 {
                let id = String(decoding: owner[..<count], as: UTF8.self)
                throw AppdError(
                    .conflict,
                    "the cgroup \(path)/\(instance) would lie inside the cgroup \(path) of container \(id): no container's cgroup is inside another's",
                    hint: "give each container a cgroupsPath of its own")
            }
        }
    }

    /// Marks the container's cgroup v2 directory as `id`'s (a v1-only host has none to mark).
    static func mark(_ cgroup: any InstanceCgroup, id: String) {
        guard let directory = cgroup.birthDirectory else { return }
        _ = Array(id.utf8).withUnsafeBytes {
            appd_setxattr(directory, marker, $0.baseAddress, $0.count)
        }
    }

    /// Whether `directory` holds a cgroup below it.
    static func hasChildren(_ directory: String) -> Bool {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
            return false
        }
        return entries.contains { name in
            var info = stat()
            return lstat("\(directory)/\(name)", &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
        }
    }

    /// Ends the container's own processes and removes its cgroup, within 2 s per hierarchy in
    /// all; false when the cgroup stays (something lives below it, or a process would not go).
    static func killAndRemove(_ cgroup: any InstanceCgroup) -> Bool {
        let hierarchies = Double(max(1, cgroup.directories.count))
        let started = ContinuousClock.now
        func elapsed() -> Double {
            let parts = started.duration(to: .now).components
            return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
        }
        try? cgroup.thaw()
        let nested = cgroup.directories.contains(where: hasChildren)
        if nested {
            // cgroup.kill ends the whole subtree: only what is in the container's own cgroup.
            while elapsed() < 0.5 * hierarchies {
                var left: [pid_t] = []
                for directory in cgroup.directories {
                    let text =
                        (try? String(contentsOfFile: "\(directory)/cgroup.procs", encoding: .utf8))
                        ?? ""
                    left += text.split(separator: "\n").compactMap { pid_t($0) }
                }
                if left.isEmpty { break }
                for pid in Set(left) { Glibc.kill(pid, SIGKILL) }
                usleep(1_000)
            }
            // What can go does (the hierarchies nothing lives below); the rest stays.
            _ = try? cgroup.remove()
            return false
        }
        try? cgroup.kill(timeoutSeconds: 0.5 * hierarchies)
        // The killed processes take a moment to leave: polled from 1 ms, doubling up to 20 ms.
        // One remove() may itself wait up to 1 s per hierarchy, so none starts after half the
        // time: kill, polling and the last attempt stay within 2 s per hierarchy.
        var pause: UInt32 = 1_000
        while true {
            if (try? cgroup.remove()) != nil { return true }
            guard elapsed() < 0.5 * hierarchies else { return false }
            usleep(pause)
            pause = min(pause * 2, 20_000)
        }
    }
}
