import AppContainers
import AppdBase
import Foundation
import Glibc
import Sandbox
import TestSupport
import Testing

@testable import appd_oci

/// What a container is given of the host, attacked through a real `appd-oci` called as an
/// engine calls it (issue 35): its root filesystem, its binds and data volume, its hooks, its
/// cgroup, its network namespace, and what `list` prints (docs/oci-runtime.md).
@Suite("appd-oci: a container gets its image and nothing else of the host", .serialized, rootOnly)
struct OCIHostTrustTests {
    typealias Bundle = PlainContainerTests.Bundle

    /// `appd-oci --plain ARGS` for `bundle`, with a state root of the test's choosing.
    static func oci(
        _ bundle: Bundle, _ arguments: [String], root: String? = nil, detached: Bool = false
    ) throws -> (code: Int32, stdout: String, stderr: String) {
        try bundle.appdConfiguration.write(
            toFile: "\(bundle.directory)/none.conf", atomically: true, encoding: .utf8)
        let output = "\(bundle.directory)/output"
        try "".write(toFile: output, atomically: true, encoding: .utf8)
        let result = try ChildProcess(
            "appd-oci",
            [
                "--root", root ?? bundle.state, "--config", "\(bundle.directory)/none.conf",
                "--log", "\(bundle.directory)/oci.log", "--plain",
            ] + arguments,
            environment: [
                "APPD_OCI_USERNS": "\(bundle.directory)/userns", "PATH": "/usr/bin:/bin",
            ],
            stdout: detached ? .append(output) : .capture,
            stderr: detached ? .append(output) : .capture
        ).finish()
        guard detached else { return result }
        return (result.code, "", (try? String(contentsOfFile: output, encoding: .utf8)) ?? "")
    }

