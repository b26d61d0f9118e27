import AppdBase
import CLinux
import Foundation
import Glibc
import Sandbox
import TestSupport
import Testing

@testable import appd_oci

/// `appd-oci --plain` runs a real container (the host's static busybox as its image): its
/// root is a user namespace's root, mapped onto a host range of its own, holding the config's
/// capabilities there only (docs/oci-runtime.md, "Plain containers"). The attacks are made
/// from inside with CAP_SYS_ADMIN, CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH in that namespace.
@Suite("appd-oci --plain: a user namespace's root, nobody on the host", .serialized, rootOnly)
struct PlainContainerTests {
    static let busybox = "/usr/bin/busybox"
    static let capabilities = [
        "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_SETUID", "CAP_SETGID",
        "CAP_SYS_ADMIN",
    ]

    /// A bundle whose rootfs holds busybox as /bin/sh, and a host file only root may read.
    struct Bundle {
        var directory: String
        var bundle: String { "\(directory)/bundle" }
        var state: String { "\(directory)/state" }
        var secret: String { "\(directory)/secret" }
        /// The container's id: unique, as its cgroup's name is.
        let id = "plain-test-\(UUID().uuidString.prefix(8).lowercased())"
        /// The appd.conf appd-oci reads (empty: the defaults).
        var appdConfiguration = ""

        init() throws {
            directory =
                FileManager.default.temporaryDirectory.appendingPathComponent(
                    "appd-oci-plain-\(UUID().uuidString)"
                ).path
            try FileManager.default.createDirectory(
                atPath: "\(directory)/bundle/rootfs/bin", withIntermediateDirectories: true)
            // Written through an O_CLOEXEC descriptor: FileManager's copy holds one without it
            // for a moment, and a process another suite spawns then would keep it open for
            // writing, failing the container's exec with ETXTBSY (seen once, suites in parallel).
            let program = try Data(contentsOf: URL(fileURLWithPath: PlainContainerTests.busybox))
            let fd = open(
                "\(bundle)/rootfs/bin/busybox", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o755)
            #expect(fd >= 0)
            defer { close(fd) }
            let written = program.withUnsafeBytes { writeAll(fd, $0) }
            #expect((try? written.get()) != nil)
            try FileManager.default.createSymbolicLink(
                atPath: "\(bundle)/rootfs/bin/sh", withDestinationPath: "busybox")
            try "SECRET-\(UUID().uuidString)\n".write(
                toFile: secret, atomically: true, encoding: .utf8)
            #expect(chmod(secret, 0o600) == 0 && chown(secret, 0, 0) == 0)
            // The state folder and the scratch range of this run (each test its own).
            chmod(directory, 0o755)
        }

        func remove() { try? FileManager.default.removeItem(atPath: directory) }

        /// config.json: busybox running `script`, the config's capabilities in all five sets,
        /// the default kernel filesystems, the secret bound read-only at /secret, /proc/version
        /// masked.
        func write(script: String, extra: (inout [String: Any]) -> Void = { _ in }) throws {
            let sets = ["bounding", "effective", "permitted", "inheritable", "ambient"]
            var config: [String: Any] = [
                "ociVersion": "1.0.2", "root": ["path": "rootfs"], "hostname": "plain",
                "process": [
                    "user": ["uid": 0, "gid": 0, "additionalGids": [7]],
                    "args": ["/bin/sh", "-c", script], "env": ["PATH=/bin"], "cwd": "/",
                    "noNewPrivileges": true,
                    "capabilities": Dictionary(
                        uniqueKeysWithValues: sets.map { ($0, PlainContainerTests.capabilities) }),
                ],
                "mounts": [
                    ["destination": "/proc", "type": "proc", "source": "proc"],
                    [
                        "destination": "/dev", "type": "tmpfs", "source": "tmpfs",
                        "options": ["nosuid", "strictatime", "mode=755", "size=65536k"],
                    ],
                    [
                        "destination": "/secret", "type": "bind", "source": secret,
                        "options": ["rbind", "ro"],
                    ],
                ],
                "linux": [
                    "namespaces": ["pid", "network", "ipc", "uts", "mount"].map { ["type": $0] },
                    "maskedPaths": ["/proc/version"],
                ],
            ]
            extra(&config)
            let data = try JSONSerialization.data(withJSONObject: config)
            try data.write(to: URL(fileURLWithPath: "\(bundle)/config.json"))
        }

