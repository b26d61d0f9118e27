/// What an ELF file says it needs to run, read by a parser of our own that trusts nothing in it.
///
/// Install, verify and `appd image` read every executable a bundle carries before it is
/// accepted: its class and machine (which CPU), its OS ABI, its interpreter (PT_INTERP, the
/// loader the kernel starts), and from its dynamic section the libraries it needs (DT_NEEDED)
/// and where it looks for them (DT_RUNPATH, DT_RPATH). The file is an app's: every offset and
/// size in it is checked against the file's size before it is used, every count is capped,
/// every sum is overflow-checked, and a header that is wrong is refused with the offset of the
/// field that is wrong. Nothing here traps on any input (ELFFileTests feeds it mutated files).
///
/// Bounds: 256 program headers, a 4 KiB interpreter path, 8192 dynamic entries, a 1 MiB
/// string table, 256 NEEDED entries of at most 255 bytes (a file name), a RUNPATH or RPATH of
/// at most 4 KiB. So one file's reading keeps at most ~70 KB of text, whatever it claims. Real
/// programs are far below each (a Swift program: 13 program headers, ~40 dynamic entries, 16
/// NEEDED, a 2 KiB string table).
public struct ELFFile: Sendable, Equatable {
    public enum Class: String, Sendable {
        case elf32 = "ELF32"
        case elf64 = "ELF64"
    }

    public let elfClass: Class
    public let bigEndian: Bool
    /// e_ident[EI_OSABI]: 0 (System V) or 3 (GNU/Linux) run on Linux.
    public let osABI: UInt8
    /// e_type: 2 (EXEC) or 3 (DYN: a PIE or a shared library).
    public let type: UInt16
    public let machine: UInt16
    /// PT_INTERP: the loader's path, nil for a static program (or a library).
    public let interpreter: String?
    /// PT_DYNAMIC is present: the loader resolves libraries (a static-pie has one and no
    /// interpreter, and needs nothing).
    public let hasDynamicSection: Bool
    public let needed: [String]
    /// DT_RUNPATH and DT_RPATH, split on `:`.
    public let runpath: [String]
    public let rpath: [String]

    public static let maxProgramHeaders = 256
    public static let maxInterpreterBytes = 4096
    public static let maxDynamicEntries = 8192
    public static let maxStringTableBytes = 1 << 20
    public static let maxNeeded = 256
    public static let maxNeededBytes = 255
    public static let maxSearchPathBytes = 4096

    /// A static program: no loader, no libraries.
    public var isStatic: Bool { interpreter == nil && needed.isEmpty }

    /// The engines' name (GOARCH) for this file's CPU, or nil for one appd does not name.
    public var architecture: String? {
        ELFMachine.architecture(machine: machine, elfClass: elfClass, bigEndian: bigEndian)
    }

    /// The machine as a person reads it: `x86-64`, `AArch64`, or `machine 1234`.
    public var machineName: String {
        ELFMachine.name(machine: machine, elfClass: elfClass, bigEndian: bigEndian)
    }

    /// Whether `bytes` (the first four of a file) are the ELF magic.
    public static func hasMagic(_ bytes: some Collection<UInt8>) -> Bool {
        bytes.count >= 4 && bytes.starts(with: [0x7f, 0x45, 0x4c, 0x46])
    }

    /// Parses the file whose bytes `read(offset, count)` returns (fewer than `count` only at
    /// the end of the file); `size` is the file's size.
    public init(size: UInt64, read: (UInt64, Int) throws -> [UInt8]) throws {
        self = try withoutActuallyEscaping(read) { read in
            var reader = ELFReader(size: size, read: read)
            return try ELFFile(&reader)
        }
    }

    /// Parses an ELF file held in memory.
    public init(bytes: [UInt8]) throws {
        try self.init(size: UInt64(bytes.count)) { offset, count in
            guard offset < UInt64(bytes.count) else { return [] }
            let start = Int(offset)
            return Array(bytes[start..<min(bytes.count, start + count)])
        }
    }
}

/// A malformed ELF file: what is wrong, and where (the offset of the field or table at fault).
public struct ELFError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