    static func expectRefused(
        _ result: (code: Int32, stdout: String, stderr: String), _ named: String...
    ) {
        #expect(result.code == 1, "\(result.stderr)")
        for text in named { #expect(result.stderr.contains(text), "\(text) in \(result.stderr)") }
        #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
    }

    static func listing(_ path: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }

    // MARK: the root filesystem

    @Test(
        "root.path: a host folder outside the bundle, a link, ../, or a folder holding appd-oci's state: refused at create naming it; nothing made in it"
    )
    func rootMustBeTheEngines() throws {
        let bundle = try Bundle()
        defer { bundle.remove() }
        // A folder only root may enter, with a file only root may read: the issue's attack.
        let host = "\(bundle.directory)/host-secret"
        #expect(mkdir(host, 0o700) == 0)
        try "precious\n".write(toFile: "\(host)/data", atomically: true, encoding: .utf8)
        #expect(chmod("\(host)/data", 0o600) == 0)
        let script = "cat /data; echo appended >> /data; echo done"
        for (root, named) in [
            (host, "is neither the bundle"),
            ("../host-secret", "is neither the bundle"),
        ] {
            try bundle.write(script: script) { $0["root"] = ["path": root] }
            let result = try Self.oci(bundle, ["run", "--bundle", bundle.bundle, bundle.id])
            Self.expectRefused(result, "the root filesystem", named)
            #expect(!result.stdout.contains("precious"), "\(result.stdout)")
        }
        #expect(Self.listing(host) == ["data"], "mount points made in it: \(Self.listing(host))")
        #expect(try String(contentsOfFile: "\(host)/data", encoding: .utf8) == "precious\n")

        // A link to the rootfs, and a path through a linked folder.
        #expect(symlink("rootfs", "\(bundle.bundle)/linked") == 0)
        #expect(symlink(bundle.bundle, "\(bundle.directory)/alias") == 0)
        for root in ["linked", "\(bundle.directory)/alias/rootfs"] {
            try bundle.write(script: "echo ran") { $0["root"] = ["path": root] }
            let result = try Self.oci(bundle, ["run", "--bundle", bundle.bundle, bundle.id])
            Self.expectRefused(result, "symbolic link")
            #expect(!result.stdout.contains("ran"))
        }

        // A rootfs holding appd-oci's own state root.
        try bundle.write(script: "echo ran")
        let result = try Self.oci(
            bundle, ["run", "--bundle", bundle.bundle, bundle.id],
            root: "\(bundle.bundle)/rootfs/run/appd-oci")
        Self.expectRefused(result, "appd's own state")
        #expect(!FileManager.default.fileExists(atPath: "\(bundle.bundle)/rootfs/proc"))
        #expect(Self.listing("\(bundle.directory)/userns").isEmpty)
    }

    @Test("a plain container's read-only bind never reaches appd-oci's own files (id slots, state)")
    func ownStateNeverBound() throws {
        let bundle = try Bundle()
        defer { bundle.remove() }
        for source in ["\(bundle.directory)/userns", bundle.state, bundle.directory] {
            try bundle.write(script: "ls /own; echo listed") { config in
                var mounts = config["mounts"] as? [[String: Any]] ?? []
                mounts.append([
                    "destination": "/own", "type": "bind", "source": source,
                    "options": ["rbind", "ro"],
                ])
                config["mounts"] = mounts
            }
            _ = mkdir("\(bundle.directory)/userns", 0o700)
            _ = mkdir(bundle.state, 0o700)
            let result = try Self.oci(bundle, ["run", "--bundle", bundle.bundle, bundle.id])
            Self.expectRefused(result, "the bind source for /own", "appd's own state")
            #expect(!result.stdout.contains("listed"))
        }
    }

    // MARK: hooks

    /// A hook that logs how it was called: `$0`, its phase, HOOK_MODE and LD_PRELOAD.
    static func hookScript(at path: String, log: String) throws {
        try """
        #!/bin/sh
        echo "$0 $1 mode=${HOOK_MODE-unset} preload=${LD_PRELOAD-unset}" >> \(log)
        """.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(chmod(path, 0o755) == 0)
    }

    @Test(
        "a listed hook gets only the variables and the args[0] its [OCI] Hooks= entry allows, and runs by the fd that was checked"
    )
    func hookEnvironmentAndArguments() throws {
        var bundle = try Bundle()
        defer { bundle.remove() }
        let hook = "\(bundle.directory)/hook.sh"
        let log = "\(bundle.directory)/hooks.log"
        try Self.hookScript(at: hook, log: log)
        func hooks(args: [String], env: [String]) -> [String: Any] {
            ["prestart": [["path": hook, "args": args, "env": env]]]
        }
        bundle.appdConfiguration = "[OCI]\nHooks=\(hook)\n"
        for (args, env, named) in [
            ([hook, "prestart"], ["LD_PRELOAD=/nonexistent.so"], "the variable LD_PRELOAD"),
            ([hook, "prestart"], ["HOOK_MODE=x"], "the variable HOOK_MODE"),
            (["evil-mode", "prestart"], [], "is called as 'evil-mode'"),
        ] {
            try bundle.write(script: "exit 0") { $0["hooks"] = hooks(args: args, env: env) }
            let result = try Self.oci(bundle, ["run", "--bundle", bundle.bundle, bundle.id])
            Self.expectRefused(result, "prestart hook \(hook)", named)
        }
        #expect((try? String(contentsOfFile: log, encoding: .utf8)) == nil, "a refused hook ran")

        // Listed with HOOK_MODE: it gets it, and is executed through its fd.
        bundle.appdConfiguration = "[OCI]\nHooks=\(hook)::HOOK_MODE\n"
        try bundle.write(script: "exit 0") {
            $0["hooks"] = hooks(args: [hook, "prestart"], env: ["HOOK_MODE=listed"])
        }
        let result = try Self.oci(bundle, ["run", "--bundle", bundle.bundle, bundle.id])
        #expect(result.code == 0, "\(result.stderr)")
        let logged = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(logged == "/proc/self/fd/3 prestart mode=listed preload=unset\n", "\(logged)")
    }

    @Test("a stored poststop hook is checked again when it runs: taken off Hooks=, it does not run")
    func storedHooksCheckedAgain() throws {
        var bundle = try Bundle()
        defer {
            _ = try? Self.oci(bundle, ["delete", "--force", bundle.id])
            bundle.remove()
        }
        let hook = "\(bundle.directory)/hook.sh"
        let log = "\(bundle.directory)/hooks.log"
        try Self.hookScript(at: hook, log: log)
        bundle.appdConfiguration = "[OCI]\nHooks=\(hook)\n"
        try bundle.write(script: "exit 0") {
            $0["hooks"] = [
                "poststart": [["path": hook, "args": [hook, "poststart"]]],
                "poststop": [["path": hook, "args": [hook, "poststop"]]],
            ]
        }
        let created = try Self.oci(
            bundle, ["create", "--bundle", bundle.bundle, bundle.id], detached: true)
        #expect(created.code == 0, "\(created.stderr)")
        #expect(try Self.oci(bundle, ["start", bundle.id], detached: true).code == 0)
        bundle.appdConfiguration = "[OCI]\nHooks=\n"
        #expect(try Self.oci(bundle, ["delete", "--force", bundle.id]).code == 0)
        let logged = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(logged.contains("poststart") && !logged.contains("poststop"), "\(logged)")
        let warnings =
            (try? String(contentsOfFile: "\(bundle.directory)/oci.log", encoding: .utf8)) ?? ""
        #expect(warnings.contains("poststop hook \(hook) could not run"), "\(warnings)")
    }

    // MARK: cgroups

    /// The container's cgroup directories in every hierarchy mounted here.
    static func cgroupDirectories(_ path: String) -> [String] {
        let layout = CgroupLayout.detect()
        return ([layout.unified].compactMap { $0 } + layout.v1).compactMap {
            $0.directory(of: path)
        }.filter { FileManager.default.fileExists(atPath: $0) }
    }

    @Test("a cgroupsPath inside another container's cgroup is refused at create; the outer runs on")
    func nestedCgroupRefused() throws {
        let outer = try Bundle()
        var inner = try Bundle()
        let top = "/appd-oci-trust-\(UUID().uuidString.prefix(8).lowercased())"
        defer {
            _ = try? Self.oci(outer, ["delete", "--force", outer.id])
            _ = try? Self.oci(inner, ["delete", "--force", inner.id])
            for directory in Self.cgroupDirectories(top) { rmdir(directory) }
            outer.remove()
            inner.remove()
        }
        try outer.write(script: "busybox sleep 30") {
            var linux = $0["linux"] as? [String: Any] ?? [:]
            linux["cgroupsPath"] = "\(top)/outer"
            $0["linux"] = linux
        }
        let created = try Self.oci(
            outer, ["create", "--bundle", outer.bundle, outer.id], detached: true)
        #expect(created.code == 0, "\(created.stderr)")
        inner.appdConfiguration = ""
        try inner.write(script: "exit 0") {
            var linux = $0["linux"] as? [String: Any] ?? [:]
            linux["cgroupsPath"] = "\(top)/outer/inner"
            $0["linux"] = linux
        }
        let result = try Self.oci(inner, ["run", "--bundle", inner.bundle, inner.id])
        Self.expectRefused(result, "inside the cgroup \(top)/outer of container \(outer.id)")
        #expect(Self.cgroupDirectories("\(top)/outer/inner").isEmpty)
        let state = try Self.oci(outer, ["state", outer.id]).stdout
        #expect(state.contains("\"status\" : \"created\""), "\(state)")
    }

    @Test(
        "delete --force of a container with a process in a cgroup below its own: that process lives, and delete returns within 2 s per hierarchy"
    )
    func deleteForceBounded() throws {
        let bundle = try Bundle()
        let path = "/appd-oci-trust-\(UUID().uuidString.prefix(8).lowercased())"
        let sleeper = try ChildProcess("/bin/sleep", ["60"], stdout: .discard, stderr: .discard)
        defer {
            sleeper.signal(SIGKILL)
            sleeper.waitUntilExit()
            _ = try? Self.oci(bundle, ["delete", "--force", bundle.id])
            for directory in Self.cgroupDirectories("\(path)/foreign") { rmdir(directory) }
            for directory in Self.cgroupDirectories(path) { rmdir(directory) }
            bundle.remove()
        }
        try bundle.write(script: "busybox sleep 30") {
            var linux = $0["linux"] as? [String: Any] ?? [:]
            linux["cgroupsPath"] = path
            $0["linux"] = linux
        }
        let created = try Self.oci(
            bundle, ["create", "--bundle", bundle.bundle, bundle.id], detached: true)
        #expect(created.code == 0, "\(created.stderr)")
        #expect(try Self.oci(bundle, ["start", bundle.id], detached: true).code == 0)
        // Something that is not the container's, below its cgroup in the v2 tree.
        let hierarchies = Self.cgroupDirectories(path)
        let unified = try #require(CgroupLayout.detect().unified?.directory(of: path))
        #expect(mkdir("\(unified)/foreign", 0o755) == 0)
        try "\(sleeper.processIdentifier)".write(
            toFile: "\(unified)/foreign/cgroup.procs", atomically: false, encoding: .utf8)
        let started = Date()
        let deleted = try Self.oci(bundle, ["delete", "--force", bundle.id])
        let seconds = Date().timeIntervalSince(started)
        #expect(deleted.code == 0, "\(deleted.stderr)")
        #expect(
            seconds <= 2 * Double(hierarchies.count),
            "delete --force took \(seconds) s for \(hierarchies.count) hierarchies")
        // Alive, not a zombie waiting for this test to reap it.
        let stat =
            (try? String(contentsOfFile: "/proc/\(sleeper.processIdentifier)/stat", encoding: .utf8))
            ?? ""
        let state = stat.split(separator: ")").last?.split(separator: " ").first ?? ""
        #expect(state == "S", "delete killed a foreign process (state \(state))")
        print(
            "delete --force with a foreign cgroup below: \(seconds) s, \(hierarchies.count) hierarchies"
        )
    }

