import AppBundle
import AppdConfig
import Foundation
import LauncherProtocol
import Testing

@testable import Sandbox

/// The profile's records, declared once in LauncherProtocol (`ProfileRecord.shape`): what the
/// daemon's encoder writes is what it wrote before the declaration, every record kind reads
/// back through the reader the launcher uses, and a record that does not fit is refused.
@Suite("profile records: one declaration for the encoder and the parser")
struct ProfileRecordTests {
    /// A profile holding every record kind and every mount kind, with fields the encoding
    /// escapes. Every encoded field is set here, so the policy's output does not matter.
    static func fullProfile() throws -> SandboxProfile {
        let subject = SandboxSubject(
            bundleID: "com.example.full", name: "Full", bundleContainer: "/b",
            bundlePath: "/b/Full.app", executable: "/b/Full.app/Full", dataContainer: "/d",
            uid: 70000, gid: 70000,
            entitlements: Entitlements(values: ["com.apple.security.app-sandbox": .bool(true)]))
        var profile = try SandboxPolicy(
            settings: SandboxSettings(), kernel: KernelLayers(landlockABI: 4, seccomp: true)
        )
        .profile(for: subject, arguments: [])
        profile.cgroupProcs = ["/sys/fs/cgroup/appd/full/1/cgroup.procs", "/sys/fs/cgroup/x y"]
        profile.relayCgroupProcs = ["/sys/fs/cgroup/appd/full/relay/cgroup.procs"]
        profile.namespaces = [.user, .mount, .pid, .net, .ipc, .uts, .cgroup]
        profile.hostname = "full host"
        profile.loopback = true
        profile.imageRoot = .init(source: "/var/lib/image root", readOnly: false, owned: true)
        profile.mounts = [
            .roBind("/usr"), .roBind("/opt/maybe", optional: true), .rwBind("/d"),
            .rwBindExec("/vol"), .devBind("/dev/null"), .tmpfs("/tmp", mode: 0o1777),
            .at("/proc", .proc), .at("/dev", .dev), .symlink("/proc/self/fd", at: "/dev/fd"),
            .dir("/run/app", mode: 0o700),
            .file("/etc/hosts", mode: 0o644, content: "127.0.0.1 a\n"),
            .fs("sysfs", source: "sysfs", at: "/sys", options: "ro,nosuid"),
            .at("/proc/kcore", .mask), .at("/proc/sys", .roPath),
            .node("/dev/x", type: "c", major: 10, minor: 666, mode: 0o640, uid: 7, gid: 8),
        ]
        profile.sysctls = [.init(name: "net.ipv4.ip_forward", value: "1")]
        profile.console = true
        profile.uid = 70000
        profile.gid = 70001
        profile.groups = [70002, 70003]
        profile.userNamespace = .init(hostUID: 100000, hostGID: 100000, count: 65536)
        var capabilities = SandboxProfile.CapabilitySets()
        capabilities.bounding = ["CAP_CHOWN", "CAP_KILL"]
        capabilities.effective = ["CAP_KILL"]
        capabilities.permitted = ["CAP_KILL"]
        profile.capabilities = capabilities
        profile.newPrivileges = true
        profile.rlimits = [
            .init(name: "nofile", soft: 1024, hard: 4096),
            .init(name: "core", soft: nil, hard: nil),
        ]
        var landlock = LandlockRules()
        landlock.minimumABI = 4
        landlock.paths = [.init(access: .rx, path: "/usr"), .init(access: .rw, path: "/d %")]
        landlock.restrictedTCP = [.bind, .connect]
        landlock.ports = [.init(action: .connect, port: 443)]
        landlock.scopes = [.abstractUnix, .signal]
        profile.landlock = landlock
        profile.seccomp.required = false
        profile.logDenials = true
        profile.refuseExecGain = true
        profile.memfdNoexec = true
        profile.workingDirectory = "/d/Documents"
        profile.environment = [.init(name: "HOME", value: "/d"), .init(name: "A", value: "b\tc")]
        profile.executable = "/b/Full.app/Full"
        profile.arguments = ["two words", "100%", "new\nline", "é€"]
        return profile
    }