        /// `appd-oci --plain ARGS`, with this test's state root and no appd.conf.
        /// `detached`: the output goes to a file, not a pipe (a created container keeps
        /// appd-oci's stdout and stderr, as an engine wants; a pipe would not end).
        func oci(_ arguments: [String], detached: Bool = false) throws -> (
            code: Int32, stdout: String, stderr: String
        ) {
            try appdConfiguration.write(
                toFile: "\(directory)/none.conf", atomically: true, encoding: .utf8)
            let output = "\(directory)/output"
            try "".write(toFile: output, atomically: true, encoding: .utf8)
            let result = try ChildProcess(
                "appd-oci",
                ["--root", state, "--config", "\(directory)/none.conf", "--plain"] + arguments,
                environment: ["APPD_OCI_USERNS": "\(directory)/userns", "PATH": "/usr/bin:/bin"],
                stdout: detached ? .append(output) : .capture,
                stderr: detached ? .append(output) : .capture
            ).finish()
            if detached {
                let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
                return (result.code, "", text)
            }
            return result
        }

        /// `run`: the container's output.
        func run(_ script: String) throws -> (code: Int32, output: String) {
            try write(script: script)
            let result = try oci(["run", "--bundle", bundle, id])
            return (result.code, result.stdout + result.stderr)
        }
    }

    @Test(
        "its root is a user namespace's root: uid_map is the allocated range, not 0 0; the config's caps are held in it"
    )
    func userNamespaceRoot() throws {
        let bundle = try Bundle()
        defer { bundle.remove() }
        let result = try bundle.run(
            "cat /proc/self/uid_map; busybox grep -E 'CapEff|CapBnd|CapAmb' /proc/self/status; busybox id"
        )
        #expect(result.code == 0, "\(result.output)")
        let fields = result.output.split(separator: "\n").first?.split(separator: " ") ?? []
        #expect(fields.count == 3, "\(result.output)")
        #expect(fields.first == "0" && fields.last == "65536", "\(result.output)")
        let host = fields.count == 3 ? UInt32(fields[1]) ?? 0 : 0
        #expect(host >= PlainIDRange.first && (host - PlainIDRange.first) % PlainIDRange.size == 0)
        // CHOWN 0, DAC_OVERRIDE 1, DAC_READ_SEARCH 2, SETGID 6, SETUID 7, SYS_ADMIN 21.
        for set in ["CapEff", "CapBnd", "CapAmb"] {
            #expect(result.output.contains("\(set):\t00000000002000c7"), "\(result.output)")
        }
        #expect(result.output.contains("uid=0 gid=0 groups=7"), "\(result.output)")
        // Freed at delete: the run's slot file is gone.
        let left =
            (try? FileManager.default.contentsOfDirectory(atPath: "\(bundle.directory)/userns"))
            ?? []
        #expect(left.isEmpty, "\(left)")
    }