    // MARK: the network

    @Test(
        "a plain container may not join an app container's own network namespace by path; a pod sandbox's it may"
    )
    func appNetworkRefused() throws {
        let image = try AppImageRunTests.Image(executable: "sh", arguments: ["-c", "sleep 30"])
        var bundle = try Bundle()
        let sandbox = try Bundle()
        defer {
            _ = try? image.oci(["delete", "--force", image.id])
            _ = try? Self.oci(sandbox, ["delete", "--force", sandbox.id])
            image.remove()
            bundle.remove()
            sandbox.remove()
        }
        #expect(
            try image.oci(
                ["create", "--bundle", "\(image.directory)/bundle", image.id], detached: true
            )
            .code == 0)
        #expect(try image.oci(["start", image.id], detached: true).code == 0)
        func ownNamespace(_ pids: [pid_t]) -> String? {
            var host = stat()
            stat("/proc/self/ns/net", &host)
            return pids.map { "/proc/\($0)/ns/net" }.first { path in
                var info = stat()
                return stat(path, &info) == 0 && info.st_ino != host.st_ino
            }
        }
        let appPIDs = try image.oci(["ps", image.id]).stdout.split(whereSeparator: \.isWhitespace)
            .compactMap { pid_t($0) }
        let appNamespace = try #require(ownNamespace(appPIDs), "the app's pids: \(appPIDs)")
        bundle.appdConfiguration = ""
        func joining(_ path: String) -> (inout [String: Any]) -> Void {
            { config in
                config["linux"] = [
                    "namespaces": ["pid", "ipc", "uts", "mount"].map { ["type": $0] } + [
                        ["type": "network", "path": path]
                    ]
                ]
            }
        }
        try bundle.write(script: "echo joined", extra: joining(appNamespace))
        let refused = try Self.oci(bundle, ["run", "--bundle", bundle.bundle, bundle.id])
        Self.expectRefused(refused, "is an app's own")
        #expect(!refused.stdout.contains("joined"))

