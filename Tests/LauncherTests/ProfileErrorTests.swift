import Foundation
import Testing

/// A profile or filter the launcher does not fully understand is refused: exit 127, one clear
/// line on stderr and the status fd, and the app never runs.
@Suite("appd-exec: refusing bad input")
struct ProfileErrorTests {
    static let app = shell("echo APP-RAN")

    func expectRefused(
        _ result: LaunchResult, mentioning text: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(result.status == 127, sourceLocation: sourceLocation)
        #expect(!result.stdout.contains("APP-RAN"), "the app ran", sourceLocation: sourceLocation)
        #expect(
            result.stderr.hasPrefix("appd-exec: "), "\(result.stderr)",
            sourceLocation: sourceLocation)
        #expect(result.stderr.contains(text), "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.statusLine.hasPrefix("error "), sourceLocation: sourceLocation)
        #expect(result.statusLine.contains(text), sourceLocation: sourceLocation)
    }

    @Test("an unknown record is refused")
    func unknownRecord() throws {
        let profile = profileText(sandboxRecords() + ["frobnicate yes"], command: Self.app)
        expectRefused(
            try launch(profile: profile),
            mentioning: "profile: line 24: unknown record 'frobnicate'")
    }

    @Test("a bad header is refused")
    func badHeader() throws {
        let profile = profileText(sandboxRecords(), command: Self.app)
            .replacingOccurrences(of: "appd-profile 1", with: "appd-profile 2")
        expectRefused(
            try launch(profile: profile), mentioning: "profile: line 1: expected the header")
    }

    @Test("a required seccomp filter that is missing is refused")
    func missingSeccomp() throws {
        let profile = profileText(sandboxRecords() + ["seccomp required"], command: Self.app)
        expectRefused(
            try launch(profile: profile, seccomp: []),
            mentioning: "seccomp: the profile requires a filter")
    }

    @Test("a filter that is not whole instructions is refused")
    func truncatedFilter() throws {
        let profile = profileText(sandboxRecords(), command: Self.app)
        expectRefused(
            try launch(profile: profile, seccomp: Array(BPF.allowAll.prefix(5))),
            mentioning: "not a multiple of 8")
    }

    @Test("raw control bytes and bad escapes are refused")
    func badEncoding() throws {
        let raw = profileText(sandboxRecords() + ["hostname a\tb"], command: Self.app)
        expectRefused(try launch(profile: raw), mentioning: "must be encoded")
        let escape = profileText(sandboxRecords() + ["env X=%4"], command: Self.app)
        expectRefused(try launch(profile: escape), mentioning: "bad percent escape")
        let lowercase = profileText(sandboxRecords() + ["env X=%2f"], command: Self.app)
        expectRefused(try launch(profile: lowercase), mentioning: "bad percent escape")
    }

    @Test("a field that is not UTF-8 is refused; UTF-8, U+FFFD included, passes unchanged")
    func utf8Fields() throws {
        for field in ["X=%FF", "X=a%C3", "X=%ED%A0%80", "X=%EF%BF"] {
            let profile = profileText(sandboxRecords() + ["env \(field)"], command: Self.app)
            expectRefused(try launch(profile: profile), mentioning: "field is not UTF-8")
        }
        // U+FFFD is what decoding puts in place of a bad byte: as input it is valid, and kept.
        // Raw in the record: bytes above 0x7F need no escape.
        let profile = profileText(
            sandboxRecords() + ["env X=é\u{FFFD}ü"],
            command: shell("printf '%s\\n' \"$X\"; echo APP-RAN"))
        let result = try launch(profile: profile)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutLines == ["é\u{FFFD}ü", "APP-RAN"])
    }

    @Test("a profile without uid is refused rather than run as root")
    func missingUID() throws {
        let profile = profileText(
            sandboxRecords().filter { !$0.hasPrefix("uid ") }, command: Self.app)
        expectRefused(try launch(profile: profile), mentioning: "uid and gid records are required")
    }

    @Test("a record that may appear once is refused the second time")
    func duplicateRecord() throws {
        let profile = profileText(sandboxRecords() + ["groups 3456 4567"], command: Self.app)
        expectRefused(try launch(profile: profile), mentioning: "'groups' may appear only once")
    }

    @Test("log-denials takes no field and may appear once")
    func logDenialsRecord() throws {
        expectRefused(
            try launch(
                profile: profileText(sandboxRecords() + ["log-denials yes"], command: Self.app)),
            mentioning: "log-denials")
        expectRefused(
            try launch(
                profile: profileText(
                    sandboxRecords() + ["log-denials", "log-denials"], command: Self.app)),
            mentioning: "'log-denials' may appear only once")
    }

    @Test(
        "an image root is refused without a user namespace to idmap it onto, or without ro/rw"
    )
    func imageRootNeedsUserNamespace() throws {
        func replacingRoot(_ record: String) -> String {
            profileText(
                sandboxRecords().map { $0.hasPrefix("root ") ? record : $0 }, command: Self.app)
        }
        expectRefused(
            try launch(profile: replacingRoot("root image /usr rw")),
            mentioning: "'root image' needs 'userns'")
        expectRefused(
            try launch(profile: replacingRoot("root image /usr rwx")),
            mentioning: "'root image' ends with ro or rw")
        expectRefused(
            try launch(profile: replacingRoot("root image usr ro")),
            mentioning: "path 'usr' is not absolute")
        expectRefused(
            try launch(profile: replacingRoot("root image /usr rw idmapped")),
            mentioning: "'root image' takes SRC, ro or rw, and owned or nothing")
    }

    @Test(
        "mount node: a type other than c, b, p, numbers past the kernel's, more than rwx bits, a field missing: refused before anything is made"
    )
    func nodeRecordRefused() throws {
        for (record, message) in [
            ("mount node /dev/x 640 s:1:3:0:0", "mount node: bad device 's:1:3:0:0'"),
            ("mount node /dev/x 640 c:4096:3:0:0", "mount node: bad device"),
            ("mount node /dev/x 640 c:1:3:0", "mount node: bad device"),
            ("mount node /dev/x 4640 c:1:3:0:0", "mount node: mode 4640 is more than rwx bits"),
            ("mount node dev/x 640 c:1:3:0:0", "path 'dev/x' is not absolute"),
        ] {
            expectRefused(
                try launch(profile: profileText(sandboxRecords() + [record], command: Self.app)),
                mentioning: message)
        }
    }

    @Test("mounts without a mount namespace are refused")
    func mountsNeedNamespace() throws {
        let profile = profileText(
            sandboxRecords().map { $0.hasPrefix("unshare ") ? "unshare pid net ipc uts" : $0 },
            command: Self.app)
        expectRefused(try launch(profile: profile), mentioning: "need 'unshare mount'")
    }

    @Test("a mount on / is refused")
    func mountOnRoot() throws {
        for record in [
            "mount tmpfs / 755", "mount ro-bind /usr /", "mount proc /./", "mount dev //",
        ] {
            expectRefused(
                try launch(profile: profileText(sandboxRecords() + [record], command: Self.app)),
                mentioning: "a mount record cannot have / as its destination")
        }
    }

    @Test("a dir record may set the root's mode; /.x is not the root", rootOnly)
    func directoryOnRoot() throws {
        let result = try launch(
            profile: profileText(
                sandboxRecords() + ["mount dir / 0711", "mount tmpfs /.x 755"],
                command: shell("stat -c %a /; test -d /.x && echo APP-RAN")))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutLines == ["711", "APP-RAN"])
    }

    @Test("user namespaces are refused as not supported")
    func userNamespace() throws {
        let profile = profileText(sandboxRecords() + ["unshare user"], command: Self.app)
        expectRefused(
            try launch(profile: profile), mentioning: "unshare: user namespaces are not supported")
    }

    @Test("bad arguments are refused")
    func badArguments() throws {
        let result = try ChildProcess(
            launcherExecutable, ["--profile-fd", "3"], stdout: .inherit, stderr: .capture
        ).finish()
        let stderr = result.stderr
        #expect(result.code == 127)
        #expect(stderr.hasPrefix("appd-exec: arguments: "), "\(stderr)")
    }

    @Test("a Landlock ABI above the kernel's is refused after the sandbox is built", rootOnly)
    func landlockMinimum() throws {
        let profile = profileText(sandboxRecords() + ["landlock-min-abi 99"], command: Self.app)
        expectRefused(try launch(profile: profile), mentioning: "landlock: kernel Landlock ABI")
    }

    @Test("a missing executable is reported with its errno", rootOnly)
    func missingExecutable() throws {
        let profile = profileText(sandboxRecords(), command: ["/usr/bin/does-not-exist"])
        expectRefused(
            try launch(profile: profile),
            mentioning: "execve: /usr/bin/does-not-exist (ENOENT)")
    }

    @Test("a missing bind source is refused, a missing ro-bind-try source is skipped", rootOnly)
    func bindSources() throws {
        let missing = profileText(
            sandboxRecords() + ["mount ro-bind /does/not/exist /x"], command: Self.app)
        expectRefused(
            try launch(profile: missing),
            mentioning: "mount: ro-bind source /does/not/exist (ENOENT)")
        let optional = profileText(
            sandboxRecords() + ["mount ro-bind-try /does/not/exist /x"],
            command: shell("test -e /x || echo APP-RAN"))
        let result = try launch(profile: optional)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutLines == ["APP-RAN"])
    }
}
