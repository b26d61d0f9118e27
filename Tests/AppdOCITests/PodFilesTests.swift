import Foundation
import Glibc
import TestSupport
import Testing

@testable import appd_oci

/// The pod's resolv.conf, hosts and hostname (docs/oci-runtime.md, "The pod's DNS and
/// hostname"): an engine binds its files at exactly those three destinations and gives the
/// pod's hostname; `appd-oci` is called as the engine calls it, with such a config.json.
@Suite("appd-oci: the pod's resolv.conf, hosts and hostname", .serialized, rootOnly)
struct PodFilesTests {
    /// The engine's three files, as containerd's CRI writes them for a pod with a dnsConfig.
    struct EngineFiles {
        let directory: String
        var resolv: String { "\(directory)/resolv.conf" }
        var hosts: String { "\(directory)/hosts" }
        var hostname: String { "\(directory)/hostname" }

        init() throws {
            directory =
                FileManager.default.temporaryDirectory.appendingPathComponent(
                    "appd-oci-podfiles-\(UUID().uuidString)"
                ).path
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true)
            chmod(directory, 0o755)
            try
                "search appd-harness.svc.cluster.local svc.cluster.local\nnameserver 10.213.0.53\noptions ndots:5\n"
                .write(toFile: resolv, atomically: true, encoding: .utf8)
            try "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n10.213.0.7\tweb-0\n"
                .write(toFile: hosts, atomically: true, encoding: .utf8)
            try "web-0\n".write(toFile: hostname, atomically: true, encoding: .utf8)
            for file in [resolv, hosts, hostname] { chmod(file, 0o644) }
        }

        /// config.json's mounts for the three files, as the engines write them (`rbind`, and
        /// `rw` for hosts and resolv.conf as containerd passes them).
        func mounts(
            hosts hostsSource: String? = nil, resolv resolvSource: String? = nil
        ) -> [[String: Any]] {
            [
                [
                    "destination": "/etc/hosts", "type": "bind", "source": hostsSource ?? hosts,
                    "options": ["rbind", "rprivate", "rw"],
                ],
                [
                    "destination": "/etc/hostname", "type": "bind", "source": hostname,
                    "options": ["rbind", "rprivate", "rw"],
                ],
                [
                    "destination": "/etc/resolv.conf", "type": "bind",
                    "source": resolvSource ?? resolv, "options": ["rbind", "rprivate", "rw"],
                ],
            ]
        }

        func remove() { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// An app image (busybox as Echo.app/sh) whose config.json holds the engine's mounts.
    static func appImage(
        _ files: EngineFiles, script: String, hostname: String = "web-0",
        mounts: [[String: Any]]? = nil, base: URL = FileManager.default.temporaryDirectory
    ) throws -> AppImageRunTests.Image {
        let image = try AppImageRunTests.Image(
            executable: "sh", arguments: ["-c", script], base: base)
        let config: [String: Any] = [
            "ociVersion": "1.0.2", "root": ["path": "rootfs"], "hostname": hostname,
            "process": [
                "args": ["/Echo.app/sh", "-c", script], "cwd": "/",
                "env": ["PATH=/usr/bin:/bin", "HOSTNAME=\(hostname)"],
            ],
            "mounts": mounts ?? files.mounts(),
            "linux": [
                "namespaces": ["pid", "network", "ipc", "uts", "mount"].map { ["type": $0] }
            ],
        ]
        try JSONSerialization.data(withJSONObject: config).write(
            to: URL(fileURLWithPath: "\(image.directory)/bundle/config.json"))
        return image
    }

    /// `show FILE`: the file's lines through the shell's builtins only (an app runs its bundle's
    /// programs, not the host's `cat`).
    static let showFunction =
        "show() { while IFS= read -r line || [ -n \"$line\" ]; do echo \"$line\"; done < \"$1\"; }; "

    static let show =
        showFunction
        + "show /etc/resolv.conf; echo --; show /etc/hosts; echo --; show /etc/hostname; echo --; show /proc/sys/kernel/hostname; echo \"$HOSTNAME\""

    @Test(
        "an app reads the pod's resolv.conf, hosts and hostname file; its uts hostname is the pod's"
    )
    func appGetsPodFiles() throws {
        let files = try EngineFiles()
        defer { files.remove() }
        let image = try Self.appImage(files, script: Self.show)
        defer { image.remove() }
        let result = try image.run()
        #expect(result.code == 0, "\(result.stderr)")
        let parts = result.stdout.components(separatedBy: "--\n")
        #expect(parts.count == 4, "\(result.stdout)")
        guard parts.count == 4 else { return }
        #expect(parts[0] == (try String(contentsOfFile: files.resolv, encoding: .utf8)))
        #expect(parts[1] == (try String(contentsOfFile: files.hosts, encoding: .utf8)))
        #expect(parts[2] == "web-0\n")
        #expect(parts[3] == "web-0\nweb-0\n", "uname's node name and $HOSTNAME: \(parts[3])")
        image.expectNothingLeft()
    }

    @Test(
        "a pod's container without config.json's hostname (containerd's CRI gives it the pause container only): the hostname is the pod's /etc/hostname's"
    )
    func hostnameFromPodFile() throws {
        let files = try EngineFiles()
        defer { files.remove() }
        let image = try Self.appImage(
            files, script: Self.showFunction + "show /proc/sys/kernel/hostname", hostname: "")
        defer { image.remove() }
        let result = try image.run()
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout == "web-0\n", "\(result.stdout)")
    }

