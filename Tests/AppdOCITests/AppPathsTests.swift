import Foundation
import Glibc
import TestSupport
import Testing

/// What an app in a container sees of its own paths (issue 37, AppPaths): the image's
/// `/Name.app` and `/appd/data`, never the host's rootfs or data paths, asked from inside a
/// container appd-oci runs as an engine runs it.
@Suite("appd-oci: an app sees /Name.app and /appd/data, not host paths", .serialized, rootOnly)
struct AppPathsTests {
    /// Shell builtins only: nothing of the host is executable to the app.
    static func script(hostRootfs: String) -> String {
        """
        echo "home=$HOME bundle=$APPD_BUNDLE_PATH tmpdir=$TMPDIR pwd=$(pwd)"
        { read root; read user; echo "passwd=$user"; } < /etc/passwd
        echo "bundle-files=$(echo /Echo.app/*)"
        echo note > "$HOME/Documents/n" && { read v < "$HOME/Documents/n"; echo "documents=$v"; }
        echo t > /tmp/t && { read v < "$HOME/tmp/t"; echo "tmp=$v"; }
        test -e '\(hostRootfs)/Echo.app' && echo host-rootfs-visible || echo host-rootfs-hidden
        (echo x > /Echo.app/x) 2>/dev/null && echo bundle-writable || echo bundle-read-only
        """
    }

    @Test("HOME, APPD_BUNDLE_PATH, the passwd entry and the working folder are the image's paths")
    func imagePaths() throws {
        let image = try AppImageRunTests.Image(executable: "sh", arguments: ["-c", "true"])
        defer { image.remove() }
        // The script needs the rootfs path the sandbox must hide: known only now.
        try Self.rewriteArguments(image, ["-c", Self.script(hostRootfs: image.rootfs)])
        let result = try image.run()
        #expect(result.code == 0, "\(result.stderr)")
        let out = result.stdout
        #expect(
            out.contains("home=/appd/data bundle=/Echo.app tmpdir=/appd/data/tmp/ pwd=/appd/data"),
            "\(out)")
        #expect(out.contains(":/appd/data:/bin/sh"), "\(out)")
        #expect(out.contains("/Echo.app/Info.plist"), "\(out)")
        #expect(out.contains("documents=note"), "\(out)")
        #expect(out.contains("tmp=t"), "\(out)")
        #expect(out.contains("host-rootfs-hidden"), "\(out)")
        #expect(out.contains("bundle-read-only"), "\(out)")
        #expect(!out.contains(image.directory), "a host path shown to the app: \(out)")
    }

    @Test("with a volume at /appd/data: the same paths, the data container kept in the volume")
    func volume() throws {
        let image = try AppImageRunTests.Image(executable: "sh", arguments: ["-c", "true"])
        defer { image.remove() }
        let volume = "\(image.directory)/volume"
        mkdir(volume, 0o755)
        try Self.rewriteArguments(
            image, ["-c", Self.script(hostRootfs: image.rootfs)],
            mounts:
                #"[{"destination": "/appd/data", "type": "bind", "source": "\#(volume)", "options": ["rbind", "rw"]}]"#
        )
        let result = try image.run()
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout.contains("home=/appd/data bundle=/Echo.app"), "\(result.stdout)")
        #expect(!result.stdout.contains(volume), "the volume's host path shown: \(result.stdout)")
        let kept = try FileManager.default.contentsOfDirectory(atPath: volume)
        #expect(kept.count == 1, "\(kept)")
        #expect(
            FileManager.default.fileExists(atPath: "\(volume)/\(kept.first ?? "")/Documents/n"))
    }

    @Test(
        "a volume podman chowned to the image's User (nobody) is taken when the config runs the image as nobody; attack: owned by another user, or nobody's for a config that says root, refused"
    )
    func volumeOwnedByImageUser() throws {
        let image = try AppImageRunTests.Image(executable: "sh", arguments: ["-c", "true"])
        defer { image.remove() }
        let volume = "\(image.directory)/volume"
        mkdir(volume, 0o755)
        let mounts =
            #"[{"destination": "/appd/data", "type": "bind", "source": "\#(volume)", "options": ["rbind", "rw"]}]"#
        let script = ["-c", "echo x > $HOME/Documents/n && echo wrote"]
        func run(owner: uid_t, user: UInt32) throws -> (code: Int32, stdout: String, stderr: String)
        {
            chown(volume, owner, owner)
            try Self.rewriteArguments(image, script, mounts: mounts, user: user)
            return try image.run()
        }
        let nobody = try run(owner: 65534, user: 65534)
        #expect(nobody.code == 0 && nobody.stdout == "wrote\n", "\(nobody.stderr)")
        for entry in try FileManager.default.contentsOfDirectory(atPath: volume) {
            try FileManager.default.removeItem(atPath: "\(volume)/\(entry)")
        }
        let asRoot = try run(owner: 65534, user: 0)
        #expect(asRoot.code != 0)
        #expect(asRoot.stderr.contains("is owned by uid 65534"), "\(asRoot.stderr)")
        let other = try run(owner: 1234, user: 65534)
        #expect(other.code != 0)
        #expect(other.stderr.contains("is owned by uid 1234"), "\(other.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: volume).isEmpty)
    }

    @Test("appd-oci exec of /Echo.app/sh runs the bundle's program at the image's path")
    func execPath() throws {
        let image = try AppImageRunTests.Image(executable: "sh", arguments: ["-c", "sleep 30"])
        defer {
            _ = try? image.oci(["delete", "--force", image.id])
            image.remove()
        }
        #expect(
            try image.oci(
                ["create", "--bundle", "\(image.directory)/bundle", image.id], detached: true
            ).code == 0)
        #expect(try image.oci(["start", image.id], detached: true).code == 0)
        let exec = try image.oci(["exec", image.id, "/Echo.app/sh", "-c", "echo $0 $HOME"])
        #expect(exec.code == 0, "\(exec.stderr)")
        #expect(exec.stdout == "/Echo.app/sh /appd/data\n", "\(exec.stdout)")
    }

    /// config.json's process.args after the executable, and its mounts.
    static func rewriteArguments(
        _ image: AppImageRunTests.Image, _ arguments: [String], mounts: String? = nil,
        user: UInt32? = nil
    ) throws {
        let path = "\(image.directory)/bundle/config.json"
        var config =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path)))
            as? [String: Any] ?? [:]
        var process = config["process"] as? [String: Any] ?? [:]
        let args = process["args"] as? [String] ?? []
        process["args"] = Array(args.prefix(1)) + arguments
        if let user { process["user"] = ["uid": user, "gid": user] }
        config["process"] = process
        if let mounts {
            config["mounts"] = try JSONSerialization.jsonObject(with: Data(mounts.utf8))
        }
        try JSONSerialization.data(withJSONObject: config).write(to: URL(fileURLWithPath: path))
    }
}
