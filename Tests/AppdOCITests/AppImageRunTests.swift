import Foundation
import Glibc
import TestSupport
import Testing

/// `appd-oci run` of a signed app image, as an engine runs it: the bundle's files are checked
/// against its signature while the launcher builds the sandbox (docs/oci-runtime.md), so these
/// show that the app runs when they match and that nothing of a tampered one runs or stays.
@Suite("appd-oci run: a signed .app image, and tampered ones refused", .serialized, rootOnly)
struct AppImageRunTests {
    /// A signed Echo.app (the host's busybox named `echo`) in a bundle's rootfs, a `[Signer]`
    /// for its key in appd.conf, and this test's state root and node data.
    struct Image {
        let directory: String
        var rootfs: String { "\(directory)/bundle/rootfs" }
        var app: String { "\(rootfs)/Echo.app" }
        let id = "image-test-\(UUID().uuidString.prefix(8).lowercased())"

        /// `executable`: the busybox applet the bundle's executable is named after; `arguments`:
        /// the app's (process.args after the executable).
        /// `program`: the executable's bytes instead of busybox. `base`: where the test's
        /// folder goes (its state root and data container with it). `entitlements`: more
        /// keys of Entitlements.plist (plist XML).
        init(
            executable: String = "echo", arguments: [String] = ["hello from the app"],
            program: [UInt8]? = nil, info: String = "", entitlements: String = "",
            base: URL = FileManager.default.temporaryDirectory
        ) throws {
            directory = base.appendingPathComponent("appd-oci-image-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(
                atPath: app, withIntermediateDirectories: true)
            chmod(directory, 0o755)
            if let program {
                try place(program, at: "\(app)/\(executable)", mode: 0o755)
            } else {
                try copy("/usr/bin/busybox", to: "\(app)/\(executable)", mode: 0o755)
            }
            let plist =
                #"<?xml version="1.0" encoding="UTF-8"?><plist version="1.0"><dict>"#
            try
                (plist + """
                    <key>CFBundleIdentifier</key><string>com.example.echo</string>\
                    <key>CFBundleExecutable</key><string>\(executable)</string>\
                    <key>CFBundleName</key><string>Echo</string>\
                    <key>CFBundleVersion</key><string>1</string>\
                    <key>CFBundlePackageType</key><string>APPL</string>\(info)</dict></plist>
                    """).write(toFile: "\(app)/Info.plist", atomically: true, encoding: .utf8)
            try
                (plist
                + "<key>com.apple.security.app-sandbox</key><true/>\(entitlements)</dict></plist>")
                .write(toFile: "\(app)/Entitlements.plist", atomically: true, encoding: .utf8)
            let keygen = try ChildProcess(
                "appd", ["keygen", "--out", directory, "--name", "test"], stdout: .discard,
                stderr: .capture
            ).finish()
            #expect(keygen.code == 0, "\(keygen.stderr)")
            try "[Signer test]\nKey=\(directory)/test.public-key\nBundleIDs=com.example.*\n"
                .write(toFile: "\(directory)/appd.conf", atomically: true, encoding: .utf8)
            let sign = try ChildProcess(
                "appd",
                [
                    "--config", "\(directory)/appd.conf", "sign", "--key",
                    "\(directory)/test.signing-key", app,
                ], stdout: .discard, stderr: .capture
            ).finish()
            #expect(sign.code == 0, "\(sign.stderr)")
            let args = (["/Echo.app/\(executable)"] + arguments).map { "\"\($0)\"" }
            let config = """
                {"ociVersion": "1.0.2", "root": {"path": "rootfs"},
                 "process": {"args": [\(args.joined(separator: ", "))], "cwd": "/"},
                 "linux": {"namespaces": [{"type": "pid"}, {"type": "network"}, {"type": "ipc"},
                  {"type": "uts"}, {"type": "mount"}]}}
                """
            try config.write(
                toFile: "\(directory)/bundle/config.json", atomically: true, encoding: .utf8)
        }

        /// Through an O_CLOEXEC descriptor (an executable written through one a parallel
        /// suite's child inherits fails its exec with ETXTBSY).
        func copy(_ source: String, to target: String, mode: mode_t) throws {
            try place(
                [UInt8](try Data(contentsOf: URL(fileURLWithPath: source))), at: target, mode: mode)
        }

        func place(_ bytes: [UInt8], at target: String, mode: mode_t) throws {
            let fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
            #expect(fd >= 0)
            defer { close(fd) }
            #expect(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count)
        }

        /// Rewrites `file` of the bundle (after signing) with `change` applied to its text.
        func edit(_ file: String, _ change: (String) -> String) throws {
            let path = "\(app)/\(file)"
            let text = try String(contentsOfFile: path, encoding: .isoLatin1)
            try change(text).write(toFile: path, atomically: true, encoding: .isoLatin1)
        }

