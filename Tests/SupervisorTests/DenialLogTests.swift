import AppdAPI
import AppdBase
import Foundation
import TestSupport
import Testing

@testable import Supervisor

/// The audit record parser and the denial log's bounds, without a kernel (docs/denials.md).
@Suite("the denial log: audit records and bounds")
struct DenialLogTests {
    /// Records as this kernel (6.18) sent them to the C probe.
    static let landlock =
        #"audit(1795478830.227:288): domain=1de9b03ad blockers=fs.write_file path="/dev/null" dev="devtmpfs" ino=3"#
    static let syscall =
        #"audit(1795478830.227:288): arch=c000003e syscall=257 success=no exit=-13 a0=ffffff9c a1=555e59af0cf8 a2=241 a3=1b6 items=0 ppid=24828 pid=24834 auid=4294967295 uid=0 gid=0 euid=0 suid=0 fsuid=0 egid=0 sgid=0 fsgid=0 tty=(none) ses=4294967295 comm="sh" exe="/usr/bin/dash" key=(null)"#
    static let seccomp =
        #"audit(1795478827.715:286): auid=4294967295 uid=0 gid=0 ses=4294967295 pid=24614 comm="mount" exe="/usr/bin/mount" sig=0 arch=c000003e syscall=165 compat=0 ip=0x7fdc504f4e5a code=0x50000"#

