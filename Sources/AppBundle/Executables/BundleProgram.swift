import AppdBase
import Glibc

/// A program a bundle carries, as read from its first bytes: an ELF file (its headers parsed
/// by `ELFFile`) or a script (`#!` and its interpreter).
public struct BundleProgram: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case elf(ELFFile)
        /// The interpreter a `#!` line names (its first word).
        case script(interpreter: String)
    }

    /// Relative to the bundle root.
    public let path: String
    public let kind: Kind

    public init(path: String, kind: Kind) {
        self.path = path
        self.kind = kind
    }

    public var elf: ELFFile? {
        if case .elf(let elf) = kind { elf } else { nil }
    }

    /// The longest `#!` line read (the kernel's own limit is 256 bytes since Linux 5.1).
    static let maxShebangBytes = 256

    /// What the open file `fd` of `size` bytes is: an ELF file, a script when it has an
    /// execute bit, nil for anything else; a failure for an ELF file whose headers are wrong.
    /// Reads with pread: the caller's offset is left alone.
    public static func read(fd: Int32, size: Int64, executableBit: Bool = false) -> Result<
        Kind?, ELFError
    > {
        let size = UInt64(max(0, size))
        func pread(_ offset: UInt64, _ count: Int) throws -> [UInt8] {
            guard let start = off_t(exactly: offset) else {
                throw ELFError("offset \(offset): beyond what this host can read")
            }
            var buffer = [UInt8](repeating: 0, count: count)
            var done = 0
            while done < count {
                let n = buffer.withUnsafeMutableBytes { raw in
                    retryingInterrupts {
                        Glibc.pread(fd, raw.baseAddress! + done, count - done, start + off_t(done))
                    }
                }
                if n < 0 {
                    throw ELFError("offset \(offset): read failed: \(errnoName(errno))")
                }
                if n == 0 { break }
                done += n
            }
            return Array(buffer[..<done])
        }
        let head: [UInt8]
        do { head = try pread(0, Int(min(size, UInt64(maxShebangBytes)))) } catch {
            return .failure(error as? ELFError ?? ELFError("\(error)"))
        }
        if ELFFile.hasMagic(head) {
            do { return .success(.elf(try ELFFile(size: size, read: pread))) } catch {
                return .failure(error as? ELFError ?? ELFError("\(error)"))
            }
        }
        guard executableBit, head.starts(with: [0x23, 0x21]) else { return .success(nil) }
        return .success(.script(interpreter: interpreter(shebang: head)))
    }

    /// The first word after `#!`, up to the end of the line (or of the bytes read).
    static func interpreter(shebang head: [UInt8]) -> String {
        let line = head.dropFirst(2).prefix { $0 != 0x0a }
        let words = line.split(whereSeparator: { $0 == 0x20 || $0 == 0x09 || $0 == 0x0d })
        guard let first = words.first else { return "" }
        return String(decoding: first, as: UTF8.self)
    }
}

extension ELFMachine {
    /// e_ident[EI_OSABI] as a person reads it.
    public static func osABIName(_ abi: UInt8) -> String {
        switch abi {
        case 0: "System V"
        case 1: "HP-UX"
        case 2: "NetBSD"
        case 3: "GNU/Linux"
        case 6: "Solaris"
        case 9: "FreeBSD"
        case 12: "OpenBSD"
        default: "ABI \(abi)"
        }
    }
}
