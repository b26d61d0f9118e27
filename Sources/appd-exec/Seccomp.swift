import CLinux
import Glibc

/// The seccomp filter: a raw `struct sock_filter` array exported by libseccomp in the Sandbox
/// module (docs/launcher-protocol.md). The launcher does not interpret it, it only checks that it
/// is a whole number of instructions, and installs it as the very last step before execve.
struct SeccompProgram {
    static let instructionSize = 8
    static let maximumInstructions = 4096  // BPF_MAXINSNS

    let bytes: [UInt8]

    init(_ bytes: [UInt8], required: Bool) throws {
        guard bytes.count % Self.instructionSize == 0 else {
            throw LaunchFailure(
                "seccomp", "the filter is \(bytes.count) bytes, not a multiple of 8")
        }
        guard bytes.count / Self.instructionSize <= Self.maximumInstructions else {
            throw LaunchFailure("seccomp", "the filter has more than 4096 instructions")
        }
        if required && bytes.isEmpty {
            throw LaunchFailure(
                "seccomp", "the profile requires a filter but the seccomp fd was empty")
        }
        self.bytes = bytes
    }

    /// After this, the app's own filter decides which syscalls work, so it comes last.
    /// Single-threaded, so no TSYNC.
    func install(logDenials: Bool) throws {
        guard !bytes.isEmpty else { return }
        let count = UInt16(bytes.count / Self.instructionSize)
        _ = try bytes.withUnsafeBytes { raw in
            try sys(
                appd_seccomp_set_filter(raw.baseAddress, count, logDenials ? 1 : 0), "seccomp",
                "cannot install the filter")
        }
    }
}
