import AppdAPI
import AppdClient
import Foundation
import Testing

/// `appd backup` and `appd restore` (issue 27 §1-3): a real sandboxed app writes its data, a
/// real daemon takes and restores it, and what the app or a crafted archive tries fails.
@Suite("backup and restore of an app's data", .serialized, rootOnly)
struct BackupTests {
    static let id = "com.example.backup"

    /// Runs the probe with `steps` (`home ...`) to its end.
    static func write(_ daemon: TestDaemon, _ steps: [String], app: String = id) throws {
        let run = try daemon.launch(app, ["home"] + steps)
        let ended = try daemon.wait(run.id)
        let log = try daemon.logs(run.id)
        #expect(ended.exit?.code == 0, "\(log)")
    }

    static func backup(_ daemon: TestDaemon, _ id: String = id, _ extra: [String] = []) throws
        -> (code: Int32, output: String, file: String)
    {
        let file = "\(daemon.directory)/backup-\(UUID().uuidString).tar"
        let result = try daemon.run("appd", ["backup", id, "-o", file] + extra)
        return (result.code, result.output, file)
    }

    static func listing(_ file: String) throws -> String {
        try host("/usr/bin/tar", ["-tvf", file, "--numeric-owner"])
    }

    /// A host tool's stdout.
    static func host(_ tool: String, _ arguments: [String]) throws -> String {
        try ChildProcess(tool, arguments, stderr: .inherit).finish().stdout
    }

    static func owner(_ path: String) -> uid_t? {
        var st = stat()
        return lstat(path, &st) == 0 ? st.st_uid : nil
    }

    static func entries(_ path: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }

    @Test("a backup holds Documents and Library but never Caches or tmp, and restores them")
    func roundTrip() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe(Self.id)
        try Self.write(
            daemon,
            [
                "file", "Documents/a", "100000", "mkdir", "Documents/sub", "file",
                "Documents/sub/b", "5000", "file", "Library/Preferences/p.plist", "300", "file",
                "Library/Caches/c", "4096", "file", "tmp/t", "10", "link", "sub/b",
                "Documents/to-b",
            ])
        let data = try daemon.dataContainer(Self.id)
        let original = try Data(contentsOf: URL(fileURLWithPath: "\(data)/Documents/a"))
        let taken = try Self.backup(daemon)
        #expect(taken.code == 0, "\(taken.output)")
        #expect(taken.output.contains("Backed up \(Self.id): 3 files"), "\(taken.output)")
        let list = try Self.listing(taken.file)
        let names = list.split(separator: "\n").map { String($0.split(separator: " ").last ?? "") }
        #expect(names.first == ".appd-backup/manifest.json", "\(list)")
        #expect(names.last == ".appd-backup/summary.json", "\(list)")
        for name in ["Documents/a", "Documents/sub/b", "Library/Preferences/p.plist"] {
            #expect(names.contains(name), "\(name) in \(list)")
        }
        #expect(list.contains("Documents/to-b -> sub/b"), "\(list)")
        #expect(!list.contains("Caches/c") && !list.contains("tmp"), "\(list)")
        // No host uid: every entry is 0/0.
        for line in list.split(separator: "\n") { #expect(line.contains(" 0/0 "), "\(line)") }

        // The app changes its data; the restore brings the backup's back.
        try Self.write(daemon, ["file", "Documents/a", "5", "file", "Documents/new", "10"])
        let restored = try daemon.run("appd", ["restore", Self.id, taken.file])
        #expect(restored.code == 0, "\(restored.output)")
        #expect(restored.output.contains("Restored \(Self.id)"), "\(restored.output)")
        let app = try daemon.client.app(Self.id)
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(data)/Documents/a")) == original)
        #expect(!FileManager.default.fileExists(atPath: "\(data)/Documents/new"))
        #expect(Self.entries("\(data)/Library/Caches") == [] && Self.entries("\(data)/tmp") == [])
        for path in [
            "", "/Documents", "/Documents/a", "/Documents/to-b", "/Library/Caches", "/tmp",
        ] {
            #expect(Self.owner(data + path) == app.uid, "\(path)")
        }
        // The old data goes right after the answer.
        #expect(daemon.eventually { Self.entries("\(daemon.root)/Containers/Data").count == 1 })
        // The app reads its restored file in its sandbox.
        try Self.write(daemon, ["file", "Documents/after", "1"])
    }

