import AppdAPI
import AppdBase
import AppdClient
import Foundation
import Testing

/// Issue 13 §4: application groups across signers, against a real daemon with two real keys.
/// The daemon's own key (`test`) may use `group.com.example.*`; a second key (`other`) may use
/// any `group.*`, so the two overlap as an admin's patterns could: the binding decides.
@Suite("application groups belong to one signer, and go with their last app", .serialized, rootOnly)
struct GroupIsolationTests {
    static let shared = "group.com.example.shared"

    /// A second signer's key, made with appd keygen outside the daemon's directory.
    final class OtherKey {
        let directory: String
        var signingKey: String { "\(directory)/other.signing-key" }
        var publicKey: String { "\(directory)/other.public-key" }
        init() throws {
            var template = Array("/var/tmp/appd-other-key.XXXXXX".utf8CString)
            guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil
            else {
                throw POSIXError(.EIO)
            }
            directory = String(
                decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
            try TestDaemon.tool(["keygen", "--out", directory, "--name", "other"])
        }
        deinit { try? FileManager.default.removeItem(atPath: directory) }
    }

    static func config(other: OtherKey, extra: String = "") -> String {
        """
        \(extra)
        [Signer test-groups]
        Key=test.public-key
        BundleIDs=com.example.*
        Groups=group.com.example.*
        [Signer other]
        Key=\(other.publicKey)
        BundleIDs=com.example.*
        Entitlements=*
        Groups=group.*
        HostExecutables=/bin/sh /bin/cat /bin/mkdir
        """
    }

    /// Probe.app with `id` using `groups`, signed with `key` (nil: unsigned); returns its path.
    static func bundle(_ daemon: TestDaemon, _ id: String, groups: [String], key: String?) throws
        -> String
    {
        // Its tests run the host's shell, cat and mkdir in the app's sandbox.
        let bundle = try daemon.makeProbe(
            id, info: TestDaemon.hostExecutables(["/bin/sh", "/bin/cat", "/bin/mkdir"]))
        let list = groups.map { "<string>\($0)</string>" }.joined()
        try """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0"><dict><key>com.apple.security.app-sandbox</key><true/>
        <key>com.apple.security.application-groups</key><array>\(list)</array></dict></plist>
        """.write(toFile: "\(bundle)/Entitlements.plist", atomically: true, encoding: .utf8)
        if let key { try TestDaemon.tool(["sign", "--key", key, bundle]) }
        return bundle
    }

    static func install(_ daemon: TestDaemon, _ id: String, groups: [String], key: String?) throws
        -> (code: Int32, output: String)
    {
        try daemon.run("appd", ["install", try bundle(daemon, id, groups: groups, key: key)])
    }

    /// Launches `id` with `arguments`, waits for it, returns its output.
    static func run(_ daemon: TestDaemon, _ id: String, _ arguments: [String]) throws -> String {
        let instance = try daemon.launch(id, arguments)
        _ = try daemon.wait(instance.id)
        return try daemon.logs(instance.id)
    }

    static func apiError(_ body: () throws -> Void) -> AppdError? {
        do { try body() } catch let error as AppdError { return error } catch {}
        return nil
    }

    static func groupPath(_ daemon: TestDaemon, _ id: String, _ group: String) throws -> String {
        try daemon.client.get("/v1/apps/\(id)/containers/group/\(group)", as: APIContainer.self)
            .path
    }

    @Test(
        "the second signer's app is refused the first signer's group, naming the group and its owner; appd verify says the same"
    )
    func secondSignerRefused() throws {
        let other = try OtherKey()
        let daemon = try TestDaemon(config: Self.config(other: other))
        let first = try Self.install(
            daemon, "com.example.first", groups: [Self.shared], key: daemon.signingKey)
        #expect(first.code == 0, "\(first.output)")
        let owner = try #require(
            try daemon.client.get("/v1/apps/com.example.first", as: APIApp.self).signer)