    @Test(
        "with CAP_SYS_ADMIN and CAP_DAC_OVERRIDE in its namespace it cannot read a host root file bound read-only, mount over a masked path, or unshare a user namespace"
    )
    func attacksFromInside() throws {
        let bundle = try Bundle()
        defer { bundle.remove() }
        let result = try bundle.run(
            """
            cat /secret; echo read=$?
            busybox mount -t tmpfs none /proc/version; echo mount=$?
            busybox umount /proc/version; echo umount=$?
            busybox mount -o remount,rw /secret; echo remount=$?
            busybox unshare -U true; echo unshare=$?
            echo masked=$(busybox wc -c < /proc/version)
            """)
        let secret = try String(contentsOfFile: bundle.secret, encoding: .utf8)
        #expect(
            !result.output.contains(secret.trimmingCharacters(in: .newlines)), "\(result.output)")
        for line in ["read=1", "mount=1", "umount=1", "remount=1", "unshare=1", "masked=0"] {
            #expect(result.output.contains(line), "\(line) in \(result.output)")
        }
        #expect(result.output.contains("Permission denied"), "\(result.output)")
    }

    @Test(
        "its root is its rootfs idmapped: what its root writes is stored as the image's ids, it enters a 0700 folder of the image's root, and nothing outside the rootfs is writable"
    )
    func writesItsOwnRoot() throws {
        let bundle = try Bundle()
        defer { bundle.remove() }
        let rootfs = "\(bundle.bundle)/rootfs"
        #expect(PlainContainer.allowsIdmappedRoot(rootfs), "the test's rootfs is on ext4 here")
        // A folder only the image's root may enter (as runtime-tools' `process` makes its cwd).
        #expect(mkdir("\(rootfs)/private", 0o700) == 0)
        let result = try bundle.run(
            """
            busybox mkdir /made && echo inside > /made/file && busybox chown 1000:1000 /made/file
            echo made=$?
            cd /private && echo entered=$?
            echo x > /secret; echo secret-write=$?
            busybox chown 70000 /made/file; echo chown-unmapped=$?
            """)
        #expect(result.code == 0, "\(result.output)")
        for line in ["made=0", "entered=0", "secret-write=1", "chown-unmapped=1"] {
            #expect(result.output.contains(line), "\(line) in \(result.output)")
        }
        var folder = stat()
        var file = stat()
        #expect(stat("\(rootfs)/made", &folder) == 0 && stat("\(rootfs)/made/file", &file) == 0)
        // On the host's disk: the container's 0 is the image's 0, its 1000 the image's 1000.
        #expect(folder.st_uid == 0 && folder.st_gid == 0, "\(folder.st_uid):\(folder.st_gid)")
        #expect(file.st_uid == 1000 && file.st_gid == 1000, "\(file.st_uid):\(file.st_gid)")
        #expect(try String(contentsOfFile: "\(rootfs)/made/file", encoding: .utf8) == "inside\n")
        // The bound host file is unchanged.
        #expect(try String(contentsOfFile: bundle.secret, encoding: .utf8).hasPrefix("SECRET-"))
    }

    @Test("root.readonly: the idmapped root cannot be written, its own /tmp can")
    func readOnlyRoot() throws {
        let bundle = try Bundle()
        defer { bundle.remove() }
        try bundle.write(
            script: "echo x > /made; echo root-write=$?; echo y > /tmp/ok; echo tmp-write=$?"
        ) { config in
            config["root"] = ["path": "rootfs", "readonly": true]
        }
        let result = try bundle.oci(["run", "--bundle", bundle.bundle, bundle.id])
        let output = result.stdout + result.stderr
        #expect(result.code == 0, "\(output)")
        #expect(output.contains("root-write=1") && output.contains("tmp-write=0"), "\(output)")
        #expect(output.contains("Read-only file system"), "\(output)")
        #expect(access("\(bundle.bundle)/rootfs/made", F_OK) != 0)
    }

    @Test(
        "the engine's volumes are mounted as asked, with the host's ids: a folder open to others is written as the container's range and runs what it holds (not with noexec), a read-only one and a root-owned 0755 one are not written"
    )
    func volumes() throws {
        let bundle = try Bundle()
        defer { bundle.remove() }
        let open = "\(bundle.directory)/open"
        let closed = "\(bundle.directory)/closed"
        let readOnly = "\(bundle.directory)/ro"
        let noexec = "\(bundle.directory)/noexec"
        for folder in [open, closed, readOnly, noexec] { #expect(mkdir(folder, 0o755) == 0) }
        for folder in [open, readOnly, noexec] { #expect(chmod(folder, 0o777) == 0) }
        try bundle.write(
            script: """
                echo one > /data/file; echo data=$?
                echo two > /closed/file; echo closed=$?
                echo three > /ro/file; echo ro=$?
                busybox stat -c 'owner=%u' /data/file
                busybox cp /bin/busybox /data/echo && /data/echo ran-from-volume
                busybox cp /bin/busybox /nox/true && /nox/true; echo noexec=$?
                """
        ) { config in
            var mounts = config["mounts"] as? [[String: Any]] ?? []
            for (source, destination, option) in [
                (open, "/data", "rw"), (closed, "/closed", "rw"), (readOnly, "/ro", "ro"),
                (noexec, "/nox", "noexec"),
            ] {
                mounts.append([
                    "destination": destination, "type": "bind", "source": source,
                    "options": ["rbind", option],
                ])
            }
            config["mounts"] = mounts
        }
        let result = try bundle.oci(["run", "--bundle", bundle.bundle, bundle.id])
        let output = result.stdout + result.stderr
        #expect(result.code == 0, "\(output)")
        for line in ["data=0", "closed=1", "ro=1", "owner=0", "ran-from-volume", "noexec=126"] {
            #expect(output.contains(line), "\(line) in \(output)")
        }
        // On the host: the container's root wrote it, as the first id of its range (never
        // idmapped to the host's root).
        var info = stat()
        #expect(stat("\(open)/file", &info) == 0, "\(output)")
        #expect(info.st_uid >= PlainIDRange.first, "\(info.st_uid)")
        #expect(try String(contentsOfFile: "\(open)/file", encoding: .utf8) == "one\n")
        #expect(access("\(closed)/file", F_OK) != 0 && access("\(readOnly)/file", F_OK) != 0)
    }

    @Test(
        "a writable volume of a system folder, of /, of the state root, or of a link to /etc: refused at create with one line naming the rule, nothing left"
    )
    func volumesRefused() throws {
        let bundle = try Bundle()
        defer { bundle.remove() }
        let link = "\(bundle.directory)/etc-link"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "/etc")
        try FileManager.default.createDirectory(
            atPath: bundle.state, withIntermediateDirectories: true)
        for (source, rule) in [
            ("/etc", "the system folder /etc"), ("/usr/lib", "the system folder /usr"),
            ("/", "appd's own state"), (bundle.state, "appd's own state"),
            (link, "the system folder /etc"),
        ] {
            try bundle.write(script: "echo ran") { config in
                var mounts = config["mounts"] as? [[String: Any]] ?? []
                mounts.append([
                    "destination": "/data", "type": "bind", "source": source,
                    "options": ["rbind", "rw"],
                ])
                config["mounts"] = mounts
            }
            let result = try bundle.oci(["run", "--bundle", bundle.bundle, bundle.id])
            let firstLine = result.stderr.split(separator: "\n").first.map(String.init) ?? ""
            #expect(result.code != 0, "\(source): \(result.stdout)")
            #expect(!result.stdout.contains("ran"), "\(source)")
            #expect(
                firstLine.contains(rule) && firstLine.contains("/data"),
                "\(source): \(result.stderr)")
            #expect(access("\(bundle.state)/\(bundle.id)", F_OK) != 0, "\(source) left state")
        }
    }

    /// `appd-oci --plain ARGS` in a mount namespace of its own where `rootfs` is an overlay of
    /// `lowerdir` (the engine's layers, as podman's snapshot is): the test's mounts vanish with
    /// it, the container's launcher keeps its copy.
    static func onOverlay(
        _ bundle: Bundle, lowerdir: String, _ arguments: [String]
    ) throws -> (code: Int32, output: String) {
        let engine = "\(bundle.directory)/engine"
        for folder in ["upper", "work"] {
            try FileManager.default.createDirectory(
                atPath: "\(engine)/\(folder)", withIntermediateDirectories: true)
        }
        try "".write(toFile: "\(bundle.directory)/none.conf", atomically: true, encoding: .utf8)
        let oci = [
            builtExecutable("appd-oci"), "--root", bundle.state, "--config",
            "\(bundle.directory)/none.conf", "--plain",
        ]
        let script =
            "mount -t overlay overlay -o lowerdir=\(lowerdir),upperdir=\(engine)/upper,workdir=\(engine)/work \(bundle.bundle)/rootfs && exec \"$@\""
        let output = "\(bundle.directory)/output"
        try "".write(toFile: output, atomically: true, encoding: .utf8)
        let result = try ChildProcess(
            "/usr/bin/unshare",
            ["-m", "--propagation", "private", "sh", "-c", script, "sh"] + oci + arguments,
            environment: [
                "APPD_OCI_USERNS": "\(bundle.directory)/userns", "PATH": "/usr/bin:/bin",
            ],
            stdout: .append(output), stderr: .append(output)
        ).finish()
        return (result.code, (try? String(contentsOfFile: output, encoding: .utf8)) ?? "")
    }

    @Test(
        "on an engine's overlay snapshot the root is writable as under runc: /var and /run written by its root, stored as its range in its own upper layer, the engine's layers untouched"
    )
    func writableOverlayRoot() throws {
        let bundle = try Bundle()
        defer {
            _ = try? bundle.oci(["delete", "--force", bundle.id])
            bundle.remove()
        }
        // The image's layer: busybox, and /var and /run as an image has them (root's, 0755).
        let lower = "\(bundle.directory)/lower"
        #expect(rename("\(bundle.bundle)/rootfs", lower) == 0)
        for folder in ["\(bundle.bundle)/rootfs", "\(lower)/var", "\(lower)/run"] {
            #expect(mkdir(folder, 0o755) == 0)
        }
        try bundle.write(
            script:
                "echo x > /var/x && busybox mkdir /run/y && echo wrote; busybox ls /; busybox sleep 30"
        ) { config in
            config["mounts"] = (config["mounts"] as? [[String: Any]] ?? []).filter {
                $0["destination"] as? String != "/secret"
            }
        }
        let created = try Self.onOverlay(
            bundle, lowerdir: lower, ["create", "--bundle", bundle.bundle, bundle.id])
        #expect(created.code == 0, "\(created.output)")
        #expect(try bundle.oci(["start", bundle.id], detached: true).code == 0)
        let upper = "\(bundle.state)/\(bundle.id)/upper"
        var info = stat()
        for _ in 0..<200 where stat("\(upper)/run/y", &info) != 0 { usleep(20_000) }
        #expect(stat("\(upper)/var/x", &info) == 0, "\(created.output)")
        // Written as the container's root: its range's first id, never the host's root.
        #expect(info.st_uid >= PlainIDRange.first && info.st_uid == info.st_gid, "\(info.st_uid)")
        #expect(try String(contentsOfFile: "\(upper)/var/x", encoding: .utf8) == "x\n")
        #expect(stat("\(upper)/run/y", &info) == 0 && info.st_uid >= PlainIDRange.first)
        // The engine's layers are read-only to it: nothing written there.
        for layer in [lower, "\(bundle.directory)/engine/upper"] {
            #expect(access("\(layer)/var/x", F_OK) != 0 && access("\(layer)/run/y", F_OK) != 0)
        }
        #expect(try bundle.oci(["delete", "--force", bundle.id]).code == 0)
        #expect(access(upper, F_OK) != 0, "the upper layer goes with delete")
    }

    /// A process holding new namespaces (`unshare` options) until `body` returns;
    /// `body` gets its pid once it is in them.
    static func holdingNamespaces<T>(_ options: [String], _ body: (pid_t) throws -> T) throws -> T {
        let holder = try ChildProcess(
            "/usr/bin/unshare", options + ["--fork", "--kill-child", "/usr/bin/sleep", "60"],
            stdout: .discard, stderr: .discard)
        defer {
            holder.signal(SIGKILL)  // --kill-child: its sleep goes with it
            holder.waitUntilExit()
        }
        let pid = holder.processIdentifier
        let own = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/ipc"))
        for _ in 0..<250 {
            let theirs = try? FileManager.default.destinationOfSymbolicLink(
                atPath: "/proc/\(pid)/ns/ipc")
            if theirs != nil && theirs != own { break }
            usleep(20_000)
        }
        return try body(pid)
    }

    @Test(
        "a pod's pid, ipc and uts namespaces given by path are joined: the container's process is in the very namespaces the engine made"
    )
    func joinsPodNamespaces() throws {
        try Self.holdingNamespaces(["--ipc", "--uts", "--pid"]) { pod in
            let bundle = try Bundle()
            defer { bundle.remove() }
            let paths = [
                "ipc": "/proc/\(pod)/ns/ipc", "uts": "/proc/\(pod)/ns/uts",
                "pid": "/proc/\(pod)/ns/pid_for_children",
            ]
            try bundle.write(
                script:
                    "for n in ipc uts pid; do busybox readlink /proc/self/ns/$n; done; busybox ps -o comm"
            ) { config in
                var linux = config["linux"] as? [String: Any] ?? [:]
                linux["namespaces"] = ["network", "mount", "ipc", "uts", "pid"].map { type in
                    paths[type].map { ["type": type, "path": $0] } ?? ["type": type]
                }
                config["linux"] = linux
                config.removeValue(forKey: "hostname")
            }
            let result = try bundle.oci(["run", "--bundle", bundle.bundle, bundle.id])
            let output = result.stdout + result.stderr
            #expect(result.code == 0, "\(output)")
            for type in ["ipc", "uts", "pid"] {
                let expected = try FileManager.default.destinationOfSymbolicLink(
                    atPath: paths[type] ?? "")
                #expect(output.contains(expected), "\(type): \(expected) in \(output)")
            }
            // The pod's processes are its: the holder's sleep is there.
            #expect(output.contains("sleep"), "\(output)")
        }
    }

    @Test(
        "a pod whose sandbox container is appd-oci's: the engine's /proc/STATE_PID/ns/{pid,ipc,uts} are the sandbox's own namespaces, joined (shareProcessNamespace)"
    )
    func joinsAppdSandboxNamespaces() throws {
        let sandbox = try Bundle()
        defer {
            _ = try? sandbox.oci(["delete", "--force", sandbox.id])
            sandbox.remove()
        }
        try sandbox.write(script: "busybox sleep 30")
        #expect(
            try sandbox.oci(["create", "--bundle", sandbox.bundle, sandbox.id], detached: true).code
                == 0)
        #expect(try sandbox.oci(["start", sandbox.id], detached: true).code == 0)
        let state = try sandbox.oci(["state", sandbox.id])
        let json = try JSONSerialization.jsonObject(with: Data(state.stdout.utf8)) as? [String: Any]
        let pid = try #require(json?["pid"] as? Int, "\(state.stdout)\(state.stderr)")

        let member = try Bundle()
        defer { member.remove() }
        try member.write(
            script:
                "for n in ipc uts pid; do busybox readlink /proc/self/ns/$n; done; busybox ps -o comm"
        ) { config in
            var linux = config["linux"] as? [String: Any] ?? [:]
            linux["namespaces"] =
                ["network", "mount"].map { ["type": $0] }
                + ["ipc", "uts", "pid"].map { ["type": $0, "path": "/proc/\(pid)/ns/\($0)"] }
            config["linux"] = linux
            config.removeValue(forKey: "hostname")
        }
        let result = try member.oci(["run", "--bundle", member.bundle, member.id])
        let output = result.stdout + result.stderr
        #expect(result.code == 0, "\(output)")
        for (type, file) in [("ipc", "ipc"), ("uts", "uts"), ("pid", "pid_for_children")] {
            let expected = try FileManager.default.destinationOfSymbolicLink(
                atPath: "/proc/\(pid)/ns/\(file)")
            #expect(output.contains(expected), "\(type): \(expected) in \(output)")
        }
        // The sandbox's PID 1 (appd-exec's, in its own pid namespace) is seen beside its own.
        #expect(
            output.components(separatedBy: "appd-exec").count - 1 >= 2,
            "the sandbox's processes are seen: \(output)")
    }

    @Test(
        "a namespace path another user namespace owns, or the host's own, is refused naming the field"
    )
    func podNamespacesRefused() throws {
        let bundle = try Bundle()
        defer { bundle.remove() }
        func refusal(_ type: String, _ path: String) throws -> String {
            let namespaces = ["network", "mount", "ipc", "uts", "pid"].map { name in
                name == type ? #"{"type":"\#(name)","path":"\#(path)"}"# : #"{"type":"\#(name)"}"#
            }
            let spec = try AppdOCITests.spec(
                #"{"linux": {"namespaces": [\#(namespaces.joined(separator: ","))]}}"#)
            do {
                try OCIConfigCheck.check(spec, plainBundle: bundle.bundle)
                return ""
            } catch let error as AppdError { return error.message }
        }
        // The host's own (appd-oci's: it runs in this process's namespaces here).
        for type in ["ipc", "uts", "pid"] {
            let message = try refusal(type, "/proc/self/ns/\(type)")
            #expect(
                message.contains("linux.namespaces[")
                    && message.contains("the host's \(type) namespace")
                    && !message.contains("\n"), "\(message)")
        }
        // Owned by a user namespace someone else is root of.
        try Self.holdingNamespaces(["--user", "--map-root-user", "--ipc", "--uts"]) { other in
            for type in ["ipc", "uts"] {
                let message = try refusal(type, "/proc/\(other)/ns/\(type)")
                #expect(
                    message.contains("linux.namespaces[")
                        && message.contains("owned by another user namespace"),
                    "\(message)")
            }
        }
    }

    @Test(
        "process.terminal: the container's terminal is also its /dev/console, as under runc, and the container's user may open it"
    )
    func consoleIsTheTerminal() throws {
        let bundle = try Bundle()
        defer {
            _ = try? bundle.oci(["delete", "--force", bundle.id])
            bundle.remove()
        }
        try bundle.write(
            script:
                "busybox stat -c '%n %F %u' /dev/console; echo via-console > /dev/console; echo wrote=$?"
        ) { config in
            var process = config["process"] as? [String: Any] ?? [:]
            process["terminal"] = true
            config["process"] = process
        }
        // The engine's end: a socket the master arrives on.
        let path = "\(bundle.directory)/console.sock"
        let listener = socket(
            AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #expect(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        #expect(bound == 0 && listen(listener, 1) == 0)
        let created = try bundle.oci(
            ["create", "--console-socket", path, "--bundle", bundle.bundle, bundle.id],
            detached: true)
        #expect(created.code == 0, "\(created.stderr)")
        let connection = accept(listener, nil, nil)
        #expect(connection >= 0)
        defer { close(connection) }
        var tag: UInt8 = 0
        var master: Int32 = -1
        #expect(appd_recv_fds(connection, &tag, &master, 1) == 1 && master >= 0)
        defer { close(master) }
        #expect(try bundle.oci(["start", bundle.id], detached: true).code == 0)
        var output = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while output.count < 1 << 16 {
            let count = read(master, &buffer, buffer.count)  // EIO once the container is gone
            if count <= 0 { break }
            output += buffer[..<count]
        }
        let text = String(decoding: output, as: UTF8.self)
        #expect(text.contains("/dev/console character special file 0"), "\(text)")
        #expect(text.contains("via-console") && text.contains("wrote=0"), "\(text)")
    }

    @Test(
        "linux.devices: a node the host lacks is made on the container's nodev /dev as asked (type, numbers, mode, owner) and cannot be opened; a host node is bound as the host has it, nobody's to the container; a fifo is made"
    )
    func devices() throws {
        let bundle = try Bundle()
        defer { bundle.remove() }
        try bundle.write(
            script: """
                busybox stat -c '%n %F %t:%T %a %u:%g' /dev/test1 /dev/test2 /dev/test3 /dev/loop-control
                busybox cat /dev/test1 </dev/null; echo made-open=$?
                busybox head -c1 /dev/loop-control >/dev/null; echo host-open=$?
                """
        ) { config in
            var linux = config["linux"] as? [String: Any] ?? [:]
            linux["devices"] = [
                [
                    "path": "/dev/test1", "type": "c", "major": 10, "minor": 666, "fileMode": 0o640,
                    "uid": 0, "gid": 7,
                ],
                ["path": "/dev/test2", "type": "b", "major": 8, "minor": 666, "fileMode": 0o660],
                ["path": "/dev/test3", "type": "p", "fileMode": 0o600],
                ["path": "/dev/loop-control", "type": "c", "major": 10, "minor": 237],
            ]
            config["linux"] = linux
        }
        let result = try bundle.oci(["run", "--bundle", bundle.bundle, bundle.id])
        let output = result.stdout + result.stderr
        #expect(result.code == 0, "\(output)")
        #expect(output.contains("/dev/test1 character special file a:29a 640 0:7"), "\(output)")
        #expect(output.contains("/dev/test2 block special file 8:29a 660 0:0"), "\(output)")
        #expect(output.contains("/dev/test3 fifo"), "\(output)")
        // The host's node, as the host has it: root's 0600, so nobody's to the container.
        #expect(
            output.contains("/dev/loop-control character special file a:ed 600 65534:65534"),
            "\(output)")
        #expect(output.contains("made-open=1") && output.contains("host-open=1"), "\(output)")
    }

    @Test(
        "exec finds a program the container wrote into its overlay's upper layer by name: the PATH is searched in the container's root, not the engine's rootfs folder"
    )
    func execFindsProgramInUpperLayer() throws {
        let bundle = try Bundle()
        defer {
            _ = try? bundle.oci(["delete", "--force", bundle.id])
            bundle.remove()
        }
        let lower = "\(bundle.directory)/lower"
        #expect(rename("\(bundle.bundle)/rootfs", lower) == 0)
        #expect(mkdir("\(bundle.bundle)/rootfs", 0o755) == 0)
        try bundle.write(
            script:
                "printf '#!/bin/sh\\necho greeted-from-upper\\n' > /bin/greet && busybox chmod 755 /bin/greet && busybox sleep 30"
        ) { config in
            config["mounts"] = (config["mounts"] as? [[String: Any]] ?? []).filter {
                $0["destination"] as? String != "/secret"
            }
        }
        let created = try Self.onOverlay(
            bundle, lowerdir: lower, ["create", "--bundle", bundle.bundle, bundle.id])
        #expect(created.code == 0, "\(created.output)")
        #expect(try bundle.oci(["start", bundle.id], detached: true).code == 0)
        let upper = "\(bundle.state)/\(bundle.id)/upper"
        for _ in 0..<200 where access("\(upper)/bin/greet", X_OK) != 0 { usleep(20_000) }
        let exec = try bundle.oci(["exec", bundle.id, "greet"])
        #expect(exec.code == 0, "\(exec.stderr)")
        #expect(exec.stdout == "greeted-from-upper\n", "\(exec.stdout)\(exec.stderr)")
        // A name the container does not have stays not found, naming it.
        let missing = try bundle.oci(["exec", bundle.id, "no-such-tool"])
        #expect(missing.code != 0 && missing.stderr.contains("no-such-tool"), "\(missing.stderr)")
    }

    @Test(
        "an overlay whose layers name a system folder is not idmapped: the read-only layout, nothing of the host written"
    )
    func overlayOfSystemFolderNotOwned() throws {
        let bundle = try Bundle()
        defer { bundle.remove() }
        let lower = "\(bundle.directory)/lower"
        #expect(rename("\(bundle.bundle)/rootfs", lower) == 0)
        #expect(mkdir("\(bundle.bundle)/rootfs", 0o755) == 0)
        // /etc/default as a lower layer: its files would be the container's root's if idmapped.
        try bundle.write(
            script: "echo x > /bin/x; echo bin=$?; echo y > /x; echo root=$?"
        ) { config in
            config["mounts"] = (config["mounts"] as? [[String: Any]] ?? []).filter {
                $0["destination"] as? String != "/secret"
            }
        }
        let result = try Self.onOverlay(
            bundle, lowerdir: "\(lower):/etc/default",
            ["run", "--bundle", bundle.bundle, bundle.id])
        #expect(result.code == 0, "\(result.output)")
        #expect(
            result.output.contains("bin=1") && result.output.contains("root=1"), "\(result.output)")
        #expect(access("/etc/default/x", F_OK) != 0 && access("/etc/default/bin", F_OK) != 0)
    }

    @Test("its processes are its range on the host, not root: /proc/PID/status read from the host")
    func notRootOnTheHost() throws {
        let bundle = try Bundle()
        defer {
            _ = try? bundle.oci(["delete", "--force", bundle.id])
            bundle.remove()
        }
        try bundle.write(script: "busybox sleep 30")
        let created = try bundle.oci(
            ["create", "--bundle", bundle.bundle, bundle.id], detached: true)
        #expect(created.code == 0, "\(created.stderr)")
        #expect(try bundle.oci(["start", bundle.id], detached: true).code == 0)
        var uids: [UInt32] = []
        for _ in 0..<100 where uids.isEmpty {
            let listed = try bundle.oci(["ps", bundle.id]).stdout
            for pid in listed.split(whereSeparator: \.isWhitespace).compactMap({ Int32($0) }) {
                let status =
                    (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
                guard status.contains("Name:\tbusybox") || status.contains("Name:\tsleep") else {
                    continue
                }
                let line = status.split(separator: "\n").first { $0.hasPrefix("Uid:") } ?? ""
                uids += line.split(whereSeparator: \.isWhitespace).dropFirst().compactMap {
                    UInt32($0)
                }
            }
            if uids.isEmpty { usleep(20_000) }
        }
        #expect(uids.count == 4, "the app's Uid line, read from the host")
        for uid in uids {
            #expect(
                uid >= PlainIDRange.first
                    && uid < PlainIDRange.first + PlainIDRange.slots * PlainIDRange.size, "\(uids)")
        }
    }
}

