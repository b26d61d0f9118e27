/// A minimal ELF file written byte by byte, for programs of a machine this host has no compiler
/// for and for headers no linker would write: an ELF header, PT_LOAD over the whole file,
/// PT_INTERP when there is an interpreter, PT_DYNAMIC with DT_NEEDED, DT_RUNPATH, DT_STRTAB and
/// DT_STRSZ. The kernel would not run it (no code); the readers of headers see a real program.
public struct ELFBuilder {
    public var wide = true
    public var bigEndian = false
    /// e_machine: 62 x86-64, 183 AArch64, 3 i386.
    public var machine: UInt16 = 62
    public var osABI: UInt8 = 0
    /// e_type: 2 EXEC, 3 DYN.
    public var type: UInt16 = 3
    public var interpreter: String? = "/lib64/ld-linux-x86-64.so.2"
    public var needed: [String] = ["libc.so.6"]
    public var runpath: String?
    public var rpath: String?

    public init() {}

    /// The x86-64 program of this host's kind, needing `needed`.
    public static func x8664(needed: [String] = ["libc.so.6"], runpath: String? = nil) -> Self {
        var builder = ELFBuilder()
        builder.needed = needed
        builder.runpath = runpath
        return builder
    }

    /// An AArch64 program (Debian's loader path), needing libc.
    public static func aarch64() -> Self {
        var builder = ELFBuilder()
        builder.machine = 183
        builder.interpreter = "/lib/ld-linux-aarch64.so.1"
        return builder
    }

    public var bytes: [UInt8] {
        let headerSize = wide ? 64 : 52
        let phentsize = wide ? 56 : 32
        let hasDynamic = !needed.isEmpty || runpath != nil || rpath != nil
        let phnum = 1 + (interpreter == nil ? 0 : 1) + (hasDynamic ? 1 : 0)
        let base: UInt64 = 0x40_0000

        var strings: [UInt8] = [0]
        func add(_ text: String) -> UInt64 {
            let offset = UInt64(strings.count)
            strings += Array(text.utf8) + [0]
            return offset
        }
        var dynamic: [(UInt64, UInt64)] = []
        for name in needed { dynamic.append((1, add(name))) }
        if let runpath { dynamic.append((29, add(runpath))) }
        if let rpath { dynamic.append((15, add(rpath))) }

        let interpOffset = headerSize + phnum * phentsize
        let interpBytes: [UInt8] = interpreter.map { Array($0.utf8) + [0] } ?? []
        let stringsOffset = interpOffset + interpBytes.count
        let dynamicOffset = (stringsOffset + strings.count + 7) & ~7
        dynamic.append((5, base + UInt64(stringsOffset)))
        dynamic.append((10, UInt64(strings.count)))
        dynamic.append((0, 0))
        let entrySize = wide ? 16 : 8
        let dynamicSize = hasDynamic ? dynamic.count * entrySize : 0
        let total = dynamicOffset + dynamicSize

        var out = [UInt8](repeating: 0, count: total)
        func put(_ value: UInt64, _ at: Int, _ size: Int) {
            for k in 0..<size {
                let shift = bigEndian ? 8 * (size - 1 - k) : 8 * k
                out[at + k] = UInt8(truncatingIfNeeded: value >> UInt64(shift))
            }
        }
        func word(_ value: UInt64, _ at: Int) { put(value, at, wide ? 8 : 4) }
        out[0...3] = [0x7f, 0x45, 0x4c, 0x46]
        out[4] = wide ? 2 : 1
        out[5] = bigEndian ? 2 : 1
        out[6] = 1
        out[7] = osABI
        put(UInt64(type), 16, 2)
        put(UInt64(machine), 18, 2)
        put(1, 20, 4)
        word(base, 24)
        word(UInt64(headerSize), wide ? 32 : 28)
        put(UInt64(headerSize), wide ? 52 : 40, 2)
        put(UInt64(phentsize), wide ? 54 : 42, 2)
        put(UInt64(phnum), wide ? 56 : 44, 2)

        var index = 0
        func segment(_ type: UInt32, offset: Int, size: Int) {
            let at = headerSize + index * phentsize
            index += 1
            put(UInt64(type), at, 4)
            if wide {
                put(UInt64(offset), at + 8, 8)
                put(base + UInt64(offset), at + 16, 8)
                put(base + UInt64(offset), at + 24, 8)
                put(UInt64(size), at + 32, 8)
                put(UInt64(size), at + 40, 8)
            } else {
                put(UInt64(offset), at + 4, 4)
                put(base + UInt64(offset), at + 8, 4)
                put(base + UInt64(offset), at + 12, 4)
                put(UInt64(size), at + 16, 4)
                put(UInt64(size), at + 20, 4)
            }
        }
        segment(1, offset: 0, size: total)
        if interpreter != nil { segment(3, offset: interpOffset, size: interpBytes.count) }
        if hasDynamic { segment(2, offset: dynamicOffset, size: dynamicSize) }
        out.replaceSubrange(interpOffset..<interpOffset + interpBytes.count, with: interpBytes)
        out.replaceSubrange(stringsOffset..<stringsOffset + strings.count, with: strings)
        if hasDynamic {
            for (i, (tag, value)) in dynamic.enumerated() {
                word(tag, dynamicOffset + i * entrySize)
                word(value, dynamicOffset + i * entrySize + entrySize / 2)
            }
        }
        return out
    }
}
