import Foundation
import Testing

@testable import AppBundle

/// Every hostile bundle is refused with a message that names the file and the problem.
@Suite("hostile bundles")
struct HostileTests {
    /// Builds a valid bundle, lets `damage` break it, and returns the problems found.
    func refused(
        limits: BundleLimits = .init(), info: [String: Any] = validInfo, macos: Bool = false,
        _ damage: (String) throws -> Void = { _ in }
    ) throws -> [String] {
        let scratch = Scratch()
        let path = try makeBundle(scratch.sub("Evil.app"), info: info, macos: macos)
        try damage(path)
        let found = problems(path, limits: limits)
        #expect(!found.isEmpty, "the bundle was accepted")
        return found
    }

    func expect(
        _ found: [String], contains text: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(
            found.contains { $0.contains(text) }, "no problem mentions '\(text)': \(found)",
            sourceLocation: sourceLocation)
    }

    @Test("AppdHostExecutables holds absolute, normal paths of programs, at most 32, none twice")
    func hostExecutablesForm() throws {
        let cases: [(Any, String)] = [
            (["usr/bin/python3"], "AppdHostExecutables 'usr/bin/python3' is not an absolute path"),
            (["/usr/bin/../bin/sh"], "is not a normal path"),
            (["/usr/bin/"], "is not a normal path"),
            (["/bin/sh", "/bin/sh"], "AppdHostExecutables names '/bin/sh' twice"),
            ("/bin/sh", "AppdHostExecutables must be an array of strings, not a string"),
            (Array(repeating: "/bin/sh", count: 33), "names 33 programs; at most 32"),
            (["/bin/\u{1B}[31m"], "holds the control character"),
        ]
        for (value, text) in cases {
            var info = validInfo
            info["AppdHostExecutables"] = value
            expect(try refused(info: info), contains: text)
        }
        var info = validInfo
        info["AppdHostExecutables"] = ["/usr/bin/python3", "/bin/sh"]
        let scratch = Scratch()
        let bundle = try AppBundle.open(
            at: try makeBundle(scratch.sub("Good.app"), info: info), limits: .init())
        #expect(bundle.info.hostExecutables == ["/usr/bin/python3", "/bin/sh"])
        #expect(HostExecutables.isInterpreter("/usr/bin/python3.11"))
        #expect(HostExecutables.isInterpreter("/usr/bin/busybox"))
        #expect(HostExecutables.isInterpreter("/usr/bin/perl5.36.0"))
        #expect(!HostExecutables.isInterpreter("/usr/bin/id"))
    }

    @Test("symlinks out of the bundle: absolute, through .., and through another link")
    func escapingSymlinks() throws {
        expect(
            try refused { symlink("/etc/passwd", "\($0)/passwd") },
            contains: "passwd: is a symlink to the absolute path /etc/passwd")
        expect(
            try refused {
                try FileManager.default.createDirectory(
                    atPath: "\($0)/res", withIntermediateDirectories: true)
                symlink("../../secret", "\($0)/res/up")
            }, contains: "res/up: is a symlink to ../../secret, which leads out of the bundle")
        // `s -> .` is harmless alone, but `a/x -> s/../..` climbs one level per `..` through it.
        expect(
            try refused {
                try FileManager.default.createDirectory(
                    atPath: "\($0)/a", withIntermediateDirectories: true)
                symlink(".", "\($0)/a/s")
                symlink("s/../../..", "\($0)/a/x")
            }, contains: "a/x: is a symlink to s/../../.., which leads out of the bundle")
        expect(
            try refused { symlink("loop", "\($0)/loop") },
            contains: "loop: is a symlink to loop, which loops")
    }

    @Test("the executable: a symlink, a directory, missing, not executable")
    func badExecutable() throws {
        expect(
            try refused {
                try FileManager.default.removeItem(atPath: "\($0)/Hello")
                symlink("Info.plist", "\($0)/Hello")
            }, contains: "Hello: is a symlink; the executable must be a regular file")
        expect(
            try refused {
                try FileManager.default.removeItem(atPath: "\($0)/Hello")
                try FileManager.default.createDirectory(
                    atPath: "\($0)/Hello", withIntermediateDirectories: true)
            }, contains: "Hello: is missing")
        expect(
            try refused { try FileManager.default.removeItem(atPath: "\($0)/Hello") },
            contains: "Hello: is missing")
        expect(try refused { chmod("\($0)/Hello", 0o644) }, contains: "Hello: is not executable")
        expect(
            try refused(macos: true) { chmod("\($0)/Contents/MacOS/Hello", 0o644) },
            contains: "Contents/MacOS/Hello: is not executable")
    }