/// What a plain config may not ask, refused at create with one line (no root needed: the
/// check comes before anything is made).
@Suite("appd-oci --plain: widening refused at create")
struct PlainRefusalTests {
    @Test(
        "a non-namespaced sysctl, a host namespace, more than 1024 mounts: one line naming it",
        arguments: [
            (#"{"linux": {"namespaces": NS, "sysctl": {"kernel.panic": "1"}}}"#, "kernel.panic"),
            (
                #"{"mounts": ["#
                    + Array(
                        repeating: #"{"destination": "/x", "type": "tmpfs", "source": "tmpfs"}"#,
                        count: 1025
                    ).joined(separator: ",") + #"], "linux": {"namespaces": NS}}"#,
                "config.json lists 1025 mounts; at most 1024"
            ),
            (
                #"{"linux": {"namespaces": [{"type":"pid"},{"type":"ipc"},{"type":"uts"},{"type":"mount"}]}}"#,
                "the host's network namespace"
            ),
            (
                #"{"linux": {"namespaces": [{"type":"pid"},{"type":"ipc"},{"type":"uts"},{"type":"mount"},{"type":"network","path":"/proc/self/ns/ipc"}]}}"#,
                "is not a network namespace"
            ),
        ])
    func refused(json: String, named: String) throws {
        let spec = try AppdOCITests.spec(
            json.replacingOccurrences(of: "NS", with: AppdOCITests.namespaces))
        #expect {
            try OCIConfigCheck.check(spec, plainBundle: "/nonexistent-bundle")
        } throws: { error in
            let message = (error as? AppdError)?.message ?? ""
            return message.contains(named) && !message.contains("\n")
        }
    }

