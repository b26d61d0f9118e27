import AppdBase
import Glibc

/// Operations on one cgroup directory that both drivers share: mkdir/rmdir, the v2
/// freeze/kill interface (present on hybrid hosts too, in the controller-less v2 tree), and the
/// SIGKILL loop for kernels without `cgroup.kill`.
struct CgroupDirectory: Sendable, Equatable {
    var path: String

    init(_ path: String) { self.path = path }

    func file(_ name: String) -> String { path + "/" + name }

    func read(_ name: String) throws -> String {
        try CgroupFS.read(file(name)).mapError {
            AppdError.cgroup("failed to read", file(name), $0)
        }
        .get()
    }

    func write(_ value: String, _ name: String) throws {
        try CgroupFS.write(value, to: file(name))
            .mapError { AppdError.cgroup("failed to write '\(value)' to", file(name), $0) }.get()
    }

    /// `key value` file as a dictionary; a missing file reads as empty (the controller is not
    /// enabled here), other errors throw.
    func counters(_ name: String) throws -> [String: Int64] {
        switch CgroupFS.read(file(name)) {
        case .success(let text): return CgroupFS.keyedValues(text)
        case .failure(let error) where error.code == ENOENT: return [:]
        case .failure(let error): throw AppdError.cgroup("failed to read", file(name), error)
        }
    }

    /// A single-number file; nil if missing or `max`.
    func number(_ name: String) throws -> Int64? {
        switch CgroupFS.read(file(name)) {
        case .success(let text):
            return text.split(whereSeparator: \.isWhitespace).first.flatMap { Int64($0) }
        case .failure(let error) where error.code == ENOENT: return nil
        case .failure(let error): throw AppdError.cgroup("failed to read", file(name), error)
        }
    }

    func processes() throws -> [pid_t] {
        try CgroupFS.pids(file("cgroup.procs"))
            .mapError { AppdError.cgroup("failed to read", file("cgroup.procs"), $0) }.get()
    }

    /// An instance's leaf (`Cgroups.appLeaf`, `Cgroups.relayLeaf`).
    func leaf(_ name: String) -> CgroupDirectory { CgroupDirectory(path + "/" + name) }

    /// The pids in this directory and in `leaves` (a leaf already removed has none).
    func processes(leaves: [CgroupDirectory]) throws -> [pid_t] {
        var pids = try processes()
        for leaf in leaves {
            switch CgroupFS.pids(leaf.file("cgroup.procs")) {
            case .success(let more): pids += more
            case .failure(let error) where error.code == ENOENT: continue
            case .failure(let error):
                throw AppdError.cgroup("failed to read", leaf.file("cgroup.procs"), error)
            }
        }
        return pids
    }

    /// Removes `leaves`, then this directory; missing ones are fine. Every removal is tried,
    /// and the first failure is reported.
    func remove(leaves: [CgroupDirectory]) throws {
        var failure: Error?
        for directory in leaves + [self] {
            do { try directory.remove() } catch { failure = failure ?? error }
        }
        if let failure { throw failure }
    }

    /// mkdir; `existingIsFine` for the shared per-app level, not for an instance.
    func make(existingIsFine: Bool) throws {
        if mkdir(path, 0o755) == 0 { return }
        let code = errno
        if code == EEXIST && existingIsFine && CgroupFS.isDirectory(path) { return }
        if code == EEXIST {
            throw AppdError(
                .exists, "cgroup \(path) already exists",
                hint: CgroupFS.isDirectory(path)
                    ? "a previous instance of that name was not cleaned up" : nil)
        }
        throw AppdError.cgroup("failed to create cgroup", path, CgroupFS.Failure(code))
    }

    /// rmdir; a missing directory is fine. EBUSY right after the last process exited is
    /// retried briefly: the kernel finishes tearing down exiting tasks asynchronously.
    func remove(timeoutSeconds: Double = 1) throws {
        let deadline = Deadline(seconds: timeoutSeconds)
        while rmdir(path) != 0 {
            let code = errno
            if code == ENOENT { return }
            let left = code == EBUSY ? (try? processes()) ?? [] : []
            if code == EBUSY && left.isEmpty && !deadline.passed {
                usleep(1000)
                continue
            }
            if !left.isEmpty {
                throw AppdError(
                    .conflict,
                    "cannot remove cgroup \(path): processes \(pidList(left)) are still in it",
                    errno: code, hint: "kill() the instance first")
            }
            throw AppdError.cgroup("failed to remove cgroup", path, CgroupFS.Failure(code))
        }
    }