        let claim = try Self.bundle(
            daemon, "com.example.second", groups: ["Group.com.example.SHARED"],
            key: other.signingKey)
        let refused = try daemon.run("appd", ["install", claim])
        #expect(refused.code == 1)
        #expect(
            refused.output.contains(
                "may not use application groups of another signer: 'group.com.example.shared' belongs to key \(owner) (signer '"
            ), "\(refused.output)")
        #expect(
            try daemon.client.get("/v1/apps", as: [APIApp].self).map(\.bundleId) == [
                "com.example.first"
            ])

        let verify = try daemon.run("appd", ["verify", "--config", daemon.configPath, claim])
        #expect(
            verify.output.contains("would be refused")
                && verify.output.contains("belongs to key \(owner)"), "\(verify.output)")
        let verifyFirst = try daemon.run(
            "appd",
            [
                "verify", "--config", daemon.configPath,
                Self.bundle(
                    daemon, "com.example.third", groups: [Self.shared], key: daemon.signingKey),
            ])
        #expect(
            verifyFirst.output.contains("would be accepted")
                && verifyFirst.output.contains("groups      group.com.example.shared"),
            "\(verifyFirst.output)")
    }

    @Test(
        "a sandboxed app sees only its own groups' files; the container goes with the last app, kept with --keep-data"
    )
    func isolationAndLifetime() throws {
        let other = try OtherKey()
        let daemon = try TestDaemon(config: Self.config(other: other))
        let key = daemon.signingKey
        for (id, group) in [
            ("com.example.one", Self.shared), ("com.example.two", Self.shared),
            ("com.example.three", "group.com.example.other"),
        ] {
            let result = try Self.install(daemon, id, groups: [group], key: key)
            #expect(result.code == 0, "\(result.output)")
        }
        #expect(
            try Self.install(
                daemon, "com.example.stranger", groups: ["group.org.stranger"],
                key: other.signingKey
            ).code == 0)
        let shared = try Self.groupPath(daemon, "com.example.one", Self.shared)
        #expect(try Self.groupPath(daemon, "com.example.two", Self.shared) == shared)

        let write = try Self.run(
            daemon, "com.example.one",
            ["exec", "/bin/sh", "-c", "echo secret > \(shared)/note && echo written"])
        #expect(write.contains("written"), "\(write)")
        #expect(
            try Self.run(daemon, "com.example.two", ["read", "\(shared)/note"]).contains(
                "read: allowed"))
        // Same signer, another group; and another signer's app: neither reaches the file.
        for id in ["com.example.three", "com.example.stranger"] {
            let read = try Self.run(daemon, id, ["read", "\(shared)/note"])
            #expect(read.contains("read: refused"), "\(id): \(read)")
            let list = try Self.run(daemon, id, ["list", shared])
            #expect(!list.contains("note"), "\(id): \(list)")
        }

        #expect(try daemon.run("appd", ["uninstall", "com.example.one"]).code == 0)
        #expect(
            FileManager.default.fileExists(atPath: "\(shared)/note"),
            "com.example.two still uses it")
        #expect(try daemon.run("appd", ["uninstall", "--keep-data", "com.example.two"]).code == 0)
        #expect(FileManager.default.fileExists(atPath: "\(shared)/note"), "kept with --keep-data")
        let stillBound = try Self.install(
            daemon, "com.example.squatter", groups: [Self.shared], key: other.signingKey)
        #expect(
            stillBound.code == 1 && stillBound.output.contains("belongs to key"),
            "\(stillBound.output)")

        #expect(try daemon.run("appd", ["uninstall", "com.example.two"]).code == 0)
        #expect(!FileManager.default.fileExists(atPath: shared), "the last app took the container")
        // A later claimant (here: another signer, the id being free) starts empty.
        let later = try Self.install(
            daemon, "com.example.later", groups: [Self.shared], key: other.signingKey)
        #expect(later.code == 0, "\(later.output)")
        let fresh = try Self.groupPath(daemon, "com.example.later", Self.shared)
        #expect(fresh != shared)
        let leftovers = try Self.run(daemon, "com.example.later", ["read", "\(fresh)/note"])
        #expect(leftovers.contains("read: refused ENOENT"), "\(leftovers)")
    }

    @Test(
        "an unsigned app gets no group unless the admin lists it; GET of a group container creates nothing and takes no lock"
    )
    func unsignedAndReadOnlyGet() throws {
        let other = try OtherKey()
        let daemon = try TestDaemon(
            config: Self.config(
                other: other,
                extra:
                    "[Signing]\nAllowUnsigned=yes\nUnsignedGroups=group.dev.*\nUnsignedHostExecutables=/bin/*"
            ))
        let unsigned = try Self.install(
            daemon, "com.example.unsigned", groups: [Self.shared], key: nil)
        #expect(unsigned.code == 1)
        #expect(
            unsigned.output.contains(
                "com.example.unsigned uses application groups that an unsigned app ([Signing] UnsignedGroups) may not use: group.com.example.shared"
            ), "\(unsigned.output)")
        #expect(
            try Self.install(daemon, "com.example.devtool", groups: ["group.dev.tools"], key: nil)
                .code == 0)

        #expect(
            try Self.install(
                daemon, "com.example.reader", groups: [Self.shared], key: daemon.signingKey
            ).code == 0)
        let groupsDir = "\(daemon.root)/Containers/Shared/AppGroup"
        // As in a state root where the container was never made (groups used to be made at the
        // first launch or GET): the registry forgets it, behind the daemon's back.
        let sql = try TestDaemon.run(
            "/usr/bin/sqlite3",
            [
                "\(daemon.root)/registry.sqlite",
                "DELETE FROM appGroups WHERE groupID = '\(Self.shared)'",
            ])
        #expect(sql.code == 0, "\(sql.output)")
        let before = try FileManager.default.contentsOfDirectory(atPath: groupsDir).sorted()

        // Someone else holds the state lock (a long install): a read must still answer.
        let lock = open("\(daemon.root)/.lock", O_RDWR | O_CLOEXEC)
        #expect(lock >= 0 && flock(lock, LOCK_EX) == 0)
        defer { close(lock) }
        let started = Date()
        let failure = Self.apiError {
            _ = try AppdClient(socketPath: daemon.socket, timeout: 5).get(
                "/v1/apps/com.example.reader/containers/group/\(Self.shared)", as: APIContainer.self
            )
        }
        #expect(Date().timeIntervalSince(started) < 1, "the read waited for the state lock")
        #expect(failure?.code == .notFound, "\(String(describing: failure))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: groupsDir).sorted() == before)
        let count = try TestDaemon.run(
            "/usr/bin/sqlite3",
            [
                "\(daemon.root)/registry.sqlite",
                "SELECT count(*) FROM appGroups WHERE groupID = '\(Self.shared)'",
            ])
        #expect(count.output.trimmingCharacters(in: .whitespacesAndNewlines) == "0")
    }
}