    @Test(
        "CFBundleExecutable that is not a plain file name",
        arguments: ["bin/Hello", "../Hello", "..", "-rf", "Hel\u{1}lo"])
    func executableNames(name: String) throws {
        var info = validInfo
        info["CFBundleExecutable"] = name
        expect(try refused(info: info), contains: "Info.plist: CFBundleExecutable")
    }

    @Test("hard links, setuid, setgid and world-writable files")
    func fileModes() throws {
        expect(
            try refused { link("\($0)/Hello", "\($0)/Hello2") }, contains: "Hello: has 2 hard links"
        )
        expect(
            try refused {
                try write("x", to: "\($0)/suid")
                chmod("\($0)/suid", 0o4755)
            }, contains: "suid: is setuid or setgid")
        expect(
            try refused {
                try write("x", to: "\($0)/sgid")
                chmod("\($0)/sgid", 0o2755)
            }, contains: "sgid: is setuid or setgid")
        expect(
            try refused {
                try write("x", to: "\($0)/ww")
                chmod("\($0)/ww", 0o666)
            }, contains: "ww: is world-writable")
    }

    @Test("device nodes, FIFOs and sockets")
    func specialFiles() throws {
        expect(try refused { mkfifo("\($0)/fifo", 0o644) }, contains: "fifo: is a FIFO")
        expect(
            try refused { path in
                let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
                defer { close(fd) }
                var address = sockaddr_un()
                address.sun_family = sa_family_t(AF_UNIX)
                let name = Array("\(path)/sock".utf8)
                withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: name) }
                _ = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                    }
                }
            }, contains: "sock: is a socket")
        if getuid() == 0 {
            expect(
                try refused { mknod("\($0)/null", S_IFCHR | 0o666, dev_t((1 << 8) | 3)) },
                contains: "null: is a device node")
        }
    }

    @Test("a bundle path that is itself a symlink, or not a directory")
    func bundlePath() throws {
        let scratch = Scratch()
        let real = try makeBundle(scratch.sub("Real.app"))
        symlink(real, scratch.sub("Link.app"))
        #expect(problems(scratch.sub("Link.app")).first?.contains("is a symlink") == true)
        try write("x", to: scratch.sub("File.app"))
        #expect(problems(scratch.sub("File.app")).first?.contains("is not a directory") == true)
        #expect(
            problems(scratch.sub("Missing.app")).first?.contains("no such bundle directory") == true
        )
    }

    @Test("Info.plist missing, empty, truncated, malformed, text, over the limit")
    func brokenInfoPlist() throws {
        expect(
            try refused { try FileManager.default.removeItem(atPath: "\($0)/Info.plist") },
            contains: "has no Info.plist")
        expect(
            try refused { try Data().write(to: URL(fileURLWithPath: "\($0)/Info.plist")) },
            contains: "Info.plist: is empty")
        let xml = plist(validInfo)
        expect(
            try refused {
                try xml.prefix(xml.count / 2).write(to: URL(fileURLWithPath: "\($0)/Info.plist"))
            },
            contains: "Info.plist: is not a well-formed XML property list")
        let binary = plist(validInfo, format: .binary)
        expect(
            try refused {
                try binary.prefix(binary.count - 10).write(
                    to: URL(fileURLWithPath: "\($0)/Info.plist"))
            },
            contains: "Info.plist: is a malformed binary property list")
        expect(
            try refused {
                try write("{ CFBundleIdentifier = com.example.x; }", to: "\($0)/Info.plist")
            },
            contains: "Info.plist: is not an XML or binary property list")
        expect(
            try refused { try write("hello", to: "\($0)/Info.plist") },
            contains: "Info.plist: is not an XML or binary property list")
        expect(
            try refused {
                try write("<?xml version=\"1.0\"?><plist><array/></plist>", to: "\($0)/Info.plist")
            },
            contains: "Info.plist: must hold a dictionary")
        var limits = BundleLimits()
        limits.maxInfoPlistBytes = 100
        expect(
            try refused(limits: limits),
            contains: "Info.plist: is \(xml.count) bytes, over the limit of 100")
    }

    @Test("binary plists with deep nesting, huge object counts, reference cycles")
    func hostileBinaryPlists() throws {
        // Deep nesting, binary and XML: built as bytes (a 10,000-deep Swift array would itself
        // overflow the test thread's stack when it is freed).
        for forge in [{ Self.nestedBinary(depth: 10_000) }, { Self.nestedXML(depth: 100_000) }] {
            expect(
                try refused { try forge().write(to: URL(fileURLWithPath: "\($0)/Info.plist")) },
                contains: "Info.plist: ")
        }

        // A trailer claiming 2^60 objects, and an array that contains itself.
        for forge in [Self.hugeObjectCount, Self.selfContainingArray] {
            expect(
                try refused { try forge().write(to: URL(fileURLWithPath: "\($0)/Info.plist")) },
                contains: "Info.plist: is a malformed binary property list")
        }
    }

    /// `depth` arrays, each holding the next, the last holding "a".
    static func nestedBinary(depth: Int) -> Data {
        var data = Data("bplist00".utf8)
        var offsets: [Int] = []
        for i in 0..<depth {
            offsets.append(data.count)
            data.append(contentsOf: [
                0xA1, UInt8((i + 1) >> 16), UInt8(((i + 1) >> 8) & 0xFF), UInt8((i + 1) & 0xFF),
            ])
        }
        offsets.append(data.count)
        data.append(contentsOf: [0x51, 0x61])
        let table = data.count
        for offset in offsets {
            data.append(contentsOf: [
                UInt8(offset >> 16), UInt8((offset >> 8) & 0xFF), UInt8(offset & 0xFF),
            ])
        }
        var trailer = [UInt8](repeating: 0, count: 32)
        trailer[6] = 3  // offset int size
        trailer[7] = 3  // object ref size
        let count = offsets.count
        trailer[13] = UInt8(count >> 16)
        trailer[14] = UInt8((count >> 8) & 0xFF)
        trailer[15] = UInt8(count & 0xFF)
        trailer[29] = UInt8(table >> 16)
        trailer[30] = UInt8((table >> 8) & 0xFF)
        trailer[31] = UInt8(table & 0xFF)
        data.append(contentsOf: trailer)
        return data
    }

    /// Valid keys plus `depth` nested arrays under `Deep`.
    static func nestedXML(depth: Int) -> Data {
        var text = "<?xml version=\"1.0\"?><plist version=\"1.0\"><dict>"
        text +=
            "<key>CFBundleIdentifier</key><string>com.example.hello</string><key>CFBundleExecutable</key>"
        text += "<string>Hello</string><key>CFBundleVersion</key><string>1</string><key>Deep</key>"
        text +=
            String(repeating: "<array>", count: depth) + String(repeating: "</array>", count: depth)
        return Data((text + "</dict></plist>").utf8)
    }

    /// A valid binary plist whose trailer claims an absurd number of objects.
    static func hugeObjectCount() -> Data {
        var data = plist(["a": "b"], format: .binary)
        let trailer = data.count - 32
        // numObjects is the big-endian UInt64 at trailer offset 8.
        for i in 0..<8 { data[trailer + 8 + i] = i == 0 ? 0x10 : 0 }
        return data
    }

    /// `bplist00` with one object: an array (0xA1) whose one element is object 0, itself.
    static func selfContainingArray() -> Data {
        var data = Data("bplist00".utf8)
        data.append(contentsOf: [0xA1, 0x00])  // object 0 at offset 8: array of 1 ref → object 0
        let offsetTable = data.count
        data.append(8)  // object 0 starts at offset 8
        var trailer = [UInt8](repeating: 0, count: 32)
        trailer[6] = 1  // offset int size
        trailer[7] = 1  // object ref size
        trailer[15] = 1  // numObjects = 1
        trailer[23] = 0  // top object = 0
        trailer[31] = UInt8(offsetTable)
        data.append(contentsOf: trailer)
        return data
    }

    @Test("duplicate keys and entity declarations in XML")
    func xmlTricks() throws {
        let duplicate = """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict>
            <key>CFBundleIdentifier</key><string>com.example.hello</string>
            <key>CFBundleExecutable</key><string>Hello</string>
            <key>CFBundleVersion</key><string>1</string>
            <key>CFBundleIdentifier</key><string>com.apple.evil</string>
            </dict></plist>
            """
        expect(
            try refused { try write(duplicate, to: "\($0)/Info.plist") },
            contains: "Info.plist: has the key 'CFBundleIdentifier' twice in one dictionary")
        let entities = """
            <?xml version="1.0"?><!DOCTYPE plist [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>
            <plist version="1.0"><dict><key>CFBundleIdentifier</key><string>&b;</string></dict></plist>
            """
        expect(
            try refused { try write(entities, to: "\($0)/Info.plist") },
            contains: "Info.plist: declares XML entities")
        // The same key in two different dictionaries is fine.
        let scratch = Scratch()
        var info = validInfo
        info["Nested"] = ["CFBundleVersion": "x"]
        #expect(problems(try makeBundle(scratch.sub("Ok.app"), info: info)) == [])
    }

    @Test("NUL bytes and control characters in the id or executable name")
    func controlCharacters() throws {
        for (key, value) in [
            ("CFBundleIdentifier", "com.example\u{0}.evil"),
            ("CFBundleIdentifier", "com.example.\u{1b}[31m"),
            ("CFBundleExecutable", "Hel\u{0}lo"), ("CFBundleExecutable", "Hello\n"),
        ] {
            var info = validInfo
            info[key] = value
            expect(try refused(info: info), contains: "Info.plist: \(key)")
        }
    }

    @Test("missing and wrongly typed required keys, placeholders, package type")
    func requiredKeys() throws {
        for key in ["CFBundleIdentifier", "CFBundleExecutable", "CFBundleVersion"] {
            var info = validInfo
            info[key] = nil
            expect(try refused(info: info), contains: "Info.plist: \(key) is missing")
            info[key] = 42
            expect(
                try refused(info: info),
                contains: "Info.plist: \(key) must be a string, not a integer")
        }
        var info = validInfo
        info["CFBundleIdentifier"] = "$(PRODUCT_BUNDLE_IDENTIFIER)"
        expect(
            try refused(info: info),
            contains:
                "Info.plist: CFBundleIdentifier holds the unexpanded build setting '$(PRODUCT_BUNDLE_IDENTIFIER)'"
        )
        info = validInfo
        info["CFBundleExecutable"] = "${EXECUTABLE_NAME}"
        expect(
            try refused(info: info),
            contains:
                "Info.plist: CFBundleExecutable holds the unexpanded build setting '${EXECUTABLE_NAME}'"
        )
        info = validInfo
        info["CFBundlePackageType"] = "FMWK"
        expect(try refused(info: info), contains: "CFBundlePackageType is 'FMWK'")
        info = validInfo
        info["CFBundleVersion"] = "1.0b3"
        expect(
            try refused(info: info),
            contains: "Info.plist: CFBundleVersion: '1.0b3' is not a valid bundle version")
    }

    @Test("entitlements Linux acts on must have the right type and no placeholders")
    func badEntitlements() throws {
        func withEntitlements(_ value: [String: Any]) throws -> [String] {
            try refused {
                try plist(value).write(to: URL(fileURLWithPath: "\($0)/Entitlements.plist"))
            }
        }
        expect(
            try withEntitlements(["com.apple.security.network.client": "yes"]),
            contains:
                "Entitlements.plist: com.apple.security.network.client must be a boolean, not a string"
        )
        expect(
            try withEntitlements([
                "com.apple.security.application-groups": ["$(TeamIdentifierPrefix)group.x"]
            ]),
            contains:
                "Entitlements.plist: com.apple.security.application-groups holds the unexpanded build setting"
        )
        expect(
            try refused { symlink("Info.plist", "\($0)/Entitlements.plist") },
            contains: "Entitlements.plist: is a symlink")
        // Placeholders in keys without a Linux effect only warn.
        let scratch = Scratch()
        let ok = try makeBundle(
            scratch.sub("Ok.app"),
            entitlements: plist(["keychain-access-groups": ["$(AppIdentifierPrefix)x"]]))
        let bundle = try AppBundle.open(at: ok)
        #expect(bundle.warnings.count == 1)
    }

    @Test("more files, more bytes, deeper paths, longer paths than the limits")
    func limits() throws {
        var limits = BundleLimits()
        limits.maxFiles = 5
        expect(
            try refused(limits: limits) { for i in 0..<10 { try write("x", to: "\($0)/f\(i)") } },
            contains: "more than 5 entries (MaxFiles)")
        limits = BundleLimits()
        limits.maxTotalBytes = 1000
        expect(
            try refused(limits: limits) {
                try write(String(repeating: "x", count: 2000), to: "\($0)/big")
            },
            contains: "more than 1000 bytes (MaxTotalBytes)")
        limits = BundleLimits()
        limits.maxDepth = 3
        expect(
            try refused(limits: limits) { try write("x", to: "\($0)/a/b/c/d/e") },
            contains: "a/b/c/d: directories nest deeper than 3 levels (MaxDepth)")
        limits = BundleLimits()
        limits.maxPathLength = 40
        expect(
            try refused(limits: limits) {
                try write("x", to: "\($0)/" + String(repeating: "n", count: 50))
            },
            contains: "over the limit of 40 (MaxPathLength)")
    }

    @Test("names that are not UTF-8 or hold control characters")
    func badNames() throws {
        expect(
            try refused { path in
                let name = Array("\(path)/bad-".utf8) + [0xFF, 0xFE, 0]
                let fd = name.withUnsafeBufferPointer {
                    $0.withMemoryRebound(to: CChar.self) {
                        open($0.baseAddress!, O_CREAT | O_WRONLY, 0o644)
                    }
                }
                close(fd)
            }, contains: "the name is not valid UTF-8")
        expect(
            try refused { try write("x", to: "\($0)/bell\u{7}") },
            contains: "the name contains control characters")
    }

    @Test("a flood of problems is capped, not listed forever")
    func problemCap() throws {
        let found = try refused { for i in 0..<300 { mkfifo("\($0)/fifo\(i)", 0o644) } }
        #expect(found.count <= BundleWalker.maxProblems + 1)
        expect(found, contains: "stopped looking")
    }
}