    /// rmdir if empty; used for the per-app level, which other instances may still use.
    func removeIfUnused() {
        _ = rmdir(path)
    }

    // MARK: cgroup v2 interface files

    var hasFreeze: Bool { CgroupFS.exists(file("cgroup.freeze")) }
    var hasKill: Bool { CgroupFS.exists(file("cgroup.kill")) }

    func setFrozen(_ frozen: Bool, timeoutSeconds: Double) throws {
        try write(frozen ? "1" : "0", "cgroup.freeze")
        try waitForEvent("frozen", frozen ? 1 : 0, timeoutSeconds: timeoutSeconds)
    }

    func isFrozen() throws -> Bool { try counters("cgroup.events")["frozen"] == 1 }

    /// Waits until `cgroup.events` shows `key value`. The kernel signals changes to that file
    /// with POLLPRI, so this sleeps in poll(2) rather than spinning.
    func waitForEvent(_ key: String, _ value: Int64, timeoutSeconds: Double) throws {
        let events = file("cgroup.events")
        let fd = open(events, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw AppdError.cgroup("failed to open", events, CgroupFS.Failure(errno))
        }
        defer { close(fd) }
        let deadline = Deadline(seconds: timeoutSeconds)
        while true {
            let text = try CgroupFS.readAll(fd)
                .mapError { AppdError.cgroup("failed to read", events, $0) }.get()
            if CgroupFS.keyedValues(text)[key] == value { return }
            guard !deadline.passed else {
                throw AppdError(
                    .io,
                    "timed out after \(timeoutSeconds)s waiting for '\(key) \(value)' in \(events)",
                    hint: key == "frozen"
                        ? "a process in uninterruptible sleep (D state) delays freezing" : nil)
            }
            var pfd = pollfd(fd: fd, events: Int16(POLLPRI), revents: 0)
            _ = poll(&pfd, 1, min(deadline.remainingMilliseconds, 50))
        }
    }

    /// Ends every process: `cgroup.kill` (Linux 5.14) where present, otherwise SIGKILL to each
    /// listed pid, repeated while new ones appear. Waits until the cgroup is empty.
    func killAll(procsFiles: [String], timeoutSeconds: Double) throws {
        let deadline = Deadline(seconds: timeoutSeconds)
        let useKillFile = hasKill
        if useKillFile { try write("1", "cgroup.kill") }
        while true {
            var left: [pid_t] = []
            for procs in procsFiles {
                switch CgroupFS.pids(procs) {
                case .success(let pids): left += pids
                case .failure(let error) where error.code == ENOENT: continue
                case .failure(let error): throw AppdError.cgroup("failed to read", procs, error)
                }
            }
            if left.isEmpty { return }
            guard !deadline.passed else {
                throw AppdError(
                    .io,
                    "timed out after \(timeoutSeconds)s killing \(path): pids \(pidList(left)) remain",
                    hint: "a process in uninterruptible sleep (D state) dies only when it wakes")
            }
            if !useKillFile {
                for pid in Set(left) { _ = Glibc.kill(pid, SIGKILL) }
            }
            usleep(1000)
        }
    }
}

/// A monotonic deadline.
struct Deadline {
    private let end: ContinuousClock.Instant

    init(seconds: Double) {
        end = .now + .milliseconds(Int64(seconds * 1000))
    }

    var passed: Bool { ContinuousClock.now >= end }

    var remainingMilliseconds: Int32 {
        let left = ContinuousClock.now.duration(to: end).components
        let millis = left.seconds * 1000 + left.attoseconds / 1_000_000_000_000_000
        return Int32(clamping: max(0, millis))
    }
}

/// `12 15 40`: sorted, without duplicates.
func pidList(_ pids: [pid_t]) -> String {
    Set(pids).sorted().map(String.init).joined(separator: " ")
}
