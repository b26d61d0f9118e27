import Foundation
import Glibc
import Testing

/// What every test target needs to know about where it runs: built executables, root, and the
/// gate for root-only tests. One copy, used by every test target (`@_exported` from each
/// target's Support.swift).

/// Executables built next to this test binary by `swift build --build-tests` (appd, appctl,
/// appd-exec, Probe, the samples).
public func builtExecutable(_ name: String) -> String {
    let exe =
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        ?? CommandLine.arguments[0]
    return ((exe as NSString).deletingLastPathComponent as NSString).appendingPathComponent(name)
}

public let isRoot = getuid() == 0

/// The toolchain's Swift runtime, which the programs `swift build` links next to the test
/// binary load (the samples, and the probe: SwiftPM links even a C executable against
/// libswiftCore): not in the default `[Sandbox] SystemPaths`, so the tests that run them in a
/// sandbox add it (`toolchainSystemPaths`); a bundle that carries its runtime in Frameworks/
/// (scripts/build-sample) needs nothing of it.
public let toolchainRuntime =
    "\(ProcessInfo.processInfo.environment["SWIFT_ROOT"] ?? "/opt/swift")/usr/lib/swift/linux"

/// The appd.conf section that shows apps `toolchainRuntime` besides `/usr`.
public let toolchainSystemPaths = "\n[Sandbox]\nSystemPaths=/usr \(toolchainRuntime)\n"

/// CI (scripts/test with CI=true) sets APPD_REQUIRE_ROOT_TESTS=1: a root-only test then runs
/// and fails loudly instead of being skipped.
public let rootTestsRequired = ProcessInfo.processInfo.environment["APPD_REQUIRE_ROOT_TESTS"] == "1"

/// The trait of every test that needs root: namespaces, mounts, cgroups, chown, app uids.
public let rootOnly = Testing.ConditionTrait.enabled(
    if: isRoot || rootTestsRequired,
    "requires root (namespaces, mounts, cgroups, app uids); CI sets APPD_REQUIRE_ROOT_TESTS=1 to fail instead"
)

/// Runs a built tool (a name next to the test binary) or a program (an absolute path) and
/// returns its exit code with its stdout and stderr together. `environment` replaces the
/// tests' own when given; `input` names a file for its stdin.
public func runTool(
    _ tool: String, _ arguments: [String], stdin input: String? = nil,
    environment: [String: String]? = nil
)
    throws -> (code: Int32, output: String)
{
    let child = try ChildProcess(tool, arguments, environment: environment, input: input)
    let result = child.finish()
    return (result.code, result.stdout)
}

/// A kernel file (/proc, /sys/fs/cgroup) read with read(2) to its end: such files claim a
/// size of 0, and Foundation's readers may take that at its word.
public func readKernelFile(_ path: String) -> String {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return "" }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = read(fd, &buffer, buffer.count)
        guard count > 0 else { break }
        bytes += buffer[..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// A directory under `parent` made with mkdtemp, e.g. `/var/tmp/appd-daemon-test.XXXXXX`.
public func makeTemporaryDirectory(_ template: String) throws -> String {
    var bytes = Array(template.utf8CString)
    guard bytes.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
        throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
    }
    return String(decoding: bytes.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// The pids in an instance's cgroup (the API's `cgroup`): its directory and its leaves, `app`
/// (the launcher and the app) and `relay` (the output relay). An instance from before the
/// leaves has its processes in the directory itself.
public func instanceProcesses(cgroup: String, leaves: [String] = ["", "/app", "/relay"])
    -> [pid_t]
{
    leaves.flatMap {
        readKernelFile("\(cgroup)\($0)/cgroup.procs").split(separator: "\n")
            .compactMap { pid_t($0) }
    }
}

/// A TCP port on 127.0.0.1 nothing listens on now (the kernel's pick, released at once).
public func freeLocalPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    guard bound else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EADDRNOTAVAIL) }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// A host without the Swift toolchain, for a command run under `wrapper`: a private mount
/// namespace whose toolchain folder is an empty tmpfs (the wrapper fails, 111 or 112, when it
/// cannot make it so). The command's own runtime (a debug build links the toolchain's) comes from
/// a copy of it the apps never see, through LD_LIBRARY_PATH.
public struct HiddenToolchain {
    /// `SWIFT_ROOT`, or /opt/swift.
    public let toolchain = ProcessInfo.processInfo.environment["SWIFT_ROOT"] ?? "/opt/swift"
    /// Where the runtime is bound in the namespace.
    public let kept: String

    public init() throws {
        kept = try makeTemporaryDirectory("/var/tmp/appd-hidden-toolchain.XXXXXX")
    }

    /// The words to put before a command.
    public var wrapper: [String] {
        let script = """
            runtime=$1 kept=$2 toolchain=$3; shift 3
            mount --bind "$runtime" "$kept" && mount -t tmpfs -o mode=0755 tmpfs "$toolchain" \
              || exit 111
            [ -z "$(ls -A "$toolchain")" ] || exit 112
            LD_LIBRARY_PATH=$kept exec "$@"
            """
        return [
            "/usr/bin/unshare", "--mount", "--propagation", "private", "--",
            "/bin/sh", "-c", script, "sh", toolchainRuntime, kept, toolchain,
        ]
    }

    public func remove() { try? FileManager.default.removeItem(atPath: kept) }
}