        // A pod's sandbox: another plain container's namespace.
        try sandbox.write(script: "busybox sleep 30")
        #expect(
            try Self.oci(
                sandbox, ["create", "--bundle", sandbox.bundle, sandbox.id], detached: true
            )
            .code == 0)
        let sandboxPIDs = try Self.oci(sandbox, ["ps", sandbox.id]).stdout.split(
            whereSeparator: \.isWhitespace
        ).compactMap { pid_t($0) }
        let podNamespace = try #require(ownNamespace(sandboxPIDs))
        try bundle.write(script: "echo joined", extra: joining(podNamespace))
        let joined = try Self.oci(bundle, ["run", "--bundle", bundle.bundle, bundle.id])
        #expect(joined.code == 0 && joined.stdout.contains("joined"), "\(joined.stderr)")
    }

    // MARK: the data volume

    @Test(
        "/appd/data from a system folder, or from a folder another user owns: refused at create, nothing made in it"
    )
    func dataVolumeSource() throws {
        let image = try AppImageRunTests.Image()
        let system = "/var/cache/appd-oci-trust-\(UUID().uuidString.prefix(8).lowercased())"
        let foreign = "\(image.directory)/foreign"
        let volume = "\(image.directory)/volume"
        defer {
            try? FileManager.default.removeItem(atPath: system)
            image.remove()
        }
        #expect(mkdir(system, 0o755) == 0 && mkdir(foreign, 0o755) == 0)
        #expect(chown(foreign, 1000, 1000) == 0 && mkdir(volume, 0o755) == 0)
        let config = "\(image.directory)/bundle/config.json"
        let original = try String(contentsOfFile: config, encoding: .utf8)
        for (source, named) in [
            (system, "lies in the system folder /var/cache"), (foreign, "is owned by uid 1000"),
            (volume, ""),
        ] {
            try original.replacingOccurrences(
                of: #""root":"#,
                with:
                    #""mounts": [{"destination": "/appd/data", "type": "bind", "source": "\#(source)", "options": ["rbind", "rw"]}], "root":"#
            ).write(toFile: config, atomically: true, encoding: .utf8)
            let result = try image.run()
            if named.isEmpty {
                #expect(result.code == 0, "\(result.stderr)")
                #expect(Self.listing(source).count == 1, "\(Self.listing(source))")
            } else {
                Self.expectRefused(result, "the volume at /appd/data", named)
                #expect(Self.listing(source).isEmpty, "\(Self.listing(source))")
            }
        }
    }

    // MARK: text output

    @Test("appd-oci list shows a bundle path's control and bidi characters as \\u{..}")
    func listEscapes() throws {
        let bundle = try Bundle()
        defer {
            _ = try? Self.oci(bundle, ["delete", "--force", bundle.id])
            bundle.remove()
        }
        try bundle.write(script: "busybox sleep 30")
        let hostile = "\(bundle.directory)/b\u{1B}]0;owned\u{07}\u{202E}x"
        #expect(rename(bundle.bundle, hostile) == 0)
        let created = try Self.oci(
            bundle, ["create", "--bundle", hostile, bundle.id], detached: true)
        #expect(created.code == 0, "\(created.stderr)")
        let listed = try Self.oci(bundle, ["list"]).stdout
        #expect(listed.contains(bundle.id), "\(listed)")
        #expect(
            !listed.contains("\u{1B}") && !listed.contains("\u{07}") && !listed.contains("\u{202E}")
        )
        #expect(listed.contains(#"b\u{1b}]0;owned\u{7}\u{202e}x"#), "\(listed)")
    }
}

