/// ELF machine numbers (e_machine) and the names the container engines give them (GOARCH, the
/// `architecture` of an OCI image config), for the CPUs Linux distributions ship.
public enum ELFMachine {
    /// (e_machine, class, big-endian) → GOARCH, and the name a person reads.
    public static let known:
        [(machine: UInt16, wide: Bool, bigEndian: Bool, arch: String, name: String)] =
            [
                (62, true, false, "amd64", "x86-64"),
                (183, true, false, "arm64", "AArch64"),
                (3, false, false, "386", "i386"),
                (40, false, false, "arm", "ARM"),
                (243, true, false, "riscv64", "RISC-V 64"),
                (21, true, false, "ppc64le", "PowerPC 64 LE"),
                (21, true, true, "ppc64", "PowerPC 64"),
                (22, true, true, "s390x", "IBM S/390"),
                (258, true, false, "loong64", "LoongArch 64"),
                (8, true, false, "mips64le", "MIPS 64 LE"),
            ]

    public static func architecture(machine: UInt16, elfClass: ELFFile.Class, bigEndian: Bool)
        -> String?
    {
        known.first {
            $0.machine == machine && $0.wide == (elfClass == .elf64) && $0.bigEndian == bigEndian
        }?.arch
    }

    public static func name(machine: UInt16, elfClass: ELFFile.Class, bigEndian: Bool) -> String {
        if let entry = known.first(where: {
            $0.machine == machine && $0.wide == (elfClass == .elf64) && $0.bigEndian == bigEndian
        }) {
            return entry.name
        }
        return "machine \(machine) (\(elfClass.rawValue), \(bigEndian ? "MSB" : "LSB"))"
    }

    /// The architecture this program was built for, which is the host's: appd runs natively.
    public static var hostArchitecture: String {
        #if arch(x86_64)
            "amd64"
        #elseif arch(arm64)
            "arm64"
        #elseif arch(i386)
            "386"
        #elseif arch(arm)
            "arm"
        #elseif arch(riscv64)
            "riscv64"
        #elseif arch(powerpc64le)
            "ppc64le"
        #elseif arch(s390x)
            "s390x"
        #else
            "unknown"
        #endif
    }
}
