import CLinux
import Glibc
import LauncherProtocol

/// Where the relay puts the app's output (docs/app-output.md): the log folder, the log's
/// name and bound, and optionally the journal.
struct OutputSettings {
    /// The read end of the pipe the app writes as its stdout and stderr.
    var readFD: Int32
    /// `logs/<app>/`, opened by the daemon: files are made and renamed only relative to it.
    var logDirectoryFD: Int32
    var logName: String
    var logMaxBytes: Int
    /// A datagram socket connected to journald's native socket, or -1.
    var journalFD: Int32 = -1
    /// `KEY=VALUE` fields added to every journal entry.
    var journalFields: [String] = []
}

/// The output relay: a child of the outer launcher, forked after it joined the instance's
/// cgroups and before it unshares, so it sees the host's log folder and journal (through the
/// fds it was given) and nothing of the sandbox, and it lives as long as the app's output does,
/// whatever happens to the daemon. It is the only writer of the log: the app holds only a pipe.
///
/// Memory is bounded by one read (64 KiB) and one unfinished line (16 KiB); a line longer than
/// that is cut. The log rotates by rename on a line (or piece) boundary, so no line is lost and
/// `NAME` + `NAME.1` never hold more than twice `logMaxBytes`. The journal is best effort: a
/// journal that does not take a line within 250 ms makes the relay drop lines (counted, and
/// said in one entry once it takes lines again) rather than stall the app.
///
/// Beside each log file the relay keeps its time index `NAME.idx` (`NAME.1.idx` after a
/// rotation): 16-byte records (offset in the log, when the relay read the bytes from there on),
/// one per read that brought lines, at most one per millisecond. The log stays the app's bytes;
/// `appctl logs --timestamps/--since` read the times from the index. A file and its index share
/// the log's bound: when the next line and its record would take them past `logMaxBytes`
/// together, the log rotates, so an app writing 1-byte lines gets a shorter history, never more
/// disk.
struct OutputRelay {
    static let readSize = 64 << 10
    static let maxLine = 16 << 10
    static let journalWaitMilliseconds: Int32 = 250
    /// A time record: the offset (u64) and the time in microseconds since the epoch (i64),
    /// both little-endian (LauncherProtocol's `LogIndexLayout`, which the daemon reads with).
    static let recordSize = LogIndexLayout.recordSize
    /// Reads closer together than this share a record.
    static let recordSpacingMicroseconds: Int64 = 1000

    let settings: OutputSettings
    /// The outer launcher's pid: the one the daemon records for the instance.
    let launcherPID: pid_t
    private var logFD: Int32 = -1
    private var logSize = 0
    /// The current file's time index, its size, and the time of its last record (nil: none yet).
    private var indexFD: Int32 = -1
    private var indexSize = 0
    private var lastRecordTime: Int64?
    /// When the relay read the lines it is writing now (microseconds since the epoch).
    private var batchTime: Int64 = 0
    /// Below 4 records' worth of bound there is no index (times unknown).
    private let indexing: Bool
    /// Pieces longer than this are cut: at most `maxLine`, and never more than the log's bound.
    private let pieceLimit: Int
    /// Lines the journal did not take since it last took one.
    private var dropped = 0
    private var commonFields: [UInt8] = []

    init(settings: OutputSettings, launcherPID: pid_t) {
        self.settings = settings
        self.launcherPID = launcherPID
        indexing = settings.logMaxBytes >= 4 * Self.recordSize
        // A piece, the index's header and one record fit in a fresh file.
        pieceLimit = max(
            1,
            min(
                Self.maxLine,
                settings.logMaxBytes - (indexing ? LogIndexLayout.headerSize + Self.recordSize : 0))
        )
        var common = ""
        for field in settings.journalFields { common += field + "\n" }
        common += "PRIORITY=6\nAPPD_PID=\(launcherPID)\nSYSLOG_PID=\(launcherPID)\n"
        commonFields = Array(common.utf8)
    }