    /// What `SandboxProfile.encoded()` wrote for `fullProfile()` before the records were
    /// declared once (captured from the encoder of 5e6f417).
    static let encodedBefore = #"""
        appd-profile 1
        cgroup /sys/fs/cgroup/appd/full/1/cgroup.procs
        cgroup /sys/fs/cgroup/x%20y
        relay-cgroup /sys/fs/cgroup/appd/full/relay/cgroup.procs
        unshare user mount pid net ipc uts cgroup
        hostname full%20host
        loopback
        root image /var/lib/image%20root rw owned
        mount ro-bind /usr /usr
        mount ro-bind-try /opt/maybe /opt/maybe
        mount rw-bind /d /d
        mount rw-bind-exec /vol /vol
        mount dev-bind /dev/null /dev/null
        mount tmpfs /tmp 1777
        mount proc /proc
        mount dev /dev
        mount symlink /proc/self/fd /dev/fd
        mount dir /run/app 700
        mount file /etc/hosts 644 127.0.0.1%20a%0A
        mount fs sysfs sysfs /sys ro,nosuid
        mount mask /proc/kcore
        mount ro-path /proc/sys
        mount node /dev/x 640 c:10:666:7:8
        sysctl net.ipv4.ip_forward 1
        console
        uid 70000
        gid 70001
        groups 70002 70003
        userns 100000 100000 65536
        capabilities bounding CAP_CHOWN CAP_KILL
        capabilities effective CAP_KILL
        capabilities permitted CAP_KILL
        capabilities inheritable
        capabilities ambient
        new-privileges
        rlimit nofile 1024 4096
        rlimit core unlimited unlimited
        landlock-min-abi 4
        landlock-fs rx /usr
        landlock-fs rw /d%20%25
        landlock-net-restrict bind
        landlock-net-restrict connect
        landlock-net connect 443
        landlock-scope abstract-unix
        landlock-scope signal
        seccomp optional
        log-denials
        mdwe
        memfd-noexec
        chdir /d/Documents
        env HOME=/d
        env A=b%09c
        exec /b/Full.app/Full
        arg two%20words
        arg 100%25
        arg new%0Aline
        arg é€

        """#

    @Test("the encoder writes the bytes it wrote before the records were declared once")
    func sameBytes() throws {
        #expect(try Self.fullProfile().encoded() == Self.encodedBefore)
    }

    @Test(
        "every record kind and mount kind the encoder writes reads back through the launcher's reader"
    )
    func roundTrip() throws {
        let lines = Self.encodedBefore.utf8.split(
            separator: ProfileField.newline, omittingEmptySubsequences: false)
        #expect(lines.first.map { String(decoding: $0, as: UTF8.self) } == ProfileFormat.header)
        #expect(lines.last?.isEmpty == true)
        var reader = ProfileRecordReader()
        var values: [String] = []
        var records: Set<ProfileRecord> = []
        var mounts: Set<String> = []
        for line in lines.dropFirst().dropLast() {
            let record = try reader.read(ArraySlice(line), into: &values)
            // The decoded fields, encoded again, are the line: nothing lost or added.
            #expect(ProfileField.record(record, values) == String(decoding: line, as: UTF8.self))
            records.insert(record)
            if record == .mount { mounts.insert(values[0]) }
        }
        #expect(records == Set(ProfileRecord.allCases))
        #expect(mounts == Set(ProfileMountKind.allCases.map(\.rawValue)))
        #expect(values == ["é€"])
    }

    @Test(
        "a record the declaration does not know, or with a field missing or extra, is refused",
        arguments: [
            ("frobnicate 1", "unknown record 'frobnicate'"),
            ("ui\u{7}d 1", "unknown record 'ui?d'"),
            ("uid", "'uid' takes 1 field(s)"),
            ("uid 1 2", "'uid' takes 1 field(s)"),
            ("loopback yes", "'loopback' takes 0 field(s)"),
            ("rlimit nofile 1", "'rlimit' takes 3 field(s)"),
            ("unshare", "'unshare' takes at least 1 field(s)"),
            ("root image /a rw owned x", "'root' takes at most 4 field(s)"),
            ("mount", "'mount' takes at least 1 field(s)"),
            ("mount teleport /a", "unknown mount kind 'teleport'"),
            ("mount ro-bind /a", "'mount ro-bind' takes 2 field(s)"),
            ("mount fs sysfs sysfs /sys", "'mount fs' takes 4 field(s)"),
            ("arg %4", "bad percent escape"),
        ])
    func refused(line: String, message: String) {
        var reader = ProfileRecordReader()
        var values: [String] = []
        #expect(throws: ProfileFieldError(message)) {
            try reader.read(ArraySlice(line.utf8), into: &values)
        }
    }

    @Test("a once-only record is refused the second time; a repeatable one is not")
    func once() throws {
        var reader = ProfileRecordReader()
        var values: [String] = []
        for line in ["uid 1", "arg a", "arg a", "mount proc /proc", "mount proc /proc"] {
            _ = try reader.read(ArraySlice(line.utf8), into: &values)
        }
        #expect(throws: ProfileFieldError("'uid' may appear only once")) {
            try reader.read(ArraySlice("uid 2".utf8), into: &values)
        }
        for kind in ProfileRecord.allCases {
            let shape = kind.shape
            #expect(shape.fields <= shape.upTo, "\(kind)")
        }
    }
}
