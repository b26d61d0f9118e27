import AppBundle
import Foundation
import TestSupport
import Testing

@testable import Sandbox

@Suite("HostLibraries")
struct HostLibrariesTests {
    /// A cache in glibc's format: the header, `entries` of 24 bytes, then the strings.
    static func cache(_ entries: [(String, String)]) -> [UInt8] {
        var strings: [UInt8] = []
        var offsets: [(Int, Int)] = []
        let stringsStart = 48 + entries.count * 24
        for (key, value) in entries {
            let k = stringsStart + strings.count
            strings += Array(key.utf8) + [0]
            let v = stringsStart + strings.count
            strings += Array(value.utf8) + [0]
            offsets.append((k, v))
        }
        var bytes = Array("glibc-ld.so.cache1.1".utf8)
        func u32(_ value: Int) { for k in 0..<4 { bytes.append(UInt8((value >> (8 * k)) & 0xff)) } }
        u32(entries.count)
        u32(strings.count)
        bytes += [UInt8](repeating: 0, count: 48 - bytes.count)
        for (k, v) in offsets {
            u32(0x0303)
            u32(k)
            u32(v)
            u32(0)
            bytes += [UInt8](repeating: 0, count: 8)
        }
        return bytes + strings
    }

    @Test("glibc's ld.so.cache is read: names to paths, in order")
    func parsesCache() {
        let parsed = HostLibraries.parseCache(
            Self.cache([
                ("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"), ("libc.so.6", "/lib32/libc.so.6"),
                ("libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1"),
            ]))
        #expect(parsed["libc.so.6"] == ["/lib/x86_64-linux-gnu/libc.so.6", "/lib32/libc.so.6"])
        #expect(parsed["libz.so.1"] == ["/usr/lib/x86_64-linux-gnu/libz.so.1"])
    }

    @Test("a malformed cache is empty or skips the bad entries, and never traps")
    func malformedCache() {
        let good = Self.cache([("libc.so.6", "/lib/libc.so.6"), ("libm.so.6", "/lib/libm.so.6")])
        #expect(HostLibraries.parseCache(Array(good.prefix(40))).isEmpty)
        var huge = good
        huge[20...23] = [0xff, 0xff, 0xff, 0x7f]  // 2^31 entries
        #expect(HostLibraries.parseCache(huge).isEmpty)
        var generator = SeededGenerator(seed: 38)
        for _ in 0..<3000 {
            var bytes = good
            for _ in 0..<Int.random(in: 1...6, using: &generator) {
                bytes[Int.random(in: 20..<bytes.count, using: &generator)] = UInt8.random(
                    in: 0...255, using: &generator)
            }
            _ = HostLibraries.parseCache(bytes)
            _ = HostLibraries.parseCache(
                Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &generator))))
        }
    }

    @Test(
        "this host: libc through the cache, the loader, and nothing beneath a path apps do not see")
    func thisHost() throws {
        let host = try HostLibraries(systemPaths: ["/usr"])
        let libc = host.library("libc.so.6", elfClass: .elf64, machine: 62, in: nil)
        #expect(libc?.hasSuffix("/libc.so.6") == true)
        #expect(host.hasFile("/lib64/ld-linux-x86-64.so.2", elfClass: .elf64, machine: 62))
        #expect(!host.hasFile("/lib64/ld-linux-x86-64.so.2", elfClass: .elf64, machine: 183))
        #expect(host.library("libc.so.6", elfClass: .elf64, machine: 183, in: nil) == nil)
        #expect(host.library("libnothere.so.9", elfClass: .elf64, machine: 62, in: nil) == nil)
        // /etc is on every host and shown to no app as a library path.
        #expect(!host.hasFile("/etc/passwd", elfClass: nil, machine: nil))
        #expect(!host.hasFile("/usr/../etc/passwd", elfClass: nil, machine: nil))
        #expect(host.hasFile("/bin/sh", elfClass: nil, machine: nil))
    }
}
