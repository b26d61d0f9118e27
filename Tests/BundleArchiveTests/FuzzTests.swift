import AppdBase
import BundleArchive
import Foundation
import Testing

/// Random damage to a valid archive: whatever comes of it, the extractor either extracts it or
/// throws `AppdError`, never crashes, and never creates anything outside its directory.
@Suite("mutated archives")
struct FuzzTests {
    static let rounds = 3000

    @Test("thousands of mutated archives extract or throw AppdError, and write nothing outside")
    func mutations() throws {
        let seedTree = Scratch()
        let source = seedTree.sub("Seed.app")
        mkdir(source, 0o755)
        try writeFile("\(source)/Info.plist", Array("<plist/>\n".utf8))
        try writeFile("\(source)/Hello", Array("#!/bin/sh\n".utf8), mode: 0o755)
        try writeFile("\(source)/a/b/deep.txt", randomBytes(3000, seed: 1))
        try writeFile(
            "\(source)/\(String(repeating: "l", count: 90))/\(String(repeating: "m", count: 40))",
            [1, 2, 3])
        symlink("a/b/deep.txt", "\(source)/link")
        // Stored as given (the installer judges links); a mutation must still never write through it.
        symlink("../victim", "\(source)/up")
        let base = try archive(of: source)

        var generator = SeededGenerator(seed: 0xA11D)
        var outcomes = (accepted: 0, refused: 0)
        let scratch = Scratch("archive-fuzz")
        let victim = scratch.directory("victim")
        for round in 0..<Self.rounds {
            let mutated = Self.mutate(base, using: &generator)
            let chunk = Int.random(in: 1...4096, using: &generator)
            // A fresh, empty directory each round, next to the victim the archive's link aims at.
            let out = scratch.directory("out")
            do {
                try extract(mutated, into: out, chunks: [chunk])
                outcomes.accepted += 1
            } catch is AppdError {
                outcomes.refused += 1
            } catch {
                Issue.record("round \(round): not an AppdError: \(error)")
            }
            guard listing(scratch.path) == ["out", "victim"], listing(victim).isEmpty else {
                Issue.record(
                    "round \(round) wrote outside: \(listing(scratch.path)), victim \(listing(victim))"
                )
                return
            }
            try FileManager.default.removeItem(atPath: out)
        }
        // Both outcomes happen, or the mutations are not exercising anything.
        #expect(outcomes.accepted > 50, "\(outcomes)")
        #expect(outcomes.refused > 1000, "\(outcomes)")
    }

    static func mutate(_ base: [UInt8], using generator: inout SeededGenerator) -> [UInt8] {
        var bytes = base
        for _ in 0..<Int.random(in: 1...3, using: &generator) where bytes.count >= 512 {
            let blocks = bytes.count / 512
            let block = Int.random(in: 0..<blocks, using: &generator) * 512
            switch Int.random(in: 0..<7, using: &generator) {
            case 0:
                for _ in 0..<Int.random(in: 1...8, using: &generator) {
                    bytes[Int.random(in: 0..<bytes.count, using: &generator)] ^= UInt8.random(
                        in: 1...255, using: &generator)
                }
            case 1:
                bytes = Array(bytes.prefix(Int.random(in: 0..<bytes.count, using: &generator)))
            case 2:
                let copy = bytes[block..<(block + 512)]
                bytes.insert(
                    contentsOf: copy, at: Int.random(in: 0...blocks, using: &generator) * 512)
            case 3:
                bytes.removeSubrange(block..<(block + 512))
            case 4:
                let other = Int.random(in: 0..<blocks, using: &generator) * 512
                let saved = Array(bytes[block..<(block + 512)])
                bytes.replaceSubrange(block..<(block + 512), with: bytes[other..<(other + 512)])
                bytes.replaceSubrange(other..<(other + 512), with: saved)
            case 5:
                // A plausible field value in a header, with the checksum made right again, so
                // the damage reaches past the checksum test.
                guard let header = headerBlocks(bytes).randomElement(using: &generator) else {
                    continue
                }
                let values =
                    Array("/.0123457 xL25K1gS\u{0}".utf8) + [
                        0x80, 0xFF, UInt8.random(in: 0...255, using: &generator),
                    ]
                bytes[header + Int.random(in: 0..<345, using: &generator)] =
                    values.randomElement(using: &generator) ?? 0
                fixChecksum(&bytes, at: header)
            default:
                // A name that tries to escape or pass through a link.
                guard let header = headerBlocks(bytes).randomElement(using: &generator) else {
                    continue
                }
                let prefixes = ["../", "/", "./", "a/../../", "up/", "link/", "a//", "Hello/"]
                let prefix = Array((prefixes.randomElement(using: &generator) ?? "").utf8)
                bytes.replaceSubrange(header..<(header + prefix.count), with: prefix)
                fixChecksum(&bytes, at: header)
            }
        }
        return bytes
    }

    /// Offsets of the blocks that look like headers (ustar magic in place).
    static func headerBlocks(_ bytes: [UInt8]) -> [Int] {
        stride(from: 0, to: bytes.count - 511, by: 512).filter {
            bytes[($0 + 257)..<($0 + 262)].elementsEqual("ustar".utf8)
        }
    }

    static func fixChecksum(_ bytes: inout [UInt8], at header: Int) {
        for index in 148..<156 { bytes[header + index] = 32 }
        let sum = bytes[header..<(header + 512)].reduce(0) { $0 + Int($1) }
        let field = Array(String(format: "%06o", sum).utf8) + [0, 32]
        bytes.replaceSubrange((header + 148)..<(header + 156), with: field)
    }
}