    @Test(
        "linux.devices outside /dev, of an unknown type, past the kernel's numbers or the container's ids: one line naming the field",
        arguments: [
            (
                #"{"path": "/etc/x", "type": "c", "major": 1, "minor": 3}"#,
                "linux.devices[0] path /etc/x"
            ),
            (
                #"{"path": "/dev/../etc/x", "type": "c", "major": 1, "minor": 3}"#,
                "linux.devices[0] path"
            ),
            (
                #"{"path": "/dev/pts/9", "type": "c", "major": 136, "minor": 9}"#,
                "linux.devices[0] path"
            ),
            (
                #"{"path": "/dev/x", "type": "s", "major": 1, "minor": 3}"#,
                "linux.devices[0] type 's'"
            ),
            (#"{"path": "/dev/x", "type": "c", "major": 4096, "minor": 3}"#, "numbers 4096:3"),
            (
                #"{"path": "/dev/x", "type": "c", "major": 1, "minor": 3, "uid": 65536}"#,
                "owner 65536:0"
            ),
        ])
    func devicesRefused(json: String, named: String) throws {
        let spec = try AppdOCITests.spec(
            #"{"linux": {"namespaces": NS, "devices": [DEVICE]}}"#
                .replacingOccurrences(of: "NS", with: AppdOCITests.namespaces)
                .replacingOccurrences(of: "DEVICE", with: json))
        try OCIConfigCheck.check(spec, plainBundle: "/nonexistent-bundle")
        #expect {
            _ = try PlainContainer.devices(spec.linux?.devices ?? [], hostID: PlainIDRange.first)
        } throws: { error in
            let message = (error as? AppdError)?.message ?? ""
            return message.contains(named) && !message.contains("\n")
        }
    }

    @Test(
        "what a plain container holds in its own namespaces is accepted: any capability, namespaced sysctls, binds (its volumes, checked at create)"
    )
    func accepted() throws {
        let bundle = FileManager.default.temporaryDirectory.appendingPathComponent(
            "appd-oci-plain-\(UUID().uuidString)"
        ).path
        try FileManager.default.createDirectory(
            atPath: "\(bundle)/files", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: bundle) }
        let spec = try AppdOCITests.spec(
            #"""
            {"process": {"capabilities": {"bounding": ["CAP_SYS_ADMIN", "CAP_NET_ADMIN"]}},
             "mounts": [{"destination": "/etc-ro", "type": "bind", "source": "/etc", "options": ["rbind", "ro"]},
                        {"destination": "/files", "type": "bind", "source": "\#(bundle)/files", "options": ["rbind", "rw"]}],
             "linux": {"namespaces": \#(AppdOCITests.namespaces),
                       "sysctl": {"net.ipv4.ip_forward": "1", "kernel.shmmax": "1000", "fs.mqueue.msg_max": "20"},
                       "uidMappings": [{"containerID": 0, "hostID": 1000, "size": 2000}]}}
            """#)
        try OCIConfigCheck.check(spec, plainBundle: bundle)
    }
}