extension ELFFile {
    private init(_ r: inout ELFReader) throws {
        let ident = try r.bytes(at: 0, count: 16, what: "the ELF identification")
        guard Self.hasMagic(ident) else {
            throw ELFError("not an ELF file (offset 0: no \\x7fELF magic)")
        }
        switch ident[4] {
        case 1: elfClass = .elf32
        case 2: elfClass = .elf64
        default: throw ELFError("offset 4: unknown ELF class \(ident[4]) (1: 32-bit, 2: 64-bit)")
        }
        switch ident[5] {
        case 1: bigEndian = false
        case 2: bigEndian = true
        default: throw ELFError("offset 5: unknown data encoding \(ident[5]) (1: LSB, 2: MSB)")
        }
        guard ident[6] == 1 else { throw ELFError("offset 6: ELF version \(ident[6]), not 1") }
        osABI = ident[7]
        r.bigEndian = bigEndian
        r.wide = elfClass == .elf64
        let wide = r.wide

        // The file header: 52 bytes (ELF32) or 64 (ELF64).
        let header = try r.bytes(at: 0, count: wide ? 64 : 52, what: "the ELF header")
        type = r.u16(header, 16)
        machine = r.u16(header, 18)
        guard type == 2 || type == 3 else {
            throw ELFError(
                "offset 16: e_type \(type) is neither an executable (2) nor a shared object (3)")
        }
        let phoff = wide ? r.u64(header, 32) : UInt64(r.u32(header, 28))
        let phentsize = Int(r.u16(header, wide ? 54 : 42))
        let phnum = Int(r.u16(header, wide ? 56 : 44))
        let phoffField = wide ? 32 : 28
        let minimumEntry = wide ? 56 : 32
        if phnum > 0 && (phentsize < minimumEntry || phentsize > 4 * minimumEntry) {
            throw ELFError(
                "offset \(wide ? 54 : 42): program header size \(phentsize) (\(minimumEntry) expected)"
            )
        }
        // PN_XNUM (0xffff) would put the real count in a section header: no program has that
        // many segments, so it is refused with the rest.
        guard phnum <= Self.maxProgramHeaders else {
            throw ELFError(
                "offset \(wide ? 56 : 44): \(phnum) program headers (at most \(Self.maxProgramHeaders))"
            )
        }
        let table = try r.bytes(
            at: phoff, count: phnum * phentsize,
            what: "the program header table (offset \(phoffField) says \(phoff))")

        var segments: [Segment] = []
        var interpreter: String?
        var dynamic: Segment?
        for index in 0..<phnum {
            let base = index * phentsize
            let entryOffset = phoff &+ UInt64(base)
            let segment: Segment
            if wide {
                segment = Segment(
                    type: r.u32(table, base), offset: r.u64(table, base + 8),
                    vaddr: r.u64(table, base + 16), filesz: r.u64(table, base + 32))
            } else {
                segment = Segment(
                    type: r.u32(table, base), offset: UInt64(r.u32(table, base + 4)),
                    vaddr: UInt64(r.u32(table, base + 8)),
                    filesz: UInt64(r.u32(table, base + 16)))
            }
            switch segment.type {
            case 1: segments.append(segment)  // PT_LOAD
            case 2:  // PT_DYNAMIC
                guard dynamic == nil else {
                    throw ELFError("offset \(entryOffset): a second PT_DYNAMIC")
                }
                dynamic = segment
            case 3:  // PT_INTERP
                guard interpreter == nil else {
                    throw ELFError("offset \(entryOffset): a second PT_INTERP")
                }
                guard segment.filesz >= 2, segment.filesz <= UInt64(Self.maxInterpreterBytes) else {
                    throw ELFError(
                        "offset \(entryOffset): PT_INTERP of \(segment.filesz) bytes (a path of 1 to \(Self.maxInterpreterBytes - 1) bytes and its NUL)"
                    )
                }
                let path = try r.bytes(
                    at: segment.offset, count: Int(segment.filesz),
                    what: "PT_INTERP (program header at offset \(entryOffset))")
                guard path.last == 0, let nul = path.firstIndex(of: 0), nul == path.count - 1,
                    let text = String(validating: path[..<nul], as: UTF8.self)
                else {
                    throw ELFError(
                        "offset \(segment.offset): PT_INTERP is not one NUL-terminated UTF-8 path")
                }
                interpreter = text
            default: break
            }
        }
        self.interpreter = interpreter
        hasDynamicSection = dynamic != nil

        var needed: [String] = []
        var runpath: [String] = []
        var rpath: [String] = []
        if let dynamic {
            let entrySize = wide ? 16 : 8
            let count = min(Int(clamping: dynamic.filesz) / entrySize, Self.maxDynamicEntries + 1)
            guard count <= Self.maxDynamicEntries else {
                throw ELFError(
                    "offset \(dynamic.offset): PT_DYNAMIC of \(dynamic.filesz) bytes (at most \(Self.maxDynamicEntries) entries)"
                )
            }
            let entries = try r.bytes(
                at: dynamic.offset, count: count * entrySize, what: "the dynamic section")
            var strtab: UInt64?
            var strsz: UInt64?
            var neededOffsets: [UInt64] = []
            var runpathOffset: UInt64?
            var rpathOffset: UInt64?
            for index in 0..<count {
                let base = index * entrySize
                let tag = wide ? r.u64(entries, base) : UInt64(r.u32(entries, base))
                let value = wide ? r.u64(entries, base + 8) : UInt64(r.u32(entries, base + 4))
                switch tag {
                case 0: break  // DT_NULL: the end (handled below)
                case 1:
                    guard neededOffsets.count < Self.maxNeeded else {
                        throw ELFError(
                            "offset \(dynamic.offset &+ UInt64(base)): more than \(Self.maxNeeded) DT_NEEDED entries"
                        )
                    }
                    neededOffsets.append(value)
                case 5: strtab = value
                case 10: strsz = value
                case 15: rpathOffset = value
                case 29: runpathOffset = value
                default: break
                }
                if tag == 0 { break }
            }
            let wantsStrings = !neededOffsets.isEmpty || runpathOffset != nil || rpathOffset != nil
            if wantsStrings {
                guard let strtab, let strsz else {
                    throw ELFError(
                        "offset \(dynamic.offset): the dynamic section names libraries but has no DT_STRTAB or DT_STRSZ"
                    )
                }
                guard strsz <= UInt64(Self.maxStringTableBytes) else {
                    throw ELFError(
                        "offset \(dynamic.offset): DT_STRSZ \(strsz) (at most \(Self.maxStringTableBytes))"
                    )
                }
                // DT_STRTAB is an address: the PT_LOAD segment holding it gives its offset.
                guard
                    let segment = segments.first(where: {
                        strtab >= $0.vaddr && strtab - $0.vaddr < $0.filesz
                            && strsz <= $0.filesz - (strtab - $0.vaddr)
                    })
                else {
                    throw ELFError(
                        "offset \(dynamic.offset): DT_STRTAB \(hex(strtab)) (\(strsz) bytes) lies in no loaded segment of the file"
                    )
                }
                let (fileOffset, overflow) = segment.offset.addingReportingOverflow(
                    strtab - segment.vaddr)
                guard !overflow else {
                    throw ELFError("offset \(dynamic.offset): DT_STRTAB \(hex(strtab)) overflows")
                }
                let strings = try r.bytes(
                    at: fileOffset, count: Int(strsz), what: "the dynamic string table")
                func string(_ offset: UInt64, _ what: String, max: Int) throws -> String {
                    guard offset < UInt64(strings.count),
                        let end = strings[Int(offset)...].firstIndex(of: 0)
                    else {
                        throw ELFError(
                            "offset \(fileOffset): \(what) at string \(offset) runs past the string table (\(strsz) bytes)"
                        )
                    }
                    guard end - Int(offset) <= max else {
                        throw ELFError(
                            "offset \(fileOffset &+ offset): \(what) of \(end - Int(offset)) bytes (at most \(max))"
                        )
                    }
                    guard let text = String(validating: strings[Int(offset)..<end], as: UTF8.self)
                    else {
                        throw ELFError(
                            "offset \(fileOffset &+ offset): \(what) is not UTF-8")
                    }
                    return text
                }
                for offset in neededOffsets {
                    let name = try string(offset, "DT_NEEDED", max: Self.maxNeededBytes)
                    guard !name.isEmpty else {
                        throw ELFError("offset \(fileOffset &+ offset): an empty DT_NEEDED")
                    }
                    needed.append(name)
                }
                if let runpathOffset {
                    runpath = try string(runpathOffset, "DT_RUNPATH", max: Self.maxSearchPathBytes)
                        .split(separator: ":").map(
                            String.init)
                }
                if let rpathOffset {
                    rpath = try string(rpathOffset, "DT_RPATH", max: Self.maxSearchPathBytes).split(
                        separator: ":"
                    ).map(
                        String.init)
                }
            }
        }
        self.needed = needed
        self.runpath = runpath
        self.rpath = rpath
    }
}

