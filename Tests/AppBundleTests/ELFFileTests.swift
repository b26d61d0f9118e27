import AppdBase
import Foundation
import TestSupport
import Testing

@testable import AppBundle

@Suite("ELFFile")
struct ELFFileTests {
    @Test("a dynamic x86-64 program: class, machine, interpreter, NEEDED and RUNPATH")
    func dynamicProgram() throws {
        let elf = try ELFFile(
            bytes: ELFBuilder.x8664(
                needed: ["libfoo.so.3", "libc.so.6"], runpath: "$ORIGIN/Frameworks:/opt/x"
            ).bytes)
        #expect(elf.elfClass == .elf64)
        #expect(!elf.bigEndian)
        #expect(elf.machine == 62)
        #expect(elf.architecture == "amd64")
        #expect(elf.interpreter == "/lib64/ld-linux-x86-64.so.2")
        #expect(elf.needed == ["libfoo.so.3", "libc.so.6"])
        #expect(elf.runpath == ["$ORIGIN/Frameworks", "/opt/x"])
        #expect(elf.rpath.isEmpty)
        #expect(!elf.isStatic)
    }

    @Test("a static program has no interpreter and needs nothing")
    func staticProgram() throws {
        var builder = ELFBuilder()
        builder.interpreter = nil
        builder.needed = []
        builder.type = 2
        let elf = try ELFFile(bytes: builder.bytes)
        #expect(elf.isStatic)
        #expect(!elf.hasDynamicSection)
    }

    @Test("another machine, 32-bit and big-endian files are read, and named")
    func otherMachines() throws {
        let arm = try ELFFile(bytes: ELFBuilder.aarch64().bytes)
        #expect(arm.architecture == "arm64")
        #expect(arm.interpreter == "/lib/ld-linux-aarch64.so.1")
        var i386 = ELFBuilder()
        i386.wide = false
        i386.machine = 3
        i386.interpreter = "/lib/ld-linux.so.2"
        let small = try ELFFile(bytes: i386.bytes)
        #expect(small.elfClass == .elf32)
        #expect(small.architecture == "386")
        #expect(small.needed == ["libc.so.6"])
        var s390 = ELFBuilder()
        s390.bigEndian = true
        s390.machine = 22
        let big = try ELFFile(bytes: s390.bytes)
        #expect(big.architecture == "s390x")
        #expect(big.needed == ["libc.so.6"])
        var odd = ELFBuilder()
        odd.machine = 4242
        let unknown = try ELFFile(bytes: odd.bytes)
        #expect(unknown.architecture == nil)
        #expect(unknown.machineName.contains("4242"))
    }

    @Test("this host's own /bin/sh reads as the loader says (interpreter, libc)")
    func realProgram() throws {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "/bin/sh")))
        let elf = try ELFFile(bytes: bytes)
        #expect(elf.architecture == ELFMachine.hostArchitecture)
        #expect(elf.interpreter?.hasPrefix("/lib") == true)
        #expect(elf.needed.contains("libc.so.6"))
    }

    @Test("malformed headers are refused with the offset at fault")
    func malformed() throws {
        let good = ELFBuilder.x8664().bytes
        func refusal(_ bytes: [UInt8]) -> String {
            do {
                _ = try ELFFile(bytes: bytes)
                return ""
            } catch let error as ELFError {
                return error.message
            } catch {
                return "\(error)"
            }
        }
        var badClass = good
        badClass[4] = 9
        #expect(refusal(badClass).hasPrefix("offset 4: unknown ELF class 9"))
        var badType = good
        badType[16] = 1
        #expect(refusal(badType).hasPrefix("offset 16: e_type 1"))
        var manyHeaders = good
        manyHeaders[56] = 0xff
        manyHeaders[57] = 0xff
        #expect(refusal(manyHeaders).hasPrefix("offset 56: 65535 program headers"))
        var farTable = good
        farTable[32 + 5] = 0x10  // e_phoff far past the end
        #expect(refusal(farTable).contains("runs past the end of the file"))
        #expect(refusal(Array(good.prefix(40))).hasPrefix("offset 0: the ELF header (64 bytes)"))
        #expect(refusal(Array(good.prefix(100))).contains("program header table"))
        #expect(refusal(Array(good.dropLast(8))).contains("the dynamic section"))
        #expect(refusal([0x7f, 0x45, 0x4c]).hasPrefix("offset 0: the ELF identification"))
    }

    @Test("a string offset or DT_STRTAB outside the file is refused, never read")
    func stringsOutside() throws {
        var builder = ELFBuilder.x8664(needed: ["libc.so.6"])
        builder.interpreter = nil
        var bytes = builder.bytes
        // The dynamic section is last: DT_NEEDED (tag 1) first, its value the string offset.
        let dynamic = bytes.count - 4 * 16
        bytes[dynamic + 8] = 0xf0
        bytes[dynamic + 9] = 0xff
        #expect(throws: ELFError.self) { try ELFFile(bytes: bytes) }
        var strtab = builder.bytes
        strtab[dynamic + 16 + 8 + 6] = 0x7f  // DT_STRTAB's address far outside any segment
        #expect {
            try ELFFile(bytes: strtab)
        } throws: { error in
            (error as? ELFError)?.message.contains("lies in no loaded segment") == true
        }
    }

    @Test(
        "a NEEDED longer than a file name, or too many, is refused: one file cannot make it keep megabytes"
    )
    func amplification() throws {
        #expect {
            try ELFFile(bytes: ELFBuilder.x8664(needed: [String(repeating: "a", count: 300)]).bytes)
        } throws: { error in
            (error as? ELFError)?.message.contains("DT_NEEDED of 300 bytes (at most 255)") == true
        }
        #expect {
            try ELFFile(
                bytes: ELFBuilder.x8664(needed: Array(repeating: "libc.so.6", count: 257)).bytes)
        } throws: { error in
            (error as? ELFError)?.message.contains("more than 256 DT_NEEDED entries") == true
        }
        #expect(
            try ELFFile(
                bytes: ELFBuilder.x8664(needed: Array(repeating: "libc.so.6", count: 256)).bytes
            ).needed.count == 256)
    }

    @Test("every truncation and thousands of mutated files are refused or read, never trap")
    func fuzz() throws {
        let seeds = [
            ELFBuilder.x8664(needed: ["a.so", "b.so"], runpath: "$ORIGIN").bytes,
            ELFBuilder.aarch64().bytes,
            try [UInt8](Data(contentsOf: URL(fileURLWithPath: "/bin/true"))),
        ]
        for seed in seeds.prefix(2) {
            for length in 0..<seed.count { _ = try? ELFFile(bytes: Array(seed.prefix(length))) }
        }
        var generator = SeededGenerator(seed: 38)
        for round in 0..<3000 {
            var bytes = seeds[round % seeds.count]
            // Mutations in the headers and tables, where the parser reads.
            let window = min(bytes.count, 512)
            for _ in 0..<Int.random(in: 1...8, using: &generator) {
                let at = Int.random(in: 0..<window, using: &generator)
                bytes[at] = UInt8.random(in: 0...255, using: &generator)
            }
            bytes[0...3] = [0x7f, 0x45, 0x4c, 0x46]
            _ = try? ELFFile(bytes: bytes)
        }
        for round in 0..<500 {
            _ = try? ELFFile(
                bytes: [0x7f, 0x45, 0x4c, 0x46] + randomBytes(200, seed: UInt64(round)))
        }
    }
}