    @Test("an app container's /tmp is its data container's tmp: written there, not executable")
    func appTmp() throws {
        let files = try EngineFiles()
        defer { files.remove() }
        let image = try Self.appImage(
            files,
            script: Self.showFunction
                + "echo in-tmp > /tmp/note && show /tmp/note && show \"$TMPDIR/note\"; echo '#!/Echo.app/sh' > /tmp/run; chmod 755 /tmp/run 2>/dev/null; /tmp/run && echo executed",
            // Its data container outside the host's /tmp, as under /run/appd-oci.
            base: URL(fileURLWithPath: "/var/tmp"))
        defer { image.remove() }
        let result = try image.run()
        #expect(result.stdout.hasPrefix("in-tmp\nin-tmp\n"), "\(result.stdout)\(result.stderr)")
        #expect(!result.stdout.contains("executed"), "\(result.stdout)")
    }

    @Test("the pod's files are read-only to the app")
    func appCannotWritePodFiles() throws {
        let files = try EngineFiles()
        defer { files.remove() }
        let image = try Self.appImage(
            files, script: "echo 'nameserver 6.6.6.6' >> /etc/resolv.conf && echo written")
        defer { image.remove() }
        let result = try image.run()
        #expect(result.code != 0 && !result.stdout.contains("written"), "\(result.stdout)")
        #expect(!(try String(contentsOfFile: files.resolv, encoding: .utf8)).contains("6.6.6.6"))
    }

    @Test(
        "attack: a host file bound at /etc/hosts or /etc/resolv.conf is refused at create, naming it",
        arguments: [("/etc/hosts", "/etc/shadow"), ("/etc/resolv.conf", "/etc/passwd")])
    func hostFileRefused(destination: String, source: String) throws {
        let files = try EngineFiles()
        defer { files.remove() }
        let mounts =
            destination == "/etc/hosts"
            ? files.mounts(hosts: source) : files.mounts(resolv: source)
        let image = try Self.appImage(
            files, script: Self.showFunction + "show \(destination)", mounts: mounts)
        defer { image.remove() }
        let result = try image.run()
        #expect(result.code != 0)
        #expect(result.stdout.isEmpty, "the app ran: \(result.stdout)")
        #expect(
            result.stderr.contains("binds \(source) at \(destination)")
                && result.stderr.contains("is not a"), "\(result.stderr)")
        image.expectNothingLeft()
    }

    @Test("attack: a hostname that is not one is refused at create")
    func badHostnameRefused() throws {
        let files = try EngineFiles()
        defer { files.remove() }
        let image = try Self.appImage(files, script: "true", hostname: "web/../\u{1b}[2J")
        defer { image.remove() }
        let result = try image.run()
        #expect(result.code != 0)
        #expect(result.stderr.contains("is not a hostname"), "\(result.stderr)")
        #expect(!result.stderr.contains("\u{1b}"), "an escape reached the terminal")
        image.expectNothingLeft()
    }

    @Test("a plain container reads the pod's files, read-only, and has the pod's hostname")
    func plainGetsPodFiles() throws {
        let files = try EngineFiles()
        defer { files.remove() }
        var bundle = try PlainContainerTests.Bundle()
        defer { bundle.remove() }
        bundle.appdConfiguration = ""
        try bundle.write(
            script:
                "busybox cat /etc/resolv.conf /etc/hosts /etc/hostname; busybox hostname; echo x >> /etc/hosts && echo written"
        ) { config in
            config["hostname"] = "web-0"
            config["mounts"] = (config["mounts"] as? [[String: Any]] ?? []) + files.mounts()
        }
        let result = try bundle.oci(["run", "--bundle", bundle.bundle, bundle.id])
        let expected =
            (try String(contentsOfFile: files.resolv, encoding: .utf8))
            + (try String(contentsOfFile: files.hosts, encoding: .utf8)) + "web-0\nweb-0\n"
        #expect(result.stdout.hasPrefix(expected), "\(result.stdout)\(result.stderr)")
        #expect(!result.stdout.contains("written"), "\(result.stdout)")
        #expect(!(try String(contentsOfFile: files.hosts, encoding: .utf8)).contains("x\n"))
    }

    @Test("the shapes of the three files: what the engines write passes, a host secret does not")
    func shapes() {
        #expect(
            PodFiles.firstForeignLine(
                Array(
                    "# from kubelet\nnameserver 10.96.0.10\nsearch a.svc b\noptions ndots:5\n".utf8),
                as: "/etc/resolv.conf") == nil)
        #expect(
            PodFiles.firstForeignLine(
                Array("127.0.0.1 localhost\nfe00::0\tip6-localnet\n10.1.2.3\tweb-0 # pod\n".utf8),
                as: "/etc/hosts") == nil)
        #expect(PodFiles.firstForeignLine(Array("web-0\n".utf8), as: "/etc/hostname") == nil)
        #expect(
            PodFiles.firstForeignLine(
                Array("root:$y$j9T$abc:19000:0:99999:7:::\n".utf8), as: "/etc/hosts") == 1)
        #expect(
            PodFiles.firstForeignLine(
                Array("nameserver 1.1.1.1\n-----BEGIN PRIVATE KEY-----\n".utf8),
                as: "/etc/resolv.conf") == 2)
        #expect(PodFiles.firstForeignLine(Array("a\nb\n".utf8), as: "/etc/hostname") == 2)
        #expect(PodFiles.firstForeignLine([0x6e, 0, 0x0a], as: "/etc/resolv.conf") == 1)
    }
}