        func run() throws -> (code: Int32, stdout: String, stderr: String) {
            try oci(["run", "--bundle", "\(directory)/bundle", id])
        }

        /// `appd-oci COMMAND...` with this image's state root, appd.conf and node data.
        /// `detached`: output to a file (a created container keeps appd-oci's stdout and
        /// stderr, as an engine wants; a pipe would not end).
        func oci(_ arguments: [String], detached: Bool = false) throws -> (
            code: Int32, stdout: String, stderr: String
        ) {
            let output = "\(directory)/output"
            try "".write(toFile: output, atomically: true, encoding: .utf8)
            let result = try ChildProcess(
                "appd-oci",
                ["--root", "\(directory)/state", "--config", "\(directory)/appd.conf"]
                    + arguments,
                environment: ["APPD_OCI_DATA": "\(directory)/data", "PATH": "/usr/bin:/bin"],
                stdout: detached ? .append(output) : .capture,
                stderr: detached ? .append(output) : .capture
            ).finish()
            guard detached else { return result }
            return (result.code, "", (try? String(contentsOfFile: output, encoding: .utf8)) ?? "")
        }

        /// What a refused create must not leave: its state, its cgroup, a process.
        func expectNothingLeft() {
            #expect(!FileManager.default.fileExists(atPath: "\(directory)/state/\(id)"))
            for hierarchy in ["unified", "memory", "pids", "cpuacct", "blkio", ""] {
                let path = "/sys/fs/cgroup/\(hierarchy)/appd-oci/\(id)"
                    .replacingOccurrences(of: "//", with: "/")
                #expect(!FileManager.default.fileExists(atPath: path), "\(path) left behind")
            }
        }

        /// The bundle ids the node has given a uid.
        var knownIDs: String {
            (try? String(contentsOfFile: "\(directory)/data/uids", encoding: .utf8)) ?? ""
        }

        func remove() { try? FileManager.default.removeItem(atPath: directory) }
    }