    @Test("real Landlock, SYSCALL and seccomp records parse into their fields")
    func realRecords() throws {
        let access = try #require(
            AuditRecord(type: AuditRecord.landlockAccess, text: Substring(Self.landlock)))
        #expect(access.serial == 288)
        #expect(access["domain"] == "1de9b03ad")
        #expect(access["blockers"] == "fs.write_file")
        #expect(access.string("path") == "/dev/null")
        let call = try #require(
            AuditRecord(type: AuditRecord.syscallType, text: Substring(Self.syscall)))
        #expect(call.integer("pid") == 24834)
        #expect(call.integer("syscall") == 257)
        #expect(call.string("key") == nil)
        let filter = try #require(
            AuditRecord(type: AuditRecord.seccompType, text: Substring(Self.seccomp)))
        #expect(filter.serial == 286)
        #expect(filter.integer("syscall") == 165)
        #expect(AuditReader.syscallName(165) == "mount")
        #expect(AuditReader.syscallName(257) == "openat")
        #expect(AuditReader.syscallName(99_999) == "syscall 99999")
    }

    @Test(
        "a path the kernel wrote in hex (it held a space or a control character) comes back decoded; a quoted one never is"
    )
    func hexPaths() throws {
        // "/tmp/a b\n" in hex, as audit_log_untrustedstring writes it.
        let hex =
            #"audit(1.2:3): domain=1 blockers=fs.make_reg path=2F746D702F6120620A dev="vda" ino=1"#
        let record = try #require(
            AuditRecord(type: AuditRecord.landlockAccess, text: Substring(hex)))
        // Shown by the one rule (Printable): the newline as \u{a}, and C1 and bidi
        // controls (here CSI and U+202E) the same way.
        #expect(record.string("path") == "/tmp/a b\\u{a}")
        let c1 = #"audit(1.2:3): path=2F746D702FC29BE280AE78 dev="vda""#
        #expect(
            AuditRecord(type: 1423, text: Substring(c1))?.string("path")
                == "/tmp/\\u{9b}\\u{202e}x")
        let quoted = #"audit(1.2:3): path="ABCD""#
        #expect(AuditRecord(type: 1423, text: Substring(quoted))?.string("path") == "ABCD")
    }

    @Test(
        "hostile text: truncated, unterminated quotes, huge values, thousands of fields, random bytes: bounded, never a trap"
    )
    func hostileText() {
        #expect(AuditRecord(type: 1423, text: "") == nil)
        #expect(AuditRecord(type: 1423, text: "audit(") == nil)
        #expect(AuditRecord(type: 1423, text: "audit(1.2:x): a=b") == nil)
        let open = AuditRecord(type: 1423, text: #"audit(1.2:3): path="/never/closed"#)
        #expect(open?.string("path") == "/never/closed")
        let huge = AuditRecord(
            type: 1423,
            text: Substring("audit(1.2:3): path=\"" + String(repeating: "a", count: 100_000) + "\"")
        )
        #expect(huge?["path"]?.utf8.count == AuditRecord.maximumValueBytes)
        let many = AuditRecord(
            type: 1423, text: Substring("audit(1.2:3):" + (0..<5000).map { " k\($0)=v" }.joined()))
        #expect(many?.fields.count == AuditRecord.maximumFields)
        for seed in 0..<300 {
            let bytes = randomBytes(1 + seed * 7, seed: UInt64(seed))
            let text = "audit(1.2:\(seed)): " + String(decoding: bytes, as: UTF8.self)
            _ = AuditRecord(type: 1423, text: Substring(text))?.string("path")
        }
    }

    @Test(
        "past the burst an instance gets only the refill; the rest is counted as dropped; the ring stays bounded; a repeat only counts"
    )
    func rateLimit() {
        var limits = DenialLog.Limits()
        limits.burst = 10
        limits.refillPerSecond = 2
        limits.ringSize = 8
        let log = DenialLog(hub: EventHub(), limits: limits)
        log.register(instance: "aaaaaaaaaaaa", app: "com.example.a", uid: 70000, cgroups: [])
        let start = Date()
        var kept = 0
        for index in 0..<1000 {
            if log.record(
                app: "com.example.a", instance: "aaaaaaaaaaaa", source: .landlock,
                what: "fs.make_reg",
                path: "/tmp/\(index)", now: start.addingTimeInterval(Double(index) / 1000)) != nil
            {
                kept += 1
            }
        }
        // 10 at once, then 2 a second over the 0.999 s: one more (at 0.5 s); the next is due at 1 s.
        #expect(kept == 11)
        let counts = log.counts(instance: "aaaaaaaaaaaa")
        #expect(counts?.total == 1000)
        #expect(counts?.dropped == 989)
        #expect(log.list(instance: "aaaaaaaaaaaa").denials.count == 8)
        #expect(log.list(app: "com.example.a").dropped == 989)
        // Another instance has a bucket of its own.
        #expect(
            log.record(
                app: "com.example.b", instance: "bbbbbbbbbbbb", source: .seccomp, what: "mount")
                != nil)
        // The same denial again, at once: counted on the kept one, no new entry.
        let repeated = log.record(
            app: "com.example.b", instance: "bbbbbbbbbbbb", source: .seccomp, what: "mount")
        #expect(repeated == nil)
        #expect(log.list(instance: "bbbbbbbbbbbb").denials.map(\.count) == [2])
        #expect(log.perAppCounts()["com.example.a"] == 1000)
    }

    @Test("an app's denials are one count and one listing whatever the case of its id")
    func appInAnyCase() {
        let log = DenialLog(hub: EventHub())
        log.register(instance: "aaaaaaaaaaaa", app: "com.Example.A", uid: 70001, cgroups: [])
        log.record(app: "com.Example.A", instance: "aaaaaaaaaaaa", source: .seccomp, what: "mount")
        // appd's own refusal before an instance, the app's id as a client typed it.
        log.record(app: "COM.EXAMPLE.A", instance: nil, source: .appd, what: "launch")
        log.record(app: "com.example.\u{212A}", instance: nil, source: .appd, what: "launch")
        #expect(log.perAppCounts()["com.example.a"] == 2)
        #expect(log.perAppCounts().count == 2)
        #expect(log.list(app: "com.example.a").denials.map(\.what) == ["mount", "launch"])
        #expect(log.list(app: "com.example.k").denials.isEmpty)
    }

    @Test("a process of no instance is not ours; one of an app's uid is its only live instance's")
    func resolve() {
        let log = DenialLog(hub: EventHub())
        log.register(
            instance: "cccccccccccc", app: "com.example.c", uid: 70001,
            cgroups: ["/sys/fs/cgroup/x/cccccccccccc"])
        #expect(log.resolve(pid: nil, uid: 0, domain: nil) == nil)
        #expect(log.resolve(pid: getpid(), uid: 12345, domain: nil) == nil)
        let owner = log.resolve(pid: nil, uid: 70001, domain: "1de9b03ad")
        #expect(owner?.instance == "cccccccccccc")
        // Two live instances of one app: the uid alone cannot tell, the domain seen can.
        log.register(instance: "dddddddddddd", app: "com.example.c", uid: 70001, cgroups: [])
        #expect(log.resolve(pid: nil, uid: 70001, domain: nil) == nil)
        #expect(log.resolve(pid: nil, uid: 70001, domain: "1de9b03ad")?.instance == "cccccccccccc")
        // One just ended, one live: the live one (the ended one's records came while it ran).
        log.ended(instance: "dddddddddddd")
        #expect(log.resolve(pid: nil, uid: 70001, domain: nil)?.instance == "cccccccccccc")
        log.ended(instance: "cccccccccccc")
        log.register(instance: "eeeeeeeeeeee", app: "com.example.e", uid: 70002, cgroups: [])
        log.ended(instance: "eeeeeeeeeeee")
        // Only ended ones: the one of that uid that just ended.
        #expect(log.resolve(pid: nil, uid: 70002, domain: nil)?.instance == "eeeeeeeeeeee")
        #expect(log.resolve(pid: nil, uid: 70001, domain: nil) == nil)
    }

    @Test(
        "an audit session names the instance; another session is never ours, whatever the uid; sessionless records skip instances that have one"
    )
    func sessions() {
        let log = DenialLog(hub: EventHub())
        log.register(instance: "ffffffffffff", app: "com.example.f", uid: 70003, cgroups: [])
        // The launcher's AUDIT_LOGIN may come before the launch returns its pid.
        log.noteLogin(pid: 999_999, session: 4242)
        log.setCgroups(instance: "ffffffffffff", cgroups: [], launcherPid: 999_999)
        #expect(
            log.resolve(pid: nil, uid: 70003, domain: nil, session: 4242)?.instance
                == "ffffffffffff")
        #expect(log.resolve(pid: nil, uid: 70003, domain: nil, session: 4243) == nil)
        #expect(log.resolve(pid: nil, uid: 70003, domain: nil, session: DenialLog.noSession) == nil)
        // Without a session of its own, the uid still tells.
        log.register(instance: "000000000001", app: "com.example.g", uid: 70004, cgroups: [])
        #expect(
            log.resolve(pid: nil, uid: 70004, domain: nil, session: DenialLog.noSession)?.instance
                == "000000000001")
    }

    @Test(
        "at most maximumKept denials in all: an ended instance's go first, then the biggest ring's oldest"
    )
    func globalCap() {
        var limits = DenialLog.Limits()
        limits.maximumKept = 50
        limits.ringSize = 40
        limits.burst = 1000
        let log = DenialLog(hub: EventHub(), limits: limits)
        for (id, uid) in [("111111111111", UInt32(1)), ("222222222222", 2), ("333333333333", 3)] {
            log.register(instance: id, app: AppID("com.example.g\(uid)"), uid: uid, cgroups: [])
        }
        for index in 0..<20 {
            log.record(
                app: "com.example.g1", instance: "111111111111", source: .seccomp, what: "s\(index)"
            )
        }
        log.ended(instance: "111111111111")
        for index in 0..<20 {
            log.record(
                app: "com.example.g2", instance: "222222222222", source: .seccomp, what: "s\(index)"
            )
        }
        for index in 0..<40 {
            log.record(
                app: "com.example.g3", instance: "333333333333", source: .seccomp, what: "s\(index)"
            )
        }
        #expect(log.list().denials.count == 50)
        // The ended instance gave up all of its 20, then the flooding one its oldest 0.
        #expect(log.list(instance: "111111111111").denials.isEmpty)
        #expect(log.list(instance: "222222222222").denials.count == 20)
        #expect(log.list(instance: "333333333333").denials.count == 30)
        #expect(log.list(instance: "333333333333").denials.first?.what == "s10")
        // Counts are kept whatever the list lost.
        #expect(log.counts(instance: "111111111111")?.total == 20)
    }

    @Test("at most maximumTracked instances: the oldest ended ones are forgotten first")
    func tracked() {
        var limits = DenialLog.Limits()
        limits.maximumTracked = 10
        let log = DenialLog(hub: EventHub(), limits: limits)
        for index in 0..<100 {
            let id = String(format: "%012x", index)
            log.register(instance: id, app: "com.example.t", uid: 1, cgroups: [])
            log.record(app: "com.example.t", instance: id, source: .seccomp, what: "mount")
            log.ended(instance: id)
        }
        #expect(log.list().denials.count <= 11)
        #expect(log.counts(instance: String(format: "%012x", 99)) != nil)
        #expect(log.counts(instance: String(format: "%012x", 0)) == nil)
    }

    @Test("past maximumTracked, the oldest ended ones go down to an eighth below it, at once")
    func evictedInBatches() {
        var limits = DenialLog.Limits()
        limits.maximumTracked = 16
        let log = DenialLog(hub: EventHub(), limits: limits)
        let ids = (0..<17).map { String(format: "%012x", $0) }
        for id in ids {
            log.register(instance: id, app: "com.example.t", uid: 1, cgroups: [])
            log.ended(instance: id)
            usleep(100)  // each its own lastUsed
        }
        // The 17th made 17 > 16: the 3 oldest went, 14 are left, the newest among them.
        let left = ids.filter { log.counts(instance: $0) != nil }
        #expect(left == Array(ids.suffix(14)))
    }
}
