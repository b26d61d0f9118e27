import AppBundle
import AppdBase
import BundleArchive
import Foundation
import Testing

/// A small honest app: what each hostile case starts from.
private func honestApp() -> CraftedZip {
    var zip = CraftedZip()
    zip.file("iTunesMetadata.plist", "<plist/>")
    zip.directory("Payload/")
    zip.directory("Payload/Hello.app/")
    zip.file("Payload/Hello.app/Info.plist", "<plist>hello</plist>")
    zip.file("Payload/Hello.app/Hello", "#!/bin/sh\n", mode: 0o100755)
    zip.directory("Payload/Hello.app/Base.lproj/")
    zip.entries.append(
        .init(
            name: "Payload/Hello.app/Base.lproj/Main.strings",
            data: Array(repeating: UInt8(ascii: "a"), count: 70_000), method: 8))
    zip.symlink("Payload/Hello.app/Current", to: "Base.lproj")
    return zip
}

/// One crafted archive the reader must refuse, and the words its refusal must hold.
struct HostileZip: CustomTestStringConvertible, Sendable {
    var name: String
    var expected: String
    var limits = BundleLimits()
    /// Refused only when the files are written (inflated), not when the archive is opened.
    var atWrite = false
    var make: @Sendable () -> CraftedZip

    var testDescription: String { name }
}

private func adding(_ entry: CraftedZip.Entry) -> @Sendable () -> CraftedZip {
    {
        var zip = honestApp()
        zip.entries.append(entry)
        return zip
    }
}

private let hostileZips: [HostileZip] = [
    HostileZip(
        name: "traversal",
        expected: "entry 'Payload/Hello.app/../../etc/passwd' has a '..' component",
        make: adding(.init(name: "Payload/Hello.app/../../etc/passwd", data: [1]))),
    HostileZip(
        name: "absolute name", expected: "entry '/etc/cron.d/x' is an absolute path",
        make: adding(.init(name: "/etc/cron.d/x", data: [1]))),
    HostileZip(
        name: "empty component", expected: "has an empty path component",
        make: adding(.init(name: "Payload/Hello.app//x", data: [1]))),
    HostileZip(
        name: "dot component", expected: "has a '.' component",
        make: adding(.init(name: "Payload/Hello.app/./x", data: [1]))),
    HostileZip(
        name: "backslash", expected: "has a backslash in its name",
        make: adding(.init(name: "Payload\\Hello.app\\x", data: [1]))),
    HostileZip(
        name: "symlink out of the app", expected: "which leads out of the app",
        make: adding(
            .init(name: "Payload/Hello.app/up", data: Array("../../x".utf8), mode: 0o120777))),
    HostileZip(
        name: "symlink to an absolute path",
        expected: "is a symlink to the absolute path /etc/shadow",
        make: adding(
            .init(name: "Payload/Hello.app/shadow", data: Array("/etc/shadow".utf8), mode: 0o120777)
        )),
    HostileZip(
        name: "duplicate name", expected: "entry 'Payload/Hello.app/Info.plist' appears twice",
        make: adding(.init(name: "Payload/Hello.app/Info.plist", data: [1]))),
    HostileZip(
        name: "two apps",
        expected: "holds more than one app (Payload/Hello.app and Payload/Other.app)",
        make: adding(.init(name: "Payload/Other.app/x", data: [1]))),
    HostileZip(
        name: "a file outside a Name.app", expected: "is in Payload/ but not in a Name.app folder",
        make: adding(.init(name: "Payload/loose", data: [1]))),
    HostileZip(
        name: "encrypted entry (ZIPFoundation stops listing at it)",
        expected: "entry 9 of 9 is encrypted or its central directory is corrupt",
        make: adding(.init(name: "Payload/Hello.app/secret", data: [1, 2, 3], flags: 1))),
    HostileZip(
        name: "encrypted in its local header only (IPAArchive.isEncrypted)",
        expected:
            "entry 'Payload/Hello.app/secret' is encrypted; appd installs only plain archives",
        make: adding(
            .init(name: "Payload/Hello.app/secret", data: [1, 2, 3], flags: 1, centralFlags: 0))),
    HostileZip(
        name: "zip bomb by ratio",
        expected:
            "declares 100000000 bytes from 9 compressed, a ratio deflate cannot produce; refusing a zip bomb",
        make: adding(
            .init(
                name: "Payload/Hello.app/bomb", data: [0, 0, 0, 0], method: 8,
                declaredSize: 100_000_000))),
    HostileZip(
        name: "declared past MaxTotalBytes", expected: "(MaxTotalBytes); refusing a zip bomb",
        limits: {
            var limits = BundleLimits()
            limits.maxTotalBytes = 50_000
            return limits
        }(),
        make: honestApp),
    HostileZip(
        name: "stored entry whose sizes differ",
        expected: "is stored uncompressed but declares 5 bytes from 3",
        make: adding(.init(name: "Payload/Hello.app/odd", data: [1, 2, 3], declaredSize: 5))),
    HostileZip(
        name: "more entries than MaxFiles", expected: "entries, over 2 (MaxFiles)",
        limits: {
            var limits = BundleLimits()
            limits.maxFiles = 2
            return limits
        }(),
        make: {
            var zip = honestApp()
            for index in 0..<20 { zip.file("Payload/Hello.app/f\(index)", "x") }
            return zip
        }),
    HostileZip(
        name: "central directory cut short",
        expected: "entry 9 of 9 is encrypted or its central directory is corrupt",
        make: {
            var zip = honestApp()
            zip.declaredCount = 9
            return zip
        }),
    HostileZip(
        name: "no Payload", expected: "holds no Payload/Name.app folder",
        make: {
            var zip = CraftedZip()
            zip.file("Hello.app/Info.plist", "<plist/>")
            return zip
        }),
    HostileZip(
        name: "inflates past its declared size",
        expected: "inflates to more than the 10 bytes it declares; refusing a zip bomb",
        atWrite: true,
        make: adding(
            .init(
                name: "Payload/Hello.app/grows", data: Array(repeating: 7, count: 3000), method: 8,
                declaredSize: 10))),
    HostileZip(
        name: "CRC that does not match", expected: "Payload/Hello.app/bad: its CRC does not match",
        atWrite: true,
        make: adding(.init(name: "Payload/Hello.app/bad", data: [1, 2, 3], crc: 0xDEAD_BEEF))),
]