    /// Forks the relay into its leaf (`cgroups`: the `relay-cgroup` records' `cgroup.procs`
    /// files). In the parent returns its pid; the child never returns. Nothing is moved: the
    /// relay is born in its cgroup v2 directory (clone3 CLONE_INTO_CGROUP) and joins each v1
    /// hierarchy itself, writing 0 to `tasks` (a thread moving itself takes no lock over every
    /// thread group; a pid written to `cgroup.procs` does, and waits for an RCU grace period,
    /// 10-20 ms here). Only a kernel without CLONE_INTO_CGROUP gets the move by pid, as before.
    static func start(_ settings: OutputSettings, cgroups: [String], lastCapability: Int32)
        throws -> pid_t
    {
        let launcherPID = getpid()
        var birth: Int32 = -1
        var unified = ""
        var hierarchies: [String] = []
        for path in cgroups {
            let directory = String(path.dropLast("/cgroup.procs".count))
            if path.hasSuffix("/cgroup.procs"), access(directory + "/tasks", W_OK) == 0 {
                hierarchies.append(directory + "/tasks")
            } else if birth < 0, path.hasSuffix("/cgroup.procs") {
                birth = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                unified = path
                try sys(birth, "cgroup", "cannot open \(directory)")
            } else {
                hierarchies.append(path)
            }
        }
        var pid = birth >= 0 ? appd_fork_into_cgroup(birth) : fork()
        var moved = false
        if pid < 0 && birth >= 0 && (errno == ENOSYS || errno == EINVAL) {
            pid = fork()
            moved = true
        }
        if birth >= 0 && pid != 0 { close(birth) }
        try sys(pid, "output", "cannot fork the output relay")
        if pid != 0 {
            if moved {
                try Namespaces.move(pid, into: [unified], "cannot move the output relay into")
            }
            return pid
        }
        if birth >= 0 { close(birth) }
        for path in hierarchies where !Self.join(path) {
            FileIO.writeAll(2, "appd-exec: cgroup: the output relay cannot join \(path)\n")
            _exit(127)
        }
        var relay = OutputRelay(settings: settings, launcherPID: launcherPID)
        relay.run(lastCapability: lastCapability)
    }

    /// Writes 0 (this thread) to a v1 `tasks` file, or this pid to another procs file.
    private static func join(_ path: String) -> Bool {
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return FileIO.writeAll(fd, path.hasSuffix("/tasks") ? "0" : "\(getpid())\n")
    }