    @Test("a signed image runs: its output and exit status, nothing left after run")
    func signedRuns() throws {
        let image = try Image()
        defer { image.remove() }
        let result = try image.run()
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout == "hello from the app\n", "\(result.stdout)")
        image.expectNothingLeft()
    }

    @Test("a running app: in its cgroup in every hierarchy; exec confined by its seccomp program")
    func execConfined() throws {
        let image = try Image(executable: "sh", arguments: ["-c", "sleep 30"])
        defer {
            _ = try? image.oci(["delete", "--force", image.id])
            image.remove()
        }
        let created = try image.oci(
            ["create", "--bundle", "\(image.directory)/bundle", image.id], detached: true)
        #expect(created.code == 0, "\(created.stderr)")
        #expect(
            FileManager.default.fileExists(
                atPath: "\(image.directory)/state/\(image.id)/seccomp.bpf"))
        #expect(try image.oci(["start", image.id], detached: true).code == 0)
        // Every process of it (the launcher, PID 1, the app) in the container's cgroup in each
        // hierarchy appd limits with: the launcher was born in the v2 one and joined the v1
        // ones itself (docs/launcher-protocol.md, `cgroup`).
        let pids = try image.oci(["ps", image.id]).stdout.split(whereSeparator: \.isWhitespace)
            .compactMap { Int32($0) }
        #expect(pids.count >= 3, "appd-oci ps: \(pids)")
        for pid in pids {
            let lines =
                ((try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8)) ?? "")
                .split(separator: "\n")
            // cpuacct too (its own hierarchy on this host): the engines' CPU stats read it.
            let limited = lines.filter {
                $0.hasPrefix("0::") || $0.contains(":memory:") || $0.contains(":pids:")
                    || $0.contains(":cpuacct:")
            }
            #expect(!limited.isEmpty)
            for line in limited {
                #expect(line.hasSuffix("/appd-oci/\(image.id)"), "pid \(pid): \(line)")
            }
        }
        // unshare(2) is refused to every app (SandboxPolicy+Seccomp), the exec'd shell too;
        // on this host any unprivileged user may make a user namespace (`unshare -r`).
        let exec = try image.oci([
            "exec", image.id, "/Echo.app/sh", "-c",
            "echo in; unshare -r true 2>&1; echo rc=$?",
        ])
        #expect(exec.code == 0, "\(exec.stderr)")
        #expect(exec.stdout.hasPrefix("in\n"), "\(exec.stdout)")
        #expect(
            exec.stdout.contains("Operation not permitted") && exec.stdout.contains("rc=1"),
            "\(exec.stdout)")
    }

    @Test(
        "another machine's program, or one needing a library the node lacks: refused at create, before the node gives the id a uid"
    )
    func cannotRunHere() throws {
        let cases: [([UInt8], String)] = [
            (
                ELFBuilder.aarch64().bytes,
                "Echo.app cannot run on this host: echo: is built for arm64"
            ),
            (
                ELFBuilder.x8664(needed: ["libnothere.so.7", "libc.so.6"]).bytes,
                "echo: needs the library libnothere.so.7, found neither in the bundle nor on this host"
            ),
            // A script whose interpreter AppdHostExecutables does not name: it could not run.
            (
                Array("#!/bin/sh\necho hello\n".utf8),
                "Echo.app cannot run on this host: echo: runs through its interpreter /bin/sh (#!), which AppdHostExecutables in Info.plist does not name"
            ),
        ]
        for (program, expected) in cases {
            let image = try Image(program: program)
            defer { image.remove() }
            let result = try image.run()
            #expect(result.code != 0)
            #expect(result.stderr.contains(expected), "\(result.stderr)")
            #expect(!image.knownIDs.contains("com.example.echo"), "\(image.knownIDs)")
            image.expectNothingLeft()
        }
    }

    @Test(
        "the Hello sample as an image runs on a node without the Swift toolchain (its runtime in Frameworks/); the same app linked to the toolchain is refused at create there"
    )
    func helloWithoutToolchain() throws {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().path
        let image = try Image()
        defer { image.remove() }
        // An appd image holds one bundle: Hello.app as scripts/build-sample makes it.
        let built = try runTool(
            "/bin/bash",
            ["\(repository)/scripts/build-sample", "Hello", "\(image.directory)/built"])
        #expect(built.code == 0, "\(built.output)")
        let hello = "\(image.rootfs)/Hello.app"
        try FileManager.default.removeItem(atPath: image.app)
        try FileManager.default.copyItem(
            atPath: "\(image.directory)/built/Hello.app", toPath: hello)
        func sign() throws {
            let signed = try runTool(
                "appd",
                [
                    "--config", "\(image.directory)/appd.conf", "sign", "--key",
                    "\(image.directory)/test.signing-key", hello,
                ])
            #expect(signed.code == 0, "\(signed.output)")
        }
        // Its signer may grant what Hello asks: the network and /usr/bin/id.
        let config = "\(image.directory)/appd.conf"
        try
            (String(contentsOfFile: config, encoding: .utf8)
            + "Entitlements=com.apple.security.network.client\nHostExecutables=/usr/bin/id\n")
            .write(toFile: config, atomically: true, encoding: .utf8)
        try sign()

        // appd-oci as a node without /opt/swift runs it: the toolchain hidden beneath an empty
        // tmpfs in a private mount namespace, appd-oci's own runtime (a debug build links the
        // toolchain's) from a copy the app never sees.
        let hidden = try HiddenToolchain()
        defer { hidden.remove() }
        func run(_ executable: String, id: String) throws -> (
            code: Int32, stdout: String, stderr: String
        ) {
            try """
            {"ociVersion": "1.0.2", "root": {"path": "rootfs"},
             "process": {"args": ["\(executable)"], "cwd": "/"},
             "linux": {"namespaces": [{"type": "pid"}, {"type": "network"}, {"type": "ipc"},
              {"type": "uts"}, {"type": "mount"}]}}
            """.write(
                toFile: "\(image.directory)/bundle/config.json", atomically: true, encoding: .utf8)
            return try ChildProcess(
                hidden.wrapper[0],
                Array(hidden.wrapper.dropFirst()) + [
                    builtExecutable("appd-oci"),
                    "--root", "\(image.directory)/state", "--config",
                    "\(image.directory)/appd.conf",
                    "run", "--bundle", "\(image.directory)/bundle", id,
                ],
                environment: ["APPD_OCI_DATA": "\(image.directory)/data", "PATH": "/usr/bin:/bin"],
                stdout: .capture, stderr: .capture
            ).finish()
        }
        let result = try run("/Hello.app/Hello", id: image.id)
        #expect(result.code == 0, "\(result.stderr)")
        let greeting = try String(
            contentsOfFile: "\(repository)/Examples/Hello/greeting.txt", encoding: .utf8)
        #expect(
            result.stdout.contains(greeting.trimmingCharacters(in: .whitespacesAndNewlines)),
            "\(result.stdout)")
        #expect(result.stdout.contains("bundle id: com.example.hello"), "\(result.stdout)")

        // The same app as `swift build` links it, its runtime the toolchain's: refused there.
        try FileManager.default.removeItem(atPath: "\(hello)/Frameworks")
        try FileManager.default.removeItem(atPath: "\(hello)/Hello")
        try image.copy(builtExecutable("Hello"), to: "\(hello)/Hello", mode: 0o755)
        try sign()
        let refused = try run("/Hello.app/Hello", id: "\(image.id)-linked")
        #expect(refused.code != 0, "\(refused.stdout)")
        #expect(
            refused.stderr.contains("libswiftCore.so")
                && refused.stderr.contains("found neither in the bundle nor on this host"),
            "\(refused.stderr)")
        image.expectNothingLeft()
    }

    @Test("UIRequiredDeviceCapabilities naming another CPU: refused at create")
    func requiredCapabilities() throws {
        let image = try Image(
            info: "<key>UIRequiredDeviceCapabilities</key><array><string>arm64</string></array>")
        defer { image.remove() }
        let result = try image.run()
        #expect(result.code != 0)
        #expect(
            result.stderr.contains(
                "Echo.app cannot run on this host: Info.plist: UIRequiredDeviceCapabilities requires arm64; this host is amd64"
            ), "\(result.stderr)")
        #expect(!result.stdout.contains("hello"))
        image.expectNothingLeft()
    }

    @Test(
        "a running app's launcher and PID 1 hold no capability, each under a seccomp filter of its own"
    )
    func helpersHoldNothing() throws {
        let image = try Image(executable: "sh", arguments: ["-c", "sleep 30"])
        defer {
            _ = try? image.oci(["delete", "--force", image.id])
            image.remove()
        }
        let created = try image.oci(
            ["create", "--bundle", "\(image.directory)/bundle", image.id], detached: true)
        #expect(created.code == 0, "\(created.stderr)")
        #expect(try image.oci(["start", image.id], detached: true).code == 0)
        // The helpers are the container's appd-exec processes; the app is the bundle's busybox.
        var helpers: [HelperStatus] = []
        let settled = eventually {
            let pids = ((try? image.oci(["ps", image.id]).stdout) ?? "")
                .split(whereSeparator: \.isWhitespace).compactMap { Int32($0) }
            let launchers = pids.filter {
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\($0)/exe"))?
                    .hasSuffix("/appd-exec") == true
            }
            helpers = launchers.map { HelperStatus($0) }
            return pids.count >= 3 && helpers.count == 2 && helpers.allSatisfy(\.holdsNothing)
        }
        #expect(settled, "\(helpers)")
        for helper in helpers {
            #expect(helper.holdsNothing, "\(helper)")
        }
    }

    @Test("an executable changed after signing: refused at create, nothing of it ran or stays")
    func tamperedExecutable() throws {
        let image = try Image()
        defer { image.remove() }
        let fd = open("\(image.app)/echo", O_WRONLY | O_APPEND | O_CLOEXEC)
        #expect(fd >= 0 && write(fd, "x", 1) == 1)
        close(fd)
        let result = try image.run()
        #expect(result.code != 0)
        #expect(!result.stdout.contains("hello"), "the tampered app ran: \(result.stdout)")
        #expect(
            result.stderr.contains(
                "/Echo.app: does not match its code signature (1 problem): echo: was changed after signing"
            ), "\(result.stderr)")
        // The problem once, not in the message and again after it.
        #expect(
            result.stderr.components(separatedBy: "was changed after signing").count == 2,
            "\(result.stderr)")
        image.expectNothingLeft()
        // appd verify and appd install refuse it with the same error: one verifier.
        let same =
            "appd: \(image.app): does not match its code signature (1 problem)\n  echo: was changed"
        for command in [
            ["verify", image.app],
            ["install", "--no-daemon", "--root", "\(image.directory)/appd-root", image.app],
        ] {
            let refused = try ChildProcess(
                "appd", ["--config", "\(image.directory)/appd.conf"] + command, stdout: .discard,
                stderr: .capture
            ).finish()
            #expect(refused.code == 1, "\(command[0]): \(refused.stderr)")
            #expect(refused.stderr.hasPrefix(same), "\(command[0]): \(refused.stderr)")
        }
    }

    @Test(
        "an Info.plist or Entitlements.plist changed after signing: refused before the node gives the id a uid",
        arguments: ["Info.plist", "Entitlements.plist"])
    func tamperedMetadata(file: String) throws {
        let image = try Image()
        defer { image.remove() }
        try image.edit(file) {
            file == "Info.plist"
                ? $0.replacingOccurrences(of: "com.example.echo", with: "com.example.other")
                : $0.replacingOccurrences(
                    of: "</dict>",
                    with: "<key>com.apple.security.network.client</key><true/></dict>")
        }
        let result = try image.run()
        #expect(result.code != 0)
        #expect(
            result.stderr.contains("\(file): was changed after signing"), "\(result.stderr)")
        #expect(image.knownIDs.isEmpty, "uids: \(image.knownIDs)")
        image.expectNothingLeft()
    }
}
