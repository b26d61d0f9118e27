import AppBundle
import Foundation
import Glibc
import LauncherProtocol
import Sandbox
import Supervisor
import TestSupport
import Testing

@testable import AppdConfig

/// The whole protocol between the two real sides: a profile the daemon's policy compiles,
/// encoded by `SandboxProfile.encoded()`, handed to the built appd-exec with the daemon's
/// options (`SandboxLaunch`), the app's output through the launcher's relay into a log and its
/// time index, and the launcher's status line read back.
@Suite("daemon profile through the built launcher", .serialized)
struct DaemonProfileTests {
    /// Arguments with every byte class the field encoding escapes.
    static let hostileArguments = ["two words", "100%", "tab\there", "new\nline", "é€"]

    /// An app bundle on disk (a shell script printing its arguments, then exiting 7) and its
    /// profile as the daemon compiles it.
    final class World {
        let path: String
        let cgroupParent: String

        init() throws {
            path = try makeTemporaryDirectory("/var/tmp/appd-contract-test.XXXXXX")
            cgroupParent = "/appd-tests/\(URL(fileURLWithPath: path).lastPathComponent)"
            chmod(path, 0o755)
            let bundle = "\(path)/Bundle/Echo.app"
            try FileManager.default.createDirectory(
                atPath: bundle, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(
                atPath: "\(path)/Data", withIntermediateDirectories: true)
            for directory in [path + "/Bundle", bundle] { chmod(directory, 0o755) }
            chmod("\(path)/Data", 0o777)
            try "#!/bin/sh\nprintf '[%s]\\n' \"$@\"\nexit 7\n".write(
                toFile: "\(bundle)/Echo", atomically: true, encoding: .utf8)
            chmod("\(bundle)/Echo", 0o755)
        }

        deinit {
            try? FileManager.default.removeItem(atPath: path)
            for base in DaemonProcess.cgroupHierarchies {
                DaemonProcess.removeCgroup("\(base)\(cgroupParent)")
                rmdir("\(base)/appd-tests")
            }
        }

        func profile(_ arguments: [String]) throws -> SandboxProfile {
            let subject = SandboxSubject(
                bundleID: "com.example.echo", name: "Echo", bundleContainer: "\(path)/Bundle",
                bundlePath: "\(path)/Bundle/Echo.app", executable: "\(path)/Bundle/Echo.app/Echo",
                dataContainer: "\(path)/Data", uid: 65534, gid: 65534,
                entitlements: Entitlements(values: ["com.apple.security.app-sandbox": .bool(true)]),
                // A shell script: the host's shell it runs is named, as its Info.plist would.
                hostExecutables: ["/bin/sh"])
            return try SandboxPolicy(settings: SandboxSettings(), kernel: .detect())
                .profile(for: subject, arguments: arguments)
        }
    }

    @Test(
        "the launcher accepts the daemon's profile and options, and its status and log index are read back",
        rootOnly)
    func wholeProtocol() throws {
        let world = try World()
        let profile = try world.profile(Self.hostileArguments)
        // Every record the daemon writes is one the protocol names.
        let lines = profile.encoded().split(separator: "\n")
        #expect(lines.first.map(String.init) == ProfileFormat.header)
        for line in lines.dropFirst() {
            let kind = String(line.prefix { $0 != " " })
            #expect(ProfileRecord(rawValue: kind) != nil, "\(line)")
        }

        let directory = open(world.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        #expect(directory >= 0)
        // Planned as the daemon and `appd run` plan it: the output relayed into a log.
        let launch = try SandboxLaunch(
            profile: profile, launcher: builtExecutable("appd-exec"),
            cgroups: CgroupSettings(parent: world.cgroupParent),
            output: .relay(LogDestination(folder: directory, name: "app.log", maxBytes: 1 << 20)))
        let before = Int64(Date().timeIntervalSince1970 * 1_000_000)
        let status = try launch.run()
        let after = Int64(Date().timeIntervalSince1970 * 1_000_000)

        #expect(status == .exited(7), "\(status)")
        let log = try String(contentsOfFile: "\(world.path)/app.log", encoding: .utf8)
        #expect(log == Self.hostileArguments.map { "[\($0)]\n" }.joined())
        let logFD = open("\(world.path)/app.log", O_RDONLY | O_CLOEXEC)
        defer { close(logFD) }
        let index = try #require(
            LogTimeIndex(
                forLog: logFD,
                candidates: ["\(world.path)/\(LogIndexLayout.indexName(ofLog: "app.log"))"]))
        let time = try #require(index.time(at: 0))
        #expect(time >= before && time <= after, "\(before) <= \(time) <= \(after)")
    }