    private mutating func run(lastCapability: Int32) -> Never {
        // The relay holds none of the write end (or EOF would never come) and nothing else the
        // launcher had: the channel, the status fd.
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        if null >= 0 {
            for fd: Int32 in 0...2 { dup2(null, fd) }
            if null > 2 { close(null) }
        }
        Self.closeAll(but: settings.readFD, settings.logDirectoryFD, settings.journalFD)
        // The relay waits on nothing the app can hold. The app holds the pipe's other end, so
        // it can flock the pipe and could read from it were it to reopen it: the relay locks a
        // memfd of its own instead, which only the daemon takes (shared, never waiting), and
        // reads without blocking (a read that finds nothing goes back to poll).
        let lock = appd_memfd(APPD_OUTPUT_LOCK_NAME)
        let flags = fcntl(settings.readFD, F_GETFL)
        if flags >= 0 { _ = fcntl(settings.readFD, F_SETFL, flags | O_NONBLOCK) }
        // Not zero-filled: a fresh mapping that only the pages a read reaches ever touch (a
        // zero-filled array faulted in all 80 KiB right after the fork, for every launch).
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: Self.readSize + Self.maxLine)
        // Everything it opens from here on is in its log folder (Helpers). A relay that cannot
        // give up its privileges writes nothing: the app's writes then fail with EPIPE.
        guard
            Helpers.confineRelay(
                logDirectory: settings.logDirectoryFD, lastCapability: lastCapability)
        else { _exit(127) }
        var filled = 0
        while true {
            // Wait for output unlocked, then hold the lock from the read until the bytes are in
            // the log: the daemon, once the pipe is empty, takes the lock shared before it reads
            // the log, so output written before a request is in the answer
            // (InstanceLogs.settle). Without the memfd (no memory for it) there is no lock, and
            // a request may miss the bytes being written; the output itself is not affected.
            var poller = pollfd(fd: settings.readFD, events: Int16(POLLIN), revents: 0)
            if poll(&poller, 1, -1) < 0 {
                if errno == EINTR { continue }
                break
            }
            if lock >= 0 { while flock(lock, LOCK_EX) != 0 && errno == EINTR {} }
            defer { if lock >= 0 { _ = flock(lock, LOCK_UN) } }
            let count = read(settings.readFD, buffer + filled, Self.readSize)
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                break
            }
            if count == 0 { break }
            filled += count
            batchTime = Self.now()
            var start = 0
            while start < filled {
                let end = min(filled, start + pieceLimit)
                let newline = memchr(buffer + start, 0x0A, end - start).map {
                    UnsafeRawPointer(buffer).distance(to: UnsafeRawPointer($0))
                }
                if let newline {
                    emit(buffer, start, newline + 1, hasNewline: true)
                    start = newline + 1
                } else if end - start == pieceLimit {
                    emit(buffer, start, end, hasNewline: false)
                    start = end
                } else {
                    break
                }
            }
            // The unfinished line (shorter than a piece) moves to the front for the next read.
            if start > 0 {
                let rest = filled - start
                if rest > 0 { memmove(buffer, buffer + start, rest) }
                filled = rest
            }
        }
        // A last line without a newline is written as it is.
        if filled > 0 { emit(buffer, 0, filled, hasNewline: false) }
        if logFD >= 0 { close(logFD) }
        if indexFD >= 0 { close(indexFD) }
        _exit(0)
    }

    /// One line (with its newline) or piece: to the log, then to the journal.
    private mutating func emit(
        _ buffer: UnsafeMutablePointer<UInt8>, _ start: Int, _ end: Int, hasNewline: Bool
    ) {
        writeLog(buffer, start, end)
        guard settings.journalFD >= 0 else { return }
        sendJournal(
            UnsafeRawBufferPointer(
                start: buffer + start, count: (hasNewline ? end - 1 : end) - start))
    }

    // MARK: The log

    private mutating func writeLog(_ buffer: UnsafeMutablePointer<UInt8>, _ start: Int, _ end: Int)
    {
        let length = end - start
        if logFD < 0 { openLog() }
        if logFD >= 0, logSize > 0,
            logSize + indexSize + length + recordCost() > settings.logMaxBytes
        {
            rotate()
        }
        guard logFD >= 0 else { return }
        // The record goes first: a reader that sees the bytes finds their time.
        if recordCost() > 0 { writeRecord() }
        var offset = start
        while offset < end {
            let written = write(logFD, buffer + offset, end - offset)
            if written < 0 && errno == EINTR { continue }
            // A full disk: the line is lost from the log (the journal may still get it).
            guard written > 0 else { return }
            offset += written
            logSize += written
        }
    }

    private mutating func openLog() {
        logFD = openat(
            settings.logDirectoryFD, settings.logName,
            O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0o600)
        guard logFD >= 0 else { return }
        var info = stat()
        guard fstat(logFD, &info) == 0 else {
            logSize = 0
            return
        }
        logSize = Int(info.st_size)
        openIndex(logInode: UInt64(info.st_ino))
    }

    // MARK: The time index

    /// The bytes the next write adds to the index: a record when this read has none yet in
    /// this file and the last one is at least a millisecond older.
    private func recordCost() -> Int {
        guard indexing, indexFD >= 0 else { return 0 }
        if let lastRecordTime, batchTime - lastRecordTime < Self.recordSpacingMicroseconds {
            return 0
        }
        return Self.recordSize
    }

    /// Opens `NAME.idx` and, when it is new, writes its header: `APPDIDX1` and the log file's
    /// inode, which a reader checks so that it never pairs a log with another file's index
    /// across a rotation.
    private mutating func openIndex(logInode: UInt64) {
        guard indexing else { return }
        if indexFD >= 0 { close(indexFD) }
        indexFD = openat(
            settings.logDirectoryFD, LogIndexLayout.indexName(ofLog: settings.logName),
            O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0o600)
        lastRecordTime = nil
        indexSize = 0
        guard indexFD >= 0 else { return }
        var info = stat()
        indexSize = fstat(indexFD, &info) == 0 ? Int(info.st_size) : 0
        // An index left from another file (a rename that failed) or a torn record (a relay
        // started again on an existing file; never today) starts over rather than mislead.
        var header: (UInt64, UInt64) = (0, 0)
        let headerRead = withUnsafeMutableBytes(of: &header) {
            pread(indexFD, $0.baseAddress, LogIndexLayout.headerSize, 0)
        }
        if indexSize % Self.recordSize != 0
            || (indexSize > 0
                && (headerRead != LogIndexLayout.headerSize
                    || UInt64(littleEndian: header.0) != LogIndexLayout.magic
                    || UInt64(littleEndian: header.1) != logInode))
        {
            _ = ftruncate(indexFD, 0)
            indexSize = 0
        }
        if indexSize == 0 {
            guard append(LogIndexLayout.magic, logInode) else {
                close(indexFD)
                indexFD = -1
                return
            }
        }
    }

    private mutating func writeRecord() {
        guard append(UInt64(logSize), UInt64(bitPattern: batchTime)) else { return }
        lastRecordTime = batchTime
    }

    /// Two little-endian u64s as one write.
    private mutating func append(_ first: UInt64, _ second: UInt64) -> Bool {
        var record = LogIndexLayout.entry(first, second)
        let written = withUnsafeBytes(of: &record) { write(indexFD, $0.baseAddress, $0.count) }
        // A record is one write of 16 bytes to a file opened O_APPEND: all or (disk full)
        // nothing; without it the lines take the previous record's time.
        guard written == Self.recordSize else {
            if written > 0 { _ = ftruncate(indexFD, off_t(indexSize)) }
            return false
        }
        indexSize += written
        return true
    }

    /// Microseconds since the epoch (CLOCK_REALTIME: the times are shown as dates).
    static func now() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1_000_000 + Int64(spec.tv_nsec) / 1000
    }

    /// `NAME` becomes `NAME.1` (replacing the old one) and a new `NAME` starts: a reader that
    /// holds the old file reads it to its end, then reopens by name.
    /// The index moves first: a reader pairs `NAME` with `NAME.idx` and checks that the
    /// records fit the file (docs/app-output.md).
    private mutating func rotate() {
        close(logFD)
        logFD = -1
        if indexFD >= 0 {
            close(indexFD)
            indexFD = -1
            _ = renameat(
                settings.logDirectoryFD, LogIndexLayout.indexName(ofLog: settings.logName),
                settings.logDirectoryFD,
                LogIndexLayout.indexName(ofLog: LogIndexLayout.rotatedName(ofLog: settings.logName))
            )
        }
        _ = renameat(
            settings.logDirectoryFD, settings.logName, settings.logDirectoryFD,
            LogIndexLayout.rotatedName(ofLog: settings.logName))
        openLog()
        if logSize > 0 {
            // The rename failed: rather than grow past the bound, start the log again.
            _ = ftruncate(logFD, 0)
            logSize = 0
        }
    }

    // MARK: The journal

    private mutating func sendJournal(_ line: UnsafeRawBufferPointer) {
        if dropped > 0 {
            // The journal fell behind: one try without waiting, first to say what was lost.
            let notice =
                "appd: \(dropped) lines were not forwarded to the journal (journald too slow); the log has them all"
            let sent = Array(notice.utf8).withUnsafeBytes { send($0, wait: false) }
            guard sent else {
                dropped += 1
                return
            }
            dropped = 0
        }
        if !send(line, wait: true) { dropped += 1 }
    }

    /// One native-protocol datagram: `MESSAGE=...\n` and the common fields. False when the
    /// journal had no room in time (the line counts as dropped); a journal that is gone
    /// (ECONNREFUSED) takes nothing, and that is not counted.
    private func send(_ message: UnsafeRawBufferPointer, wait: Bool) -> Bool {
        var datagram = Array("MESSAGE=".utf8)
        datagram.reserveCapacity(message.count + commonFields.count + 16)
        datagram += message
        datagram.append(UInt8(ascii: "\n"))
        datagram += commonFields
        var waited: Int32 = 0
        while true {
            let sent = datagram.withUnsafeBytes {
                Glibc.send(
                    settings.journalFD, $0.baseAddress, $0.count,
                    Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL))
            }
            if sent >= 0 { return true }
            if errno == EINTR { continue }
            guard errno == EAGAIN || errno == EWOULDBLOCK else { return true }
            guard wait, waited < Self.journalWaitMilliseconds else { return false }
            // A connected datagram socket polls writable when the receiver's queue has room.
            var poller = pollfd(fd: settings.journalFD, events: Int16(POLLOUT), revents: 0)
            let step: Int32 = 25
            _ = poll(&poller, 1, step)
            waited += step
        }
    }

    /// Closes every fd but `a`, `b` and `c` (-1: none) from 3 up. Three values sorted by hand,
    /// not an [Int32]: the relay is a fresh fork, and an array type the launcher had not used
    /// yet was a runtime metadata lookup in it on every launch.
    private static func closeAll(but a: Int32, _ b: Int32, _ c: Int32) {
        var (low, middle, high) = (a, b, c)
        if low > middle { swap(&low, &middle) }
        if middle > high { swap(&middle, &high) }
        if low > middle { swap(&low, &middle) }
        var first: UInt32 = 3
        func keep(_ fd: Int32) {
            guard fd >= 3 else { return }
            let mine = UInt32(fd)
            if mine > first { _ = appd_close_range(first, mine - 1) }
            first = max(first, mine + 1)
        }
        keep(low)
        keep(middle)
        keep(high)
        _ = appd_close_range(first, UInt32.max)
    }
}