private struct Segment {
    var type: UInt32
    var offset: UInt64
    var vaddr: UInt64
    var filesz: UInt64
}

private func hex(_ value: UInt64) -> String { "0x" + String(value, radix: 16) }

/// Bounded reads of the file: a read past the end is an error naming the offset.
private struct ELFReader {
    let size: UInt64
    let read: (UInt64, Int) throws -> [UInt8]
    var bigEndian = false
    var wide = true

    init(size: UInt64, read: @escaping (UInt64, Int) throws -> [UInt8]) {
        self.size = size
        self.read = read
    }

    /// Exactly `count` bytes at `offset`, or an error saying what runs past the end.
    func bytes(at offset: UInt64, count: Int, what: String) throws -> [UInt8] {
        guard count >= 0 else { throw ELFError("offset \(offset): \(what) has a negative size") }
        let (end, overflow) = offset.addingReportingOverflow(UInt64(count))
        guard !overflow, end <= size else {
            throw ELFError(
                "offset \(offset): \(what) (\(count) bytes) runs past the end of the file (\(size) bytes); truncated?"
            )
        }
        if count == 0 { return [] }
        let bytes = try read(offset, count)
        guard bytes.count == count else {
            throw ELFError("offset \(offset): \(what) could not be read whole; truncated?")
        }
        return bytes
    }

    // Fixed-offset fields of buffers whose length the caller checked.
    func u16(_ b: [UInt8], _ i: Int) -> UInt16 {
        let (x, y) = (UInt16(b[i]), UInt16(b[i + 1]))
        return bigEndian ? x << 8 | y : y << 8 | x
    }

    func u32(_ b: [UInt8], _ i: Int) -> UInt32 {
        var value: UInt32 = 0
        for k in 0..<4 {
            value |= UInt32(b[i + k]) << (bigEndian ? UInt32(24 - 8 * k) : UInt32(8 * k))
        }
        return value
    }

    func u64(_ b: [UInt8], _ i: Int) -> UInt64 {
        var value: UInt64 = 0
        for k in 0..<8 {
            value |= UInt64(b[i + k]) << (bigEndian ? UInt64(56 - 8 * k) : UInt64(8 * k))
        }
        return value
    }
}