    @Test(
        "a profile the launcher refuses comes back as the launcher's error, naming the line",
        rootOnly)
    func refusedProfile() throws {
        let world = try World()
        var profile = try world.profile([])
        profile.executable = "relative/Echo"
        let launch = SandboxLaunch(
            profile: profile, launcher: builtExecutable("appd-exec"),
            cgroups: CgroupSettings(parent: world.cgroupParent), limits: profile.cgroupLimits)
        let status = try launch.run()
        guard case .failedToLaunch(let message) = status else {
            Issue.record("expected a launch failure, got \(status)")
            return
        }
        #expect(message.hasPrefix("profile: line "), "\(message)")
        #expect(message.hasSuffix("path 'relative/Echo' is not absolute"), "\(message)")
    }
}

/// The one launch plan's output policies (`LaunchOutput`), without launching: what each sets,
/// and that a relay's fds are the launch's from the start, closed even when planning fails.
@Suite("a launch plan's output: inherited, a terminal, or relayed into a log")
struct LaunchOutputTests {
    static func isOpen(_ fd: Int32) -> Bool { fcntl(fd, F_GETFD) >= 0 }

    @Test("each policy places what it says; a relay makes its pipe and hands over four fds")
    func policies() throws {
        let world = try DaemonProfileTests.World()
        let profile = try world.profile([])
        let launcher = builtExecutable("appd-exec")
        let settings = CgroupSettings(parent: world.cgroupParent)
        let console = try SandboxLaunch(
            profile: profile, launcher: launcher, cgroups: settings,
            output: .inherited(keepStdin: true))
        #expect(console.keepStdin && console.output == nil && console.input == nil)
        #expect(console.relay == nil && console.handedOver.isEmpty)
        #expect(console.limits == profile.cgroupLimits)

        let terminal = try SandboxLaunch(
            profile: profile, launcher: launcher, cgroups: settings, output: .terminal(42))
        #expect(terminal.input == 42 && terminal.output == 42 && terminal.handedOver.isEmpty)

        let folder = open(world.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        let journal = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let relayed = try SandboxLaunch(
            profile: profile, launcher: launcher, cgroups: settings,
            output: .relay(
                LogDestination(
                    folder: folder, name: "i.log", maxBytes: Int64.max, journal: journal,
                    journalFields: ["APPD_APP=com.example.echo"])))
        let relay = try #require(relayed.relay)
        #expect(relay.logDirectoryFD == folder && relay.journalFD == journal)
        #expect(relay.logName == "i.log" && relay.journalFields == ["APPD_APP=com.example.echo"])
        #expect(relay.logMaxBytes == Int64(Int32.max), "the launcher's field is 32-bit")
        #expect(relayed.output != nil && relayed.output != relay.readFD)
        // The launch owns the pipe it made; the folder and the journal stay the caller's.
        #expect(Set(relayed.handedOver) == [relay.readFD, relayed.output!])
        #expect(relayed.handedOver.allSatisfy(Self.isOpen))
        for fd in relayed.handedOver + [folder, journal] { close(fd) }
    }

    @Test(
        "a plan that fails (no launcher where the configuration says) makes no pipe and leaves the caller's fds to it"
    )
    func failedPlan() throws {
        let world = try DaemonProfileTests.World()
        let profile = try world.profile([])
        let folder = open(world.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { close(folder) }
        #expect(throws: (any Error).self) {
            try SandboxLaunch(
                profile: profile, launcher: "\(world.path)/no-such-launcher",
                cgroups: CgroupSettings(parent: world.cgroupParent),
                output: .relay(LogDestination(folder: folder, name: "i.log", maxBytes: 1024)))
        }
        #expect(Self.isOpen(folder), "the plan closed the caller's log folder")
    }
}