    @Test("a backup taken on one state root restores on another, to that host's uid and signer")
    func acrossDaemons() throws {
        let first = try TestDaemon()
        try first.installProbe(Self.id)
        try Self.write(
            first, ["file", "Documents/doc", "70000", "file", "Library/Preferences/x", "9"])
        let taken = try Self.backup(first)
        #expect(taken.code == 0, "\(taken.output)")

        let second = try TestDaemon()
        // Another app first, so the app gets another uid on this root.
        try second.installProbe("com.example.first")
        try second.installProbe(Self.id)
        let uids = (try first.client.app(Self.id).uid, try second.client.app(Self.id).uid)
        #expect(uids.0 != uids.1)
        // Each daemon signs with a key of its own: the signer differs.
        let refused = try second.run("appd", ["restore", Self.id, taken.file])
        #expect(refused.code != 0)
        #expect(
            refused.output.contains("signed by")
                && refused.output.contains("--allow-signer-change"), "\(refused.output)")
        let restored = try second.run(
            "appd", ["restore", "--allow-signer-change", Self.id, taken.file])
        #expect(restored.code == 0, "\(restored.output)")
        let data = try second.dataContainer(Self.id)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: "\(data)/Documents/doc"))
        #expect(bytes.count == 70000)
        #expect(Self.owner("\(data)/Documents/doc") == uids.1)
        #expect(Self.owner("\(data)/Library/Preferences/x") == uids.1)
        try Self.write(second, ["file", "Documents/doc", "1"])
    }

    /// The freezer state of the instance's cgroup as the kernel reports it (v1 freezer.state or
    /// v2 cgroup.events), read from the launcher's own cgroup.
    static func frozen(_ pid: Int32) -> Bool? {
        let lines = (try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8)) ?? ""
        for line in lines.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 2).map(String.init)
            guard parts.count == 3 else { continue }
            if parts[1] == "freezer" && parts[2] != "/" {
                let state = try? String(
                    contentsOfFile: "/sys/fs/cgroup/freezer\(parts[2])/freezer.state",
                    encoding: .utf8)
                return state.map { $0.hasPrefix("FROZEN") }
            }
        }
        // The unified hierarchy: at /sys/fs/cgroup/unified on a hybrid host.
        let unified =
            FileManager.default.fileExists(atPath: "/sys/fs/cgroup/unified/cgroup.controllers")
            ? "/sys/fs/cgroup/unified" : "/sys/fs/cgroup"
        for line in lines.split(separator: "\n") where line.hasPrefix("0::") {
            let events = try? String(
                contentsOfFile: "\(unified)\(line.dropFirst(3))/cgroup.events", encoding: .utf8)
            return events.map { $0.contains("frozen 1") }
        }
        return nil
    }

    @Test("a running app is frozen while its data is read and thawed after; --live is not")
    func frozenDuringBackup() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe(Self.id)
        // More than the socket and the daemon's pipe hold (a few hundred KiB): when the first
        // bytes reach the client the daemon is still reading, so still holding the app. With
        // a small backup the whole stream could be out, and the app thawed, before the client
        // read its first chunk (seen in CI under load).
        try Self.write(daemon, ["file", "Documents/big", "\(8 << 20)"])
        let run = try daemon.launch(Self.id, ["home", "grow", "Documents/growing", "120"])
        #expect(
            daemon.eventually {
                (try? daemon.logs(run.id))?.contains("grow Documents/growing allowed") == true
            })
        let pid = try #require(try daemon.instance(run.id).pid)
        let cgroups = (try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8)) ?? ""
        #expect(Self.frozen(pid) == false, "\(pid): \(cgroups)")
        let state = try daemon.instance(run.id).state
        var during: [Bool?] = []
        try daemon.client.backup(Self.id) { _ in
            // The first bytes: the freeze comes before them (the last ones may follow the thaw).
            if during.isEmpty { during.append(Self.frozen(pid)) }
        }
        #expect(during == [true])
        #expect(Self.frozen(pid) == false)

        let held = try Self.backup(daemon, Self.id, ["--json"])
        #expect(held.code == 0, "\(held.output)")
        #expect(held.output.contains("\"heldSeconds\""), "\(held.output)")
        #expect(held.output.contains(run.id), "\(held.output)")
        // Frozen, the file does not change under the read.
        #expect(!held.output.contains("Documents/growing"), "\(held.output)")
        #expect(Self.frozen(pid) == false)
        #expect(try daemon.instance(run.id).state == state)

        // Live, it does: taken as it was when opened, and reported (a few tries: the app must
        // get the CPU while the file is read).
        var reported = false
        for _ in 0..<5 where !reported {
            let live = try Self.backup(daemon, Self.id, ["--live", "--json"])
            #expect(live.code == 0, "\(live.output)")
            #expect(!live.output.contains("\"heldSeconds\""), "\(live.output)")
            reported = live.output.contains("Documents/growing")
        }
        #expect(reported)
        try daemon.killAndWait(run.id)
    }

    @Test("links the app planted are stored as links, FIFOs skipped, a 20,000-level tree bounded")
    func hostileApp() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe(Self.id)
        try Self.write(
            daemon,
            [
                "link", "/etc/shadow", "Documents/shadow", "link", "/", "Library/root", "fifo",
                "Documents/pipe",
            ])
        let made = try daemon.launch(Self.id, ["deep-tree", "20000"])
        let ended = try AppdClient(socketPath: daemon.socket, timeout: 600)
            .get("/v1/instances/\(made.id)/wait", as: APIInstance.self)
        #expect(ended.exit?.code == 0)
        let taken = try Self.backup(daemon)
        #expect(taken.code == 0, "\(taken.output)")
        #expect(taken.output.contains("Documents/pipe is a FIFO; not taken"), "\(taken.output)")
        #expect(taken.output.contains("is deeper than 256 levels; not taken"), "\(taken.output)")
        let list = try Self.listing(taken.file)
        #expect(list.contains("Documents/shadow -> /etc/shadow"), "\(list.prefix(2000))")
        #expect(list.contains("Library/root -> /"))
        // Nothing of the host's files: /etc/shadow's first line is not in the stream.
        let shadow = try String(contentsOfFile: "/etc/shadow", encoding: .utf8).prefix {
            $0 != "\n"
        }
        let archive = try Data(contentsOf: URL(fileURLWithPath: taken.file))
        #expect(archive.range(of: Data(shadow.utf8)) == nil)
        let size = archive.count
        #expect(size < 64 << 20, "\(size)")

        // It restores: the links as links, the app's, the tree to its bound.
        let restored = try daemon.run("appd", ["restore", Self.id, taken.file])
        #expect(restored.code == 0, "\(restored.output)")
        let data = try daemon.dataContainer(Self.id)
        let link = try FileManager.default.destinationOfSymbolicLink(
            atPath: "\(data)/Documents/shadow")
        #expect(link == "/etc/shadow")
        #expect(Self.owner("\(data)/Documents/shadow") == (try daemon.client.app(Self.id).uid))
        #expect(!FileManager.default.fileExists(atPath: "\(data)/Documents/pipe"))
        try daemon.expectStillWorks("backup")
    }

    /// A valid backup of `files`, with `listed` as files.json says they are.
    @Test(
        "--groups: the app's group containers come along (not their Caches); a restore without it leaves them and says so; with it they come back, the group's, while no app of the group runs"
    )
    func groups() throws {
        let daemon = try TestDaemon(
            config:
                "[Signer test-groups]\nKey=test.public-key\nBundleIDs=com.example.*\nGroups=group.com.example.*\n"
        )
        let shared = GroupIsolationTests.shared
        for app in ["com.example.backup-a", "com.example.backup-b"] {
            let installed = try GroupIsolationTests.install(
                daemon, app, groups: [shared], key: daemon.signingKey)
            #expect(installed.code == 0, "\(installed.output)")
        }
        let group = try GroupIsolationTests.groupPath(daemon, "com.example.backup-a", shared)
        let sh = { (app: String, script: String) throws -> String in
            try GroupIsolationTests.run(
                daemon, app, ["exec", "/bin/sh", "-c", script + " && echo done"])
        }
        #expect(
            try sh(
                "com.example.backup-a",
                "echo v1 > \(group)/note && mkdir -p \(group)/Library/Caches \(group)/sub && echo c > \(group)/Library/Caches/c && echo s > \(group)/sub/s"
            ).contains("done"))
        try Self.write(daemon, ["file", "Documents/mine", "10"], app: "com.example.backup-a")

        let taken = try Self.backup(daemon, "com.example.backup-a", ["--groups"])
        #expect(taken.code == 0, "\(taken.output)")
        #expect(taken.output.contains("and its groups \(shared)"), "\(taken.output)")
        let list = try Self.listing(taken.file)
        for name in ["AppGroups/\(shared)/note", "AppGroups/\(shared)/sub/s", "Documents/mine"] {
            #expect(list.contains(name), "\(name) in \(list)")
        }
        #expect(!list.contains("Caches/c"), "\(list)")
        // Without --groups, no group.
        let plain = try Self.backup(daemon, "com.example.backup-a")
        #expect(!(try Self.listing(plain.file)).contains("AppGroups"))

        // The other app of the group changes the shared data.
        #expect(
            try sh("com.example.backup-b", "echo v2 > \(group)/note && echo x > \(group)/extra")
                .contains("done"))
        let left = try daemon.run("appd", ["restore", "com.example.backup-a", taken.file])
        #expect(left.code == 0, "\(left.output)")
        #expect(left.output.contains("Left as they are: the containers of its groups \(shared)"))
        #expect(try String(contentsOfFile: "\(group)/note", encoding: .utf8) == "v2\n")

        // With --groups, no app of the group may run.
        let running = try daemon.launch("com.example.backup-b", ["sleep", "600"])
        let refused = try daemon.run(
            "appd", ["restore", "--groups", "com.example.backup-a", taken.file])
        #expect(refused.code != 0)
        #expect(
            refused.output.contains("com.example.backup-b has 1 running instance"),
            "\(refused.output)")
        #expect(try String(contentsOfFile: "\(group)/note", encoding: .utf8) == "v2\n")
        _ = try daemon.client.post("/v1/instances/\(running.id)/kill", as: APIInstance.self)
        _ = try daemon.wait(running.id)

        let restored = try daemon.run(
            "appd", ["restore", "--groups", "com.example.backup-a", taken.file])
        #expect(restored.code == 0, "\(restored.output)")
        #expect(restored.output.contains("Restored the containers of its groups \(shared)"))
        #expect(try String(contentsOfFile: "\(group)/note", encoding: .utf8) == "v1\n")
        #expect(!FileManager.default.fileExists(atPath: "\(group)/extra"))
        #expect(!FileManager.default.fileExists(atPath: "\(group)/Library/Caches/c"))
        // The group's again: the same path, root and the group's gid, 2770; entries the
        // restoring app's uid and the group's gid, folders setgid; the old one gone.
        var top = stat()
        #expect(lstat(group, &top) == 0)
        #expect(top.st_uid == 0 && top.st_mode & 0o7777 == 0o2770)
        var sub = stat()
        #expect(lstat("\(group)/sub", &sub) == 0)
        #expect(sub.st_gid == top.st_gid && sub.st_mode & 0o7777 == 0o2770)
        #expect(Self.owner("\(group)/note") == (try daemon.client.app("com.example.backup-a").uid))
        let parent = (group as NSString).deletingLastPathComponent
        #expect(daemon.eventually { Self.entries(parent).count == 1 }, "\(Self.entries(parent))")
        // The other app of the group reads and writes what came back, in its sandbox.
        #expect(
            try sh("com.example.backup-b", "cat \(group)/note && echo v3 >> \(group)/sub/s")
                .contains("v1"))
    }

    @Test(
        "--groups: the group's containers are read first, and the other app of the group runs again as soon as they are, while the app's own data still streams"
    )
    func groupsThawedWhenRead() throws {
        let daemon = try TestDaemon(
            config:
                "[Signer test-groups]\nKey=test.public-key\nBundleIDs=com.example.*\nGroups=group.com.example.*\n"
        )
        let shared = GroupIsolationTests.shared
        for app in ["com.example.backup-a", "com.example.backup-b"] {
            let installed = try GroupIsolationTests.install(
                daemon, app, groups: [shared], key: daemon.signingKey)
            #expect(installed.code == 0, "\(installed.output)")
        }
        // More than the socket and the daemon's pipe hold, in the group and in the app's data:
        // the client reads slowly, so the daemon's read is where the client is, give or take.
        let group = try GroupIsolationTests.groupPath(daemon, "com.example.backup-a", shared)
        let placed = "\(group)/shared.bin"
        try Data(count: 4 << 20).write(to: URL(fileURLWithPath: placed))
        chown(placed, try daemon.client.app("com.example.backup-a").uid, 0)
        try Self.write(
            daemon, ["file", "Documents/big", "\(8 << 20)"], app: "com.example.backup-a")
        var pids: [String: pid_t] = [:]
        var runs: [String] = []
        for app in ["com.example.backup-a", "com.example.backup-b"] {
            let run = try daemon.launch(app, ["home", "sleep", "600"])
            runs.append(run.id)
            #expect(daemon.eventually { (try? daemon.instance(run.id).pid) != nil })
            pids[app] = try #require(try daemon.instance(run.id).pid)
        }
        let a = try #require(pids["com.example.backup-a"])
        let b = try #require(pids["com.example.backup-b"])
        var seen: [(a: Bool?, b: Bool?)] = []
        try daemon.client.backup("com.example.backup-a", groups: true) { _ in
            seen.append((Self.frozen(a), Self.frozen(b)))
            usleep(2000)
        }
        #expect(seen.first.map { $0.a == true && $0.b == true } == true, "\(seen.prefix(3))")
        // Past the group: the other app runs, the app itself is still held.
        #expect(seen.contains { $0.a == true && $0.b == false }, "\(seen.count) chunks")
        #expect(Self.frozen(a) == false && Self.frozen(b) == false)
        for run in runs { _ = try daemon.killAndWait(run) }
    }

    static func crafted(
        _ entries: [TarEntry], listed: [(String, String)], bundle: String = id, signer: String?,
        groups: [String]? = nil
    ) -> [UInt8] {
        let named = groups.map { ",\"groups\":[\($0.map { "\"\($0)\"" }.joined(separator: ","))]" }
        let manifest =
            "{\"bundleID\":\"\(bundle)\",\"createdAt\":\"2026-11-27T00:00:00Z\",\"format\":1,\"live\":false\(signer.map { ",\"signer\":\"\($0)\"" } ?? "")\(named ?? "")}"
        let files = listed.map { "{\"path\":\"\($0.0)\",\"sha256\":\"\($0.1)\",\"size\":0}" }
        let list = "{\"files\":[\(files.joined(separator: ","))],\"skipped\":[],\"skippedCount\":0}"
        return tarArchive(
            [.file(".appd-backup/manifest.json", manifest)] + entries + [
                .file(".appd-backup/files.json", list)
            ])
    }

    /// A pax extended header of `records` (for the entry after it).
    static func pax(_ records: [(String, String)]) -> TarEntry {
        var data: [UInt8] = []
        for (key, value) in records {
            let body = " \(key)=\(value)\n"
            var length = body.utf8.count + 1
            while String(length).count + body.utf8.count != length {
                length = String(length).count + body.utf8.count
            }
            data += Array("\(length)\(body)".utf8)
        }
        return TarEntry(name: "././@PaxHeader", type: "x", data: data)
    }

    /// A sparse member of GNU's pax format 1.0: `map` (padded to a block) then `data` bytes.
    static func sparse(_ name: String, realSize: Int, map: String, data: Int) -> [TarEntry] {
        var bytes = Array(map.utf8)
        bytes += [UInt8](repeating: 0, count: (512 - bytes.count % 512) % 512)
        bytes += [UInt8](repeating: 120, count: data)
        return [
            pax([
                ("GNU.sparse.major", "1"), ("GNU.sparse.minor", "0"), ("GNU.sparse.name", name),
                ("GNU.sparse.realsize", "\(realSize)"),
            ]), .file("Documents/GNUSparseFile.0/s", bytes),
        ]
    }

    static func sha256(_ text: String) throws -> String {
        String(try host("/bin/sh", ["-c", "printf %s \"$0\" | sha256sum", text]).prefix(64))
    }

    @Test("crafted archives are refused, leaving the old data and nothing else behind")
    func craftedArchivesRefused() throws {
        let daemon = try TestDaemon(config: "[Sandbox]\nDataQuota=1M\n")
        try daemon.installProbe(Self.id)
        try Self.write(daemon, ["file", "Documents/keep", "1234"])
        let data = try daemon.dataContainer(Self.id)
        let signer = try daemon.client.app(Self.id).signer
        let before = Self.entries("\(daemon.root)/Containers/Data")
        let keep = try Data(contentsOf: URL(fileURLWithPath: "\(data)/Documents/keep"))
        let ok = try Self.sha256("ok")
        let cases: [(String, [UInt8], String)] = [
            (
                "traversal",
                Self.crafted([.file("Documents/../../escape", "x")], listed: [], signer: signer),
                "'..' component"
            ),
            (
                "absolute",
                Self.crafted([.file("/etc/appd-evil", "x")], listed: [], signer: signer),
                "absolute path"
            ),
            (
                "link out",
                Self.crafted(
                    [
                        .directory("Documents/"), .symlink("Documents/out", to: "/tmp"),
                        .file("Documents/out/evil", "x"),
                    ],
                    listed: [], signer: signer),
                "which is a symlink in the archive"
            ),
            (
                "device",
                Self.crafted(
                    [TarEntry(name: "Documents/null", type: "3")], listed: [], signer: signer),
                "character device"
            ),
            (
                "fifo",
                Self.crafted(
                    [TarEntry(name: "Documents/p", type: "6")], listed: [], signer: signer),
                "a FIFO"
            ),
            (
                "hard link",
                Self.crafted(
                    [TarEntry(name: "Documents/h", type: "1", link: "/etc/shadow")], listed: [],
                    signer: signer), "a hard link"
            ),
            (
                "setuid",
                Self.crafted(
                    [.file("Documents/s", Array("x".utf8), mode: "0004755")], listed: [],
                    signer: signer),
                "setuid"
            ),
            (
                "size bomb",
                Self.crafted(
                    [.file("Documents/big", [UInt8](repeating: 0, count: 2 << 20))], listed: [],
                    signer: signer),
                "past 1048576 bytes"
            ),
            (
                "duplicate",
                Self.crafted(
                    [.file("Documents/d", "ok"), .file("Documents/d", "ok")],
                    listed: [("Documents/d", ok)],
                    signer: signer),
                "appears twice"
            ),
            (
                "lying manifest",
                Self.crafted(
                    [.file("Documents/l", "changed")], listed: [("Documents/l", ok)], signer: signer
                ),
                "does not match its SHA-256"
            ),
            (
                "unlisted file",
                Self.crafted(
                    [.file("Documents/l", "ok"), .file("Documents/m", "ok")],
                    listed: [("Documents/l", ok)], signer: signer),
                "not in files.json"
            ),
            (
                "caches",
                Self.crafted(
                    [.file("Library/Caches/c", "ok")], listed: [("Library/Caches/c", ok)],
                    signer: signer), "Library/Caches"
            ),
            (
                "tmp",
                Self.crafted([.file("tmp/t", "ok")], listed: [("tmp/t", ok)], signer: signer),
                "not part of a backup"
            ),
            ("no manifest", tarArchive([.file("Documents/x", "ok")]), "not an appd backup"),
            (
                "groups the manifest does not name",
                Self.crafted(
                    [.file("AppGroups/group.com.example.g/x", "ok")],
                    listed: [("AppGroups/group.com.example.g/x", ok)], signer: signer),
                "'AppGroups' is not part of a backup"
            ),
            (
                "a group the archive lacks",
                Self.crafted(
                    [.file("AppGroups/group.com.example.g/x", "ok")],
                    listed: [("AppGroups/group.com.example.g/x", ok)], signer: signer,
                    groups: ["group.com.example.g", "group.com.example.h"]),
                "no folder AppGroups/group.com.example.h"
            ),
            (
                "a group id that is a path",
                Self.crafted(
                    [.file("AppGroups/x", "ok")], listed: [("AppGroups/x", ok)], signer: signer,
                    groups: [".."]),
                "not a group id"
            ),
            (
                "a group's caches",
                Self.crafted(
                    [.file("AppGroups/group.com.example.g/Library/Caches/c", "ok")],
                    listed: [("AppGroups/group.com.example.g/Library/Caches/c", ok)],
                    signer: signer, groups: ["group.com.example.g"]),
                "AppGroups/group.com.example.g/Library/Caches"
            ),
            (
                "another app",
                Self.crafted([], listed: [], bundle: "com.example.other", signer: signer),
                "backup of com.example.other"
            ),
            (
                "hard link to a folder",
                Self.crafted(
                    [
                        .directory("Documents/"), .directory("Documents/d/"),
                        TarEntry(name: "Documents/h", type: "1", link: "Documents/d"),
                    ], listed: [], signer: signer),
                "which is not a file extracted before it"
            ),
            (
                "hard link before its file",
                Self.crafted(
                    [
                        TarEntry(name: "Documents/h", type: "1", link: "Documents/later"),
                        .file("Documents/later", "ok"),
                    ], listed: [("Documents/later", ok)], signer: signer),
                "which is not a file extracted before it"
            ),
            (
                "hard link into the backup's own folder",
                Self.crafted(
                    [
                        TarEntry(
                            name: "Documents/h", type: "1", link: ".appd-backup/manifest.json")
                    ], listed: [], signer: signer),
                "which it may not share a file with"
            ),
            (
                "hard link with data",
                Self.crafted(
                    [
                        .file("Documents/x", "ok"),
                        TarEntry(
                            name: "Documents/h", type: "1", data: [1, 2], link: "Documents/x"),
                    ], listed: [("Documents/x", ok)], signer: signer),
                "is a hard link with 2 bytes of data"
            ),
            (
                "sparse map past its size",
                Self.crafted(
                    Self.sparse("Documents/s", realSize: 10, map: "1\n5\n100\n", data: 100),
                    listed: [], signer: signer),
                "pass its size of 10 bytes"
            ),
            (
                "sparse map that lies about its data",
                Self.crafted(
                    Self.sparse("Documents/s", realSize: 1000, map: "1\n0\n10\n", data: 600),
                    listed: [], signer: signer),
                "has a sparse map of 10 bytes of data, and 600 follow it"
            ),
            (
                "sparse file of an older format",
                Self.crafted(
                    [
                        Self.pax([
                            ("GNU.sparse.size", "10"), ("GNU.sparse.numblocks", "1"),
                            ("GNU.sparse.offset", "0"), ("GNU.sparse.numbytes", "10"),
                        ]), .file("Documents/old", Array(repeating: 120, count: 10)),
                    ], listed: [], signer: signer),
                "format other than pax 1.0"
            ),
            (
                "truncated",
                Array(
                    Self.crafted([.file("Documents/x", "ok")], listed: [], signer: signer).prefix(
                        1536)), "truncated"
            ),
        ]
        for (name, archive, expected) in cases {
            let file =
                "\(daemon.directory)/crafted-\(name.replacingOccurrences(of: " ", with: "-")).tar"
            try Data(archive).write(to: URL(fileURLWithPath: file))
            let result = try daemon.run("appd", ["restore", Self.id, file])
            #expect(result.code != 0, "\(name): \(result.output)")
            #expect(result.output.contains(expected), "\(name): \(result.output)")
            #expect(Self.entries("\(daemon.root)/Containers/Data") == before, "\(name)")
            #expect(Self.entries("\(data)/Documents") == ["keep"], "\(name)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: "\(data)/Documents/keep")) == keep)
        }
        #expect(!FileManager.default.fileExists(atPath: "/tmp/evil"))
        #expect(!FileManager.default.fileExists(atPath: "/etc/appd-evil"))
        #expect(!FileManager.default.fileExists(atPath: "\(daemon.root)/Containers/escape"))
        // And an honest one of the same shape is taken.
        let honest = Self.crafted(
            [.file("Documents/l", "ok")], listed: [("Documents/l", ok)], signer: signer)
        let file = "\(daemon.directory)/honest.tar"
        try Data(honest).write(to: URL(fileURLWithPath: file))
        let result = try daemon.run("appd", ["restore", Self.id, file])
        #expect(result.code == 0, "\(result.output)")
        #expect(Self.entries("\(data)/Documents") == ["l"])
    }

    @Test("a restore is refused while the app runs, unless --terminate ends it first")
    func refusedWhileRunning() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe(Self.id)
        try Self.write(daemon, ["file", "Documents/a", "10"])
        let taken = try Self.backup(daemon)
        #expect(taken.code == 0, "\(taken.output)")
        let run = try daemon.launch(Self.id, ["home", "file", "Documents/b", "10", "sleep", "60"])
        #expect(
            daemon.eventually {
                (try? daemon.logs(run.id))?.contains("Documents/b allowed") == true
            })
        let refused = try daemon.run("appd", ["restore", Self.id, taken.file])
        #expect(refused.code != 0)
        #expect(refused.output.contains("running instance"), "\(refused.output)")
        let data = try daemon.dataContainer(Self.id)
        #expect(Self.entries("\(data)/Documents") == ["a", "b"])
        let restored = try daemon.run("appd", ["restore", "--terminate", Self.id, taken.file])
        #expect(restored.code == 0, "\(restored.output)")
        #expect(restored.output.contains("Terminated \(run.id)"), "\(restored.output)")
        #expect(Self.entries("\(data)/Documents") == ["a"])
    }
}
