import AppdBase
import Glibc

/// CPU bandwidth and cpuset: the limits whose interface files need more than one write.
///
/// - v1 `cpu.cfs_period_us` and `cpu.cfs_quota_us` are one pair to the kernel: each write is
///   checked against the other's current value (a child's quota/period may not exceed its
///   parent's, EINVAL). runc writes the period first and, refused, the quota first; so do we.
/// - A v1 cpuset cgroup starts with empty `cpuset.cpus` and `cpuset.mems`, and no process can
///   join it (ENOSPC) until both are set. Each level appd makes gets its parent's copied, and
///   so does an existing level found empty (runc's `cpusetEnsureParent`). Not the parent's
///   `cgroup.clone_children`: that flag would change what every later child of a cgroup appd
///   does not own (the hierarchy's root, an engine's parent) starts with, and it leaves a level
///   someone made before it was set empty.
/// - cgroup v2 needs neither: `cpu.max` holds both numbers, and an empty cpuset inherits.
extension Cgroups {
    /// The longest `cpuset.cpus`/`cpuset.mems` list accepted.
    public static let maxCPUListLength = 1024
    /// The highest CPU or memory node number accepted in such a list.
    public static let maxCPUNumber = 65535

    /// A kernel CPU list: `N` or `N-M` items (N <= M), separated by commas, digits only.
    /// `what` names the value in the error (`cpuset cpus`).
    public static func validateCPUList(_ list: String, _ what: String) throws {
        func bad(_ why: String) -> AppdError {
            AppdError(
                .invalidConfig,
                "\(what) '\(list.prefix(64))' is not a CPU list like 0-3,6: \(why)")
        }
        guard !list.isEmpty else { throw bad("it is empty") }
        guard list.utf8.count <= maxCPUListLength else {
            throw bad("it is longer than \(maxCPUListLength) bytes")
        }
        func number(_ text: Substring) throws -> Int {
            guard !text.isEmpty, text.utf8.count <= 5,
                text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
                let value = Int(text), value <= maxCPUNumber
            else {
                throw bad(
                    "'\(text.prefix(16))' is not a number from 0 to \(maxCPUNumber) "
                        + "(only digits, ',' and '-' are allowed)")
            }
            return value
        }
        for item in list.split(separator: ",", omittingEmptySubsequences: false) {
            let bounds = item.split(separator: "-", omittingEmptySubsequences: false)
            guard bounds.count <= 2 else { throw bad("'\(item.prefix(16))' is not N or N-M") }
            let low = try number(bounds[0])
            if bounds.count == 2, try number(bounds[1]) < low {
                throw bad("the range '\(item)' ends below its start")
            }
        }
    }
}

extension CgroupDirectory {
    /// Gives this v1 cpuset cgroup, and any empty ancestor, its parent's `cpuset.cpus` and
    /// `cpuset.mems` where empty, top down. An ancestor with both set ends the climb: v1
    /// keeps a child's set inside its parent's, so everything above is set too.
    func fillCpuset() throws {
        var chain: [CgroupDirectory] = []
        var directory = self
        while try directory.cpusetIsEmpty() {
            chain.append(directory)
            let above = parentDirectory(of: directory.path)
            guard chain.count < 64, above != directory.path, above != "/" else {
                throw AppdError(
                    .unsupported, "no cgroup above \(path) has cpuset.cpus and cpuset.mems set",
                    hint: "is \(path) in a cgroup v1 cpuset hierarchy?")
            }
            directory = CgroupDirectory(above)
        }
        for directory in chain.reversed() {
            let parent = CgroupDirectory(parentDirectory(of: directory.path))
            for name in ["cpuset.cpus", "cpuset.mems"] {
                let value = try parent.read(name).filter { !$0.isWhitespace }
                if try directory.read(name).allSatisfy(\.isWhitespace) {
                    try directory.write(value, name)
                }
            }
        }
    }

    private func cpusetIsEmpty() throws -> Bool {
        try read("cpuset.cpus").allSatisfy(\.isWhitespace)
            || read("cpuset.mems").allSatisfy(\.isWhitespace)
    }
}

extension HybridCgroups {
    /// Writes `files` (`limitFiles`' list) into the directory of each one's controller.
    /// A refused period (EINVAL: the pair out of range against the current quota) is retried
    /// with the quota first. A cpuset narrower than what a leaf holds must reach the leaves
    /// first (v1 keeps children inside their parent); wider, the instance first: the instance
    /// is tried first, then the leaves first.
    static func write(
        _ files: [(controller: String, file: String, value: String)],
        directory: (String) -> CgroupDirectory?, leaves: (CgroupDirectory) -> [CgroupDirectory]
    ) throws {
        var index = files.startIndex
        while index < files.endIndex {
            let (controller, file, value) = files[index]
            index += 1
            guard let target = directory(controller) else { continue }
            if file == "cpu.cfs_period_us", index < files.endIndex,
                files[index].file == "cpu.cfs_quota_us"
            {
                let quota = files[index].value
                index += 1
                do {
                    try target.write(value, file)
                    try target.write(quota, "cpu.cfs_quota_us")
                } catch let error as AppdError where error.errno == EINVAL {
                    try target.write(quota, "cpu.cfs_quota_us")
                    try target.write(value, file)
                }
            } else if file.hasPrefix("cpuset.") {
                let below = leaves(target)
                do {
                    try target.write(value, file)
                    for leaf in below { try leaf.write(value, file) }
                } catch {
                    guard !below.isEmpty else { throw error }
                    for leaf in below { try leaf.write(value, file) }
                    try target.write(value, file)
                }
            } else {
                try target.write(value, file)
            }
        }
    }
}
