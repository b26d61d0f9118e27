import AppBundle
import AppdBase
import Foundation
import Testing

/// `appd image` as a developer runs it: a bundle signed with `appd sign`, the archive read back,
/// and (as root, with the engines scripts/oci-deps installs) loaded by podman and skopeo.
@Suite("appd image", .serialized)
struct ImageCommandTests {
    /// A signed Hello.app with a version the default tag takes, a subfolder and a symlink.
    static func signedBundle(_ scratch: Scratch, signer: Signer) throws -> String {
        let bundle = try makeBundle(
            at: scratch.sub("src/Hello.app"), id: "com.Example.Hello",
            extraFiles: ["Resources/greeting.txt": "hi\n"])
        try setShortVersion("1.2", in: bundle)
        symlink("Resources/greeting.txt", "\(bundle)/greeting")
        return try signer.sign(bundle)
    }

    static func setShortVersion(_ version: String, in bundle: String) throws {
        let url = URL(fileURLWithPath: "\(bundle)/Info.plist")
        var info =
            try PropertyListSerialization.propertyList(from: Data(contentsOf: url), format: nil)
            as? [String: Any] ?? [:]
        info["CFBundleShortVersionString"] = version
        try PropertyListSerialization.data(fromPropertyList: info, format: .xml, options: 0)
            .write(to: url)
    }

    static func folder(_ scratch: Scratch, _ name: String) throws -> String {
        try FileManager.default.createDirectory(
            atPath: scratch.sub(name), withIntermediateDirectories: false)
        return scratch.sub(name)
    }

    /// A config with no [Signing] AllowUnsigned (what a production host has).
    static func strictConfig(_ scratch: Scratch) throws -> String {
        let path = scratch.sub("strict.conf")
        try "".write(toFile: path, atomically: false, encoding: .utf8)
        return path
    }

    @Test("a signed bundle: the default tag, the entrypoint, the labels, the signer's key id")
    func signed() throws {
        let scratch = Scratch()
        let signer = try Signer()
        let bundle = try Self.signedBundle(scratch, signer: signer)
        let output = scratch.sub("hello.tar")
        let result = try runAppd(
            ["image", bundle, "-o", output, "--json"],
            environment: ["APPD_CONFIG": try Self.strictConfig(scratch)])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            result.stdout.contains(#""tag" : "appd/com.example.hello:1.2""#), "\(result.stdout)")
        let out = try Self.folder(scratch, "x")
        #expect(try runTool("/usr/bin/tar", ["-xf", output, "-C", out]).code == 0)
        let manifest = try String(contentsOfFile: "\(out)/manifest.json", encoding: .utf8)
        #expect(manifest.contains(#""RepoTags":["appd/com.example.hello:1.2"]"#))
        let configName = try FileManager.default.contentsOfDirectory(atPath: out)
            .first { $0.hasSuffix(".json") && $0 != "manifest.json" }
        let config = try String(contentsOfFile: "\(out)/\(configName ?? "")", encoding: .utf8)
        #expect(config.contains(#""Entrypoint":["/Hello.app/Hello"]"#))
        #expect(config.contains(#""org.appd.bundle-id":"com.Example.Hello""#))
        #expect(config.contains(#""org.appd.signer-key":"\#(signer.keyID)""#))
        #expect(config.contains(#""org.appd.version":"1.2""#))
        // The layer: the bundle, signature included, under Hello.app/, 0:0, the link a link.
        let layer = try runTool(
            "/usr/bin/tar", ["--numeric-owner", "-tvf", "\(out)/\(try layerFolder(out))/layer.tar"])
        #expect(layer.code == 0, "\(layer.output)")
        let lines = layer.output.split(separator: "\n")
        #expect(lines.allSatisfy { $0.contains(" 0/0 ") })
        #expect(lines.contains { $0.hasSuffix("Hello.app/greeting -> Resources/greeting.txt") })
        #expect(lines.contains { $0.hasPrefix("-rwxr-xr-x") && $0.hasSuffix(" Hello.app/Hello") })
        #expect(lines.contains { $0.hasSuffix(" Hello.app/_CodeSignature/Signature") })
        // `mode 0/0 size date time NAME[ -> TARGET]`: every name under Hello.app/.
        #expect(lines.count == 10, "\(layer.output)")
        #expect(
            lines.allSatisfy {
                $0.split(separator: " ").dropFirst(5).first?.hasPrefix("Hello.app/") == true
            })
    }

