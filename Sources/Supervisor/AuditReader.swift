import CLinux
import Foundation
import Glibc
import Sandbox
import Synchronization

/// Reads the kernel's audit records from the read-only multicast group (AUDIT_NLGRP_READLOG)
/// on a thread of its own and turns the Landlock and seccomp denials of appd's instances into
/// `DenialLog` entries (docs/denials.md). Records of processes that are no instance's (another
/// sandbox on the host) are ignored. auditd and journald keep receiving everything: a
/// multicast reader takes nothing from them.
final class AuditReader: Sendable {
    let log: DenialLog
    private let stopped = Mutex(false)
    private let started = Mutex(false)
    private let done = DispatchSemaphore(value: 0)

    init(log: DenialLog) { self.log = log }

    /// Opens the socket and starts the thread; on failure the log says why the kernel's
    /// denials cannot be reported, and only appd's own refusals are.
    func start(enabled: Bool = true) {
        guard
            started.withLock({ started in
                defer { started = true }
                return !started
            })
        else { return }
        guard enabled else {
            log.setKernelStatus(
                reports: false,
                reason:
                    "[Supervisor] DenialLog=no: the kernel's Landlock and seccomp denials are not asked for"
                    + " nor read (audit is left as it is), only appd's own refusals are logged")
            done.signal()
            return
        }
        let status = KernelDenialReporting.check(enableAudit: true)
        let fd = appd_audit_open_readlog(1 << 20, 500)
        guard fd >= 0 else {
            let error = errno
            log.setKernelStatus(
                reports: false,
                reason:
                    "cannot read the kernel's audit records (\(String(cString: strerror(error))));"
                    + " hint: appd needs CAP_AUDIT_READ and a kernel with CONFIG_AUDIT")
            done.signal()
            return
        }
        log.setKernelStatus(reports: status.problems.isEmpty, reason: status.problems.first)
        let thread = Thread { [self] in
            run(fd)
            close(fd)
            done.signal()
        }
        thread.name = "appd.audit"
        thread.start()
    }

    /// Returns once the thread is gone (within the socket's 0.5 s receive timeout).
    func stop() {
        guard started.withLock({ $0 }),
            !stopped.withLock({ stopped in
                defer { stopped = true }
                return stopped
            })
        else { return }
        done.wait()
    }

    /// The records of one audit event seen so far: Landlock's come before the SYSCALL record
    /// that says which process; EOE closes the event.
    struct Pending {
        var accesses: [AuditRecord] = []
        var pid: Int32?
        var uid: UInt32?
        var session: UInt32?
        var syscall: String?
    }

    private func run(_ fd: Int32) {
        var buffer = [CChar](repeating: 0, count: 9000)
        var pending: [UInt64: Pending] = [:]
        var order: [UInt64] = []
        while !stopped.withLock({ $0 }) {
            var type: UInt16 = 0
            let count = buffer.withUnsafeMutableBufferPointer {
                appd_audit_receive(fd, &type, $0.baseAddress, Int32($0.count))
            }
            if count < 0 {
                let error = errno
                if error == ENOBUFS { log.noteOverrun() }
                if error == EAGAIN || error == EINTR || error == ENOBUFS {
                    // A quiet moment: events without an EOE (no syscall context) are complete.
                    if error == EAGAIN { flushAll(&pending, &order) }
                    continue
                }
                log.setKernelStatus(
                    reports: false,
                    reason: "the audit socket failed: \(String(cString: strerror(error)))")
                return
            }
            let text = buffer.withUnsafeBufferPointer { raw in
                String(
                    decoding: UnsafeRawBufferPointer(start: raw.baseAddress, count: Int(count)),
                    as: UTF8.self)
            }
            guard let record = AuditRecord(type: type, text: Substring(text)) else { continue }
            switch record.type {
            case AuditRecord.seccompType:
                handleSeccomp(record)
            case AuditRecord.login:
                // A launcher starting the instance's audit session (appd-exec's AuditSession).
                if let pid = record.integer("pid").flatMap({ Int32(exactly: $0) }),
                    let session = record.integer("ses").flatMap({ UInt32(exactly: $0) })
                {
                    log.noteLogin(pid: pid, session: session)
                }
            case AuditRecord.landlockAccess:
                if pending[record.serial] == nil { order.append(record.serial) }
                if (pending[record.serial]?.accesses.count ?? 0) < 8 {
                    pending[record.serial, default: Pending()].accesses.append(record)
                }
            case AuditRecord.syscallType:
                guard pending[record.serial] != nil else { continue }
                pending[record.serial]?.pid = record.integer("pid").flatMap { Int32(exactly: $0) }
                pending[record.serial]?.uid = record.integer("uid").flatMap { UInt32(exactly: $0) }
                pending[record.serial]?.session = record.integer("ses").flatMap {
                    UInt32(exactly: $0)
                }
                pending[record.serial]?.syscall = record.integer("syscall").map(Self.syscallName)
            case AuditRecord.endOfEvent:
                if let event = pending.removeValue(forKey: record.serial) {
                    order.removeAll { $0 == record.serial }
                    handleLandlock(event)
                }
            default:
                break
            }
            // Events whose end never came: bounded, oldest handled first.
            while order.count > 32 {
                let serial = order.removeFirst()
                if let event = pending.removeValue(forKey: serial) { handleLandlock(event) }
            }
        }
    }

    private func flushAll(_ pending: inout [UInt64: Pending], _ order: inout [UInt64]) {
        for serial in order {
            if let event = pending.removeValue(forKey: serial) { handleLandlock(event) }
        }
        order.removeAll()
    }

    static func syscallName(_ number: Int) -> String {
        SeccompCompiler.syscallName(number) ?? "syscall \(number)"
    }

    private func handleSeccomp(_ record: AuditRecord) {
        guard let number = record.integer("syscall") else { return }
        let name = Self.syscallName(number)
        // clone3 is refused with ENOSYS so that glibc falls back to clone, which the filter
        // can inspect: every thread and fork asks it first. Not a denial of anything.
        if name == "clone3" { return }
        let pid = record.integer("pid").flatMap { Int32(exactly: $0) }
        let uid = record.integer("uid").flatMap { UInt32(exactly: $0) }
        let session = record.integer("ses").flatMap { UInt32(exactly: $0) }
        guard let owner = log.resolve(pid: pid, uid: uid, domain: nil, session: session) else {
            return
        }
        log.record(
            app: owner.app, instance: owner.instance, pid: pid, source: .seccomp, what: name,
            syscall: name,
            detail: record.string("comm").map { "by \($0)" })
    }

    private func handleLandlock(_ event: Pending) {
        for access in event.accesses {
            let domain = access["domain"]
            guard
                let owner = log.resolve(
                    pid: event.pid, uid: event.uid, domain: domain, session: event.session)
            else { continue }
            var details: [String] = []
            for key in [
                "opid", "ocomm", "laddr", "lport", "faddr", "fport", "saddr", "src", "daddr",
                "dest",
            ] {
                if let value = access.string(key) { details.append("\(key)=\(value)") }
            }
            log.record(
                app: owner.app, instance: owner.instance, pid: event.pid, source: .landlock,
                what: access["blockers"] ?? "?", syscall: event.syscall,
                path: access.string("path"),
                detail: details.isEmpty ? nil : details.joined(separator: " "))
        }
    }
}