@Suite("the .ipa reader (IPAArchive) against crafted zips")
struct IPAArchiveTests {
    @Test(
        "an honest .ipa becomes the tar of its app: files, modes, a directory, a link; what is outside Payload/ is skipped"
    )
    func honest() throws {
        let scratch = Scratch("ipa-test")
        let path = scratch.sub("Hello.ipa")
        try honestApp().write(to: path)
        let ipa = try IPAArchive.open(at: path, shownAs: "Hello.ipa", limits: BundleLimits())
        #expect(ipa.appName == "Hello.app")
        #expect(ipa.fileCount == 3)
        #expect(ipa.totalBytes == 20 + 10 + 70_000)
        var tar: [UInt8] = []
        var files: [Int64] = []
        try ipa.write(onFile: { files.append($0) }, to: { tar += $0 })
        #expect(files.sorted() == [10, 20, 70_000])
        let out = scratch.directory("out")
        try extract(tar, into: out)
        let tree = snapshot(out)
        #expect(
            tree["Info.plist"] == .file(mode: 0o644, contents: Array("<plist>hello</plist>".utf8)))
        #expect(tree["Hello"] == .file(mode: 0o755, contents: Array("#!/bin/sh\n".utf8)))
        #expect(tree["Base.lproj"] == .directory(mode: 0o755))
        #expect(
            tree["Base.lproj/Main.strings"]
                == .file(mode: 0o644, contents: Array(repeating: UInt8(ascii: "a"), count: 70_000)))
        #expect(tree["Current"] == .symlink(target: "Base.lproj"))
        #expect(tree["iTunesMetadata.plist"] == nil)
        #expect(tree.count == 5, "\(tree)")
    }

    @Test(
        "a hostile .ipa is refused with a message naming the archive and the problem",
        arguments: hostileZips)
    func hostile(_ hostile: HostileZip) throws {
        let scratch = Scratch("ipa-test")
        let path = scratch.sub("Hostile.ipa")
        try hostile.make().write(to: path)
        do {
            let ipa = try IPAArchive.open(at: path, shownAs: "Hostile.ipa", limits: hostile.limits)
            #expect(hostile.atWrite, "opened, but should have been refused: \(hostile.expected)")
            try ipa.write { _ in }
            Issue.record("written, but should have been refused: \(hostile.expected)")
        } catch let error as AppdError {
            #expect(error.code == .invalidBundle)
            #expect(error.message.hasPrefix("Hostile.ipa"), "\(error.message)")
            #expect(error.message.contains(hostile.expected), "\(error.message)")
        }
    }

    @Test("a file that is no zip, or a zip cut short, is refused as not a zip archive")
    func notZip() throws {
        let scratch = Scratch("ipa-test")
        let path = scratch.sub("Cut.ipa")
        let whole = honestApp().bytes
        for bytes in [Array("not a zip at all".utf8), Array(whole.prefix(whole.count / 2))] {
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            #expect {
                _ = try IPAArchive.open(at: path, shownAs: "Cut.ipa", limits: BundleLimits())
            } throws: { error in
                (error as? AppdError)?.message.contains("Cut.ipa is not a zip archive") == true
            }
        }
    }

    @Test("a missing file and a directory are named as such")
    func notAFile() throws {
        let scratch = Scratch("ipa-test")
        #expect {
            _ = try IPAArchive.open(
                at: scratch.sub("none.ipa"), shownAs: "none.ipa", limits: BundleLimits())
        } throws: { error in
            (error as? AppdError)?.message == "none.ipa: no such file"
        }
        #expect {
            _ = try IPAArchive.open(at: scratch.path, shownAs: "dir.ipa", limits: BundleLimits())
        } throws: { error in
            (error as? AppdError)?.message.contains("dir.ipa is not a regular file") == true
        }
    }
}
