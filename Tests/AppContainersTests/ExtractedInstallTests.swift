import AppBundle
import Foundation
import Testing

@testable import AppContainers

/// The SHA-256 of every regular file below `bundle`, as the daemon's extractor records them.
func digests(of bundle: String) throws -> [String: [UInt8]] {
    var result: [String: [UInt8]] = [:]
    let enumerator = FileManager.default.enumerator(atPath: bundle)
    while let relative = enumerator?.nextObject() as? String {
        guard let info = statOf("\(bundle)/\(relative)"), info.st_mode & S_IFMT == S_IFREG else {
            continue
        }
        let fd = open("\(bundle)/\(relative)", O_RDONLY)
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        result[relative] = try ContentHasher.sha256(of: fd, what: relative, buffer: &buffer)
    }
    return result
}

@Suite(
    "install of an extracted bundle (the daemon's path): renamed into place, checked by its digests",
    .serialized, rootOnly)
struct ExtractedInstallTests {
    /// `<root>/incoming/<uuid>/Name.app`, as the daemon extracts into.
    func extracted(_ root: String, id: String) throws -> String {
        let folder = "\(root)/incoming/x"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        return try makeBundle(
            at: "\(folder)/Hello.app", id: id, extraFiles: ["Resources/data.txt": "payload"])
    }

    @Test("the extracted files become the installed ones (same inodes, no copy), sealed read-only")
    func renamedNotCopied() throws {
        let scratch = Scratch()
        let signer = try Signer()
        let store = try store(scratch.path, config: config(trusting: [try signer.trusted()]))
        let bundle = try signer.sign(try extracted(scratch.path, id: "com.example.moved"))
        let before = try #require(statOf("\(bundle)/Resources/data.txt"))
        let result = try store.install(extractedBundleAt: bundle, digests: try digests(of: bundle))
        let installed = try #require(result.app.bundlePath(in: store.root))
        let after = try #require(statOf("\(installed)/Resources/data.txt"))
        #expect(after.st_ino == before.st_ino && after.st_dev == before.st_dev)
        #expect(after.st_mode & 0o7777 == 0o444)
        #expect(statOf("\(installed)/Hello").map { $0.st_mode & 0o7777 } == 0o555)
        #expect(statOf("\(installed)/Resources").map { $0.st_mode & 0o7777 } == 0o555)
        #expect(statOf(bundle) == nil, "the extracted tree was moved, not left behind")
        try expectConsistent(scratch.path)
    }

    @Test("digests that are not those of the signed files are refused, and nothing is left")
    func wrongDigestsRefused() throws {
        let scratch = Scratch()
        let signer = try Signer()
        let store = try store(scratch.path, config: config(trusting: [try signer.trusted()]))
        let bundle = try signer.sign(try extracted(scratch.path, id: "com.example.forged"))
        var forged = try digests(of: bundle)
        forged["Resources/data.txt"] = [UInt8](repeating: 0, count: 32)
        let error = failure { _ = try store.install(extractedBundleAt: bundle, digests: forged) }
        #expect(error?.code == .invalidBundle)
        #expect(
            error?.description.contains("Resources/data.txt") == true,
            "\(String(describing: error))")
        #expect(try store.apps().isEmpty)
        #expect(entries(store.root.bundleContainersPath).isEmpty)
        try expectConsistent(scratch.path)
    }

    @Test(
        "two names that are one string to Swift (é composed and decomposed) are refused as a clash, by name"
    )
    func normalizationClash() throws {
        let scratch = Scratch()
        let store = try store(scratch.path)
        let bundle = try extracted(scratch.path, id: "com.example.clash")
        try "one".write(
            toFile: "\(bundle)/Resources/caf\u{E9}.txt", atomically: false, encoding: .utf8)
        try "two".write(
            toFile: "\(bundle)/Resources/cafe\u{301}.txt", atomically: false, encoding: .utf8)
        let error = failure {
            _ = try store.install(extractedBundleAt: bundle, digests: try digests(of: bundle))
        }
        #expect(error?.message.contains("names that clash") == true, "\(String(describing: error))")
        #expect(try store.apps().isEmpty)
        try expectConsistent(scratch.path)
    }

    @Test("a file the extractor did not hash is refused")
    func unhashedFileRefused() throws {
        let scratch = Scratch()
        let store = try store(scratch.path)
        let bundle = try extracted(scratch.path, id: "com.example.extra")
        var partial = try digests(of: bundle)
        partial["Resources/data.txt"] = nil
        let error = failure { _ = try store.install(extractedBundleAt: bundle, digests: partial) }
        #expect(
            error?.message.contains("was not extracted from the archive") == true,
            "\(String(describing: error))")
        #expect(try store.apps().isEmpty)
        try expectConsistent(scratch.path)
    }
}