/// The two lists of host folders no container is given (no root needed: paths only).
@Suite("HostPaths: system folders and appd's own state")
struct HostPathsTests {
    @Test(
        "a root filesystem or volume may not be, hold or lie in a system folder or appd's state; the engines' storage may be"
    )
    func rootsAndVolumes() throws {
        for path in [
            "/", "/var", "/run", "/etc", "/etc/ssh", "/home/alice/x", "/root/secret",
            "/var/lib/appd-oci", "/var/lib/appd-oci/x", "/run/appd-oci-userns", "/run/appd/x",
            "/var/lib/appd/Containers",
        ] {
            #expect(throws: AppdError.self, "\(path)") {
                try HostPaths.refuse(path, what: "t", stateRoot: "/run/appd-oci", system: true)
            }
        }
        for path in [
            "/var/lib/containers/storage/overlay/0a1b/merged",
            "/run/containerd/io.containerd.runtime.v2.task/k8s.io/abc/rootfs",
            "/var/lib/docker/overlay2/0a1b/merged", "/tmp/ocitest123", "/srv/volumes/data",
        ] {
            try HostPaths.refuse(path, what: "t", stateRoot: "/run/appd-oci", system: true)
        }
    }

    @Test("a bind may name a system folder, never appd's own state nor a folder holding it")
    func binds() throws {
        try HostPaths.refuse("/etc", what: "t", stateRoot: "/run/appd-oci", system: false)
        for path in ["/", "/run", "/var/lib", "/run/appd-oci/x", "/tmp/state"] {
            #expect(throws: AppdError.self, "\(path)") {
                try HostPaths.refuse(path, what: "t", stateRoot: "/tmp/state", system: false)
            }
        }
    }
}