    /// The image config of a docker-archive `appd image` wrote, as JSON.
    func imageConfig(of archive: String, _ scratch: Scratch, _ name: String) throws -> [String: Any]
    {
        let out = try Self.folder(scratch, name)
        #expect(try runTool("/usr/bin/tar", ["-xf", archive, "-C", out]).code == 0)
        let configName = try FileManager.default.contentsOfDirectory(atPath: out)
            .first { $0.hasSuffix(".json") && $0 != "manifest.json" }
        let data = try Data(contentsOf: URL(fileURLWithPath: "\(out)/\(configName ?? "")"))
        return try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
    }

    @Test(
        "User is a numeric uid that is not root; Created is SOURCE_DATE_EPOCH, else the bundle's newest file, and the same bundle still gives the same bytes"
    )
    func userAndCreated() throws {
        let scratch = Scratch()
        let bundle = try Self.signedBundle(scratch, signer: try Signer())
        // Every file of the bundle last changed at 2020-09-13T12:26:40Z but one, a minute later.
        let files = try FileManager.default.subpathsOfDirectory(atPath: bundle)
        for file in files {
            var times = [
                timespec(tv_sec: 1_600_000_000, tv_nsec: 0),
                timespec(tv_sec: 1_600_000_000, tv_nsec: 0),
            ]
            utimensat(AT_FDCWD, "\(bundle)/\(file)", &times, AT_SYMLINK_NOFOLLOW)
        }
        var later = [
            timespec(tv_sec: 1_600_000_060, tv_nsec: 0),
            timespec(tv_sec: 1_600_000_060, tv_nsec: 0),
        ]
        utimensat(AT_FDCWD, "\(bundle)/Resources/greeting.txt", &later, 0)
        let strict = try Self.strictConfig(scratch)
        let first = scratch.sub("first.tar")
        let second = scratch.sub("second.tar")
        for output in [first, second] {
            let result = try runAppd(
                ["image", bundle, "-o", output],
                environment: ["APPD_CONFIG": strict, "SOURCE_DATE_EPOCH": ""])
            #expect(result.status == 0, "\(result.stderr)")
        }
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: first))
                == Data(contentsOf: URL(fileURLWithPath: second)))
        let config = try imageConfig(of: first, scratch, "first")
        #expect(config["created"] as? String == "2020-09-13T12:27:40Z", "\(config)")
        let user = (config["config"] as? [String: Any])?["User"] as? String
        #expect(user == "65534:65534")
        // SOURCE_DATE_EPOCH wins; a value that is not a number of seconds is refused.
        let epoch = scratch.sub("epoch.tar")
        let dated = try runAppd(
            ["image", bundle, "-o", epoch],
            environment: ["APPD_CONFIG": strict, "SOURCE_DATE_EPOCH": "1700000000"])
        #expect(dated.status == 0, "\(dated.stderr)")
        #expect(
            try imageConfig(of: epoch, scratch, "epoch")["created"] as? String
                == "2023-11-14T22:13:20Z")
        let bad = try runAppd(
            ["image", bundle, "-o", scratch.sub("bad.tar")],
            environment: ["APPD_CONFIG": strict, "SOURCE_DATE_EPOCH": "yesterday"])
        #expect(bad.status == 1)
        #expect(bad.stderr.contains("SOURCE_DATE_EPOCH 'yesterday'"), "\(bad.stderr)")
    }

    func layerFolder(_ extracted: String) throws -> String {
        try FileManager.default.contentsOfDirectory(atPath: extracted)
            .first { !$0.contains(".") && $0 != "repositories" } ?? ""
    }

    @Test("a bundle changed after signing is refused as verify refuses it; nothing is written")
    func tampered() throws {
        let scratch = Scratch()
        let bundle = try Self.signedBundle(scratch, signer: try Signer())
        try "changed\n".write(
            toFile: "\(bundle)/Resources/greeting.txt", atomically: false, encoding: .utf8)
        let out = try Self.folder(scratch, "out")
        let result = try runAppd(["image", bundle, "-o", "\(out)/hello.tar"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("does not match its code signature"), "\(result.stderr)")
        #expect(result.stderr.contains("Resources/greeting.txt: was changed after signing"))
        #expect(entries(out) == [])
    }

    @Test("an unsigned bundle is refused unless [Signing] AllowUnsigned=yes, as install decides")
    func unsigned() throws {
        let scratch = Scratch()
        let bundle = try makeBundle(at: scratch.sub("src/Hello.app"))
        let out = try Self.folder(scratch, "out")
        let refused = try runAppd(
            ["image", bundle, "-o", "\(out)/hello.tar"],
            environment: ["APPD_CONFIG": try Self.strictConfig(scratch)])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("com.example.hello is not signed"), "\(refused.stderr)")
        #expect(refused.stderr.contains("AllowUnsigned=yes"))
        #expect(entries(out) == [])
        // runAppd's default configuration allows unsigned bundles (development).
        let allowed = try runAppd([
            "image", bundle, "-o", "\(out)/hello.tar", "--tag", "localhost/x:1",
        ])
        #expect(allowed.status == 0, "\(allowed.stderr)")
        #expect(entries(out) == ["hello.tar"])
    }

    @Test("--tag: a reference the engines cannot read is refused, naming the part")
    func badTag() throws {
        let scratch = Scratch()
        let bundle = try makeBundle(at: scratch.sub("src/Hello.app"))
        let out = try Self.folder(scratch, "out")
        let result = try runAppd([
            "image", bundle, "-o", "\(out)/hello.tar", "--tag", "Appd/Hello:1",
        ])
        #expect(result.status == 1)
        #expect(
            result.stderr.contains(
                "image reference 'Appd/Hello:1': the name component 'Appd' must be lower-case"),
            "\(result.stderr)")
        #expect(entries(out) == [])
        let format = try runAppd(["image", bundle, "-o", "\(out)/hello.tar", "--format", "zip"])
        #expect(
            format.status == 1
                && format.stderr.contains("--format 'zip': the formats are docker and oci"),
            "\(format.stderr)")
        #expect(entries(out) == [])
    }

    @Test(
        "podman loads the image with its tag and entrypoint; skopeo inspects the archive",
        rootOnly)
    func engines() throws {
        let tools = ["/usr/bin/podman", "/usr/bin/skopeo"]
        let missing = tools.filter { !FileManager.default.isExecutableFile(atPath: $0) }
        guard missing.isEmpty else {
            // Not a pass: say what is missing (scripts/oci-deps installs them).
            if rootTestsRequired { Issue.record("missing \(missing); run scripts/oci-deps") }
            return
        }
        let scratch = Scratch()
        let bundle = try Self.signedBundle(scratch, signer: try Signer())
        let output = scratch.sub("hello.tar")
        let made = try runAppd([
            "image", bundle, "-o", output, "--tag", "localhost/appd-test/hello:1.2", "--json",
        ])
        #expect(made.status == 0, "\(made.stderr)")

        let skopeo = try runTool("/usr/bin/skopeo", ["inspect", "docker-archive:\(output)"])
        #expect(skopeo.code == 0, "\(skopeo.output)")
        #expect(skopeo.output.contains("\"org.appd.bundle-id\": \"com.Example.Hello\""))

        // A private store (vfs: no mounts), removed with the scratch directory.
        let podman = [
            "--root", scratch.sub("podman/root"), "--runroot", scratch.sub("podman/run"),
            "--tmpdir", scratch.sub("podman/tmp"), "--storage-driver", "vfs",
            "--events-backend", "none",
        ]
        defer { _ = try? runTool("/usr/bin/podman", podman + ["rmi", "--all", "--force"]) }
        let load = try runTool("/usr/bin/podman", podman + ["load", "-i", output])
        #expect(load.code == 0, "\(load.output)")
        #expect(
            load.output.contains("Loaded image: localhost/appd-test/hello:1.2"), "\(load.output)")
        let inspect = try runTool(
            "/usr/bin/podman",
            podman + [
                "image", "inspect", "localhost/appd-test/hello:1.2", "--format",
                "{{json .RepoTags}} {{json .Config.Entrypoint}} {{index .Labels \"org.appd.version\"}} {{.Config.User}}",
            ])
        #expect(inspect.code == 0, "\(inspect.output)")
        #expect(
            inspect.output.trimmingCharacters(in: .whitespacesAndNewlines)
                == #"["localhost/appd-test/hello:1.2"] ["/Hello.app/Hello"] 1.2 65534:65534"#)
        // When it was made (the bundle was just signed), not 1970's "56 years ago".
        let since = try runTool(
            "/usr/bin/podman",
            podman + [
                "images", "--format", "{{.CreatedSince}}", "localhost/appd-test/hello:1.2",
            ])
        #expect(since.code == 0, "\(since.output)")
        #expect(!since.output.contains("years"), "\(since.output)")

        // --format oci: the same image (the same config, so the same ID) through oci-archive:.
        let oci = scratch.sub("hello-oci.tar")
        let madeOCI = try runAppd([
            "image", bundle, "-o", oci, "--tag", "localhost/appd-test/hello-oci:1.2", "--format",
            "oci", "--json",
        ])
        #expect(madeOCI.status == 0, "\(madeOCI.stderr)")
        #expect(
            madeOCI.stdout.split(separator: "\n").first { $0.contains("imageID") }
                == made.stdout.split(separator: "\n").first { $0.contains("imageID") })
        let skopeoOCI = try runTool("/usr/bin/skopeo", ["inspect", "oci-archive:\(oci)"])
        #expect(skopeoOCI.code == 0, "\(skopeoOCI.output)")
        #expect(skopeoOCI.output.contains("\"org.appd.bundle-id\": \"com.Example.Hello\""))
        let loadOCI = try runTool("/usr/bin/podman", podman + ["load", "-i", oci])
        #expect(loadOCI.code == 0, "\(loadOCI.output)")
        let inspectOCI = try runTool(
            "/usr/bin/podman",
            podman + [
                "image", "inspect", "localhost/appd-test/hello-oci:1.2", "--format",
                "{{json .Config.Entrypoint}}",
            ])
        #expect(
            inspectOCI.output.trimmingCharacters(in: .whitespacesAndNewlines)
                == #"["/Hello.app/Hello"]"#, "\(inspectOCI.output)")
    }

    @Test(
        "ctr images import takes both formats and unpacks the bundle at /Hello.app, 0:0",
        rootOnly)
    func containerd() throws {
        let tools = ["/usr/bin/containerd", "/usr/bin/ctr", "/usr/bin/unshare"]
        let missing = tools.filter { !FileManager.default.isExecutableFile(atPath: $0) }
        guard missing.isEmpty else {
            if rootTestsRequired { Issue.record("missing \(missing); run scripts/oci-deps") }
            return
        }
        let scratch = Scratch()
        let bundle = try Self.signedBundle(scratch, signer: try Signer())
        for (file, format) in [("d.tar", "docker"), ("o.tar", "oci")] {
            let made = try runAppd([
                "image", bundle, "-o", scratch.sub(file), "--format", format, "--tag",
                "localhost/appd-test/hello-\(format):1.2",
            ])
            #expect(made.status == 0, "\(made.stderr)")
        }
        // A private containerd (its own root, state and socket; no CRI) in a mount namespace of
        // its own, so that nothing it mounts reaches the host's; the native snapshotter
        // unpacks into plain directories.
        let socket = scratch.sub("c.sock")
        try """
        version = 2
        root = "\(scratch.sub("root"))"
        state = "\(scratch.sub("state"))"
        disabled_plugins = ["io.containerd.grpc.v1.cri"]
        [grpc]
          address = "\(socket)"
        [ttrpc]
          address = "\(socket).ttrpc"
        [plugins."io.containerd.internal.v1.opt"]
          path = "\(scratch.sub("opt"))"
        """.write(toFile: scratch.sub("config.toml"), atomically: false, encoding: .utf8)
        let daemon = try ChildProcess(
            "/usr/bin/unshare",
            [
                "-m", "--propagation", "private", "/usr/bin/containerd", "--config",
                scratch.sub("config.toml"),
            ], stdout: .discard)
        defer {
            daemon.signal(SIGTERM)
            daemon.waitUntilExit()
        }
        let ctr = ["-a", socket, "-n", "appd-image-test"]
        #expect(eventually { (try? runTool("/usr/bin/ctr", ctr + ["version"]).code) == 0 })
        for file in ["d.tar", "o.tar"] {
            let imported = try runTool(
                "/usr/bin/ctr",
                ctr + ["images", "import", "--snapshotter", "native", scratch.sub(file)])
            #expect(imported.code == 0 && imported.output.contains("done"), "\(imported.output)")
        }
        let images = try runTool("/usr/bin/ctr", ctr + ["images", "ls", "-q"])
        #expect(
            images.output.split(separator: "\n").sorted() == [
                "localhost/appd-test/hello-docker:1.2", "localhost/appd-test/hello-oci:1.2",
            ])
        // Both unpack to the same one snapshot (the same layer): the bundle and nothing else.
        let snapshots = scratch.sub("root/io.containerd.snapshotter.v1.native/snapshots")
        let unpacked = entries(snapshots)
        #expect(unpacked.count == 1)
        let root = "\(snapshots)/\(unpacked.first ?? "")"
        #expect(entries(root) == ["Hello.app"])
        let executable = statOf("\(root)/Hello.app/Hello")
        #expect(executable?.st_uid == 0 && executable?.st_gid == 0)
        #expect((executable?.st_mode ?? 0) & 0o7777 == 0o755)
        #expect(
            (try? FileManager.default.destinationOfSymbolicLink(
                atPath: "\(root)/Hello.app/greeting"))
                == "Resources/greeting.txt")
        _ = try runTool(
            "/usr/bin/ctr",
            ctr + [
                "images", "rm", "localhost/appd-test/hello-docker:1.2",
                "localhost/appd-test/hello-oci:1.2",
            ])
    }
}
