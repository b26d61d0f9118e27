import Foundation
@_exported import TestSupport
import Testing

/// The `appd-exec` executable built next to this test binary.
var launcherExecutable: String { builtExecutable("appd-exec") }

/// A scratch directory removed when the value goes away, even if the test failed.
final class Scratch {
    let path: String

    init(_ label: String = "appd-launcher-test") {
        var template = Array("\(NSTemporaryDirectory())/\(label).XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func sub(_ name: String) -> String { "\(path)/\(name)" }

    /// A world-writable directory: only the sandbox may stop the app from writing there.
    func openDirectory(_ name: String) throws -> String {
        let dir = sub(name)
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        chmod(dir, 0o777)
        return dir
    }
}

/// Hand-assembled seccomp programs (struct sock_filter: u16 code, u8 jt, u8 jf, u32 k, little
/// endian on the machines this runs on).
enum BPF {
    static func instruction(_ code: UInt16, _ jt: UInt8, _ jf: UInt8, _ k: UInt32) -> [UInt8] {
        [UInt8(code & 0xFF), UInt8(code >> 8), jt, jf]
            + [UInt8(k & 0xFF), UInt8((k >> 8) & 0xFF), UInt8((k >> 16) & 0xFF), UInt8(k >> 24)]
    }

    static let retAllow = instruction(0x06, 0, 0, 0x7FFF_0000)  // BPF_RET|BPF_K, SECCOMP_RET_ALLOW

    static let allowAll = retAllow

    /// Fails one syscall with EPERM: load nr, jeq, ret ERRNO(EPERM), ret ALLOW.
    static func deny(syscall number: UInt32) -> [UInt8] {
        instruction(0x20, 0, 0, 0)  // BPF_LD|BPF_W|BPF_ABS, offsetof(seccomp_data, nr)
            + instruction(0x15, 0, 1, number)  // BPF_JMP|BPF_JEQ|BPF_K
            + instruction(0x06, 0, 0, 0x0005_0000 | UInt32(EPERM))  // SECCOMP_RET_ERRNO
            + retAllow
    }

    static var unameNumber: UInt32 {
        #if arch(x86_64)
            63
        #elseif arch(arm64)
            160
        #else
            #error("add the uname syscall number of this architecture")
        #endif
    }
}

/// Percent-encodes a profile field as docs/launcher-protocol.md says.
func encodeField(_ value: String) -> String {
    var out = ""
    for byte in value.utf8 {
        if byte <= 0x20 || byte == 0x25 || byte == 0x7F {
            out += String(format: "%%%02X", byte)
        } else {
            out += String(decoding: [byte], as: UTF8.self)
        }
    }
    return out
}

/// A realistic sandbox: every namespace but user, tmpfs root, /usr and /etc read-only, proc,
/// dev, a private /tmp, uid/gid 65534, Landlock over all of it.
func sandboxRecords(uid: Int = 65534, gid: Int = 65534) -> [String] {
    [
        "unshare mount pid net ipc uts cgroup",
        "hostname appd-test",
        "loopback",
        "root tmpfs",
        "mount ro-bind /usr /usr",
        "mount ro-bind /etc /etc",
        "mount symlink usr/bin /bin",
        "mount symlink usr/lib /lib",
        "mount symlink usr/lib64 /lib64",
        "mount symlink usr/sbin /sbin",
        "mount proc /proc",
        "mount dev /dev",
        "mount tmpfs /tmp 1777",
        "uid \(uid)",
        "gid \(gid)",
        "groups \(gid)",
        "landlock-fs rx /usr",
        "landlock-fs ro /etc",
        "landlock-fs rw /tmp",
        "landlock-fs rw /dev",
        "landlock-fs ro /proc",
        "env PATH=/usr/bin:/bin",
    ]
}

/// The whole profile text: header, records, then exec and args for `command`.
func profileText(_ records: [String], command: [String]) -> String {
    var lines = ["appd-profile 1"] + records
    lines.append("exec \(encodeField(command[0]))")
    lines += command.map { "arg \(encodeField($0))" }
    return lines.joined(separator: "\n") + "\n"
}

func shell(_ script: String) -> [String] { ["/bin/sh", "-c", script] }

struct LaunchResult {
    var status: Int32
    var signaled: Bool
    var stdout: String
    var stderr: String
    /// What appd-exec wrote to --status-fd.
    var statusLine: String

    var stdoutLines: [String] { stdout.split(separator: "\n").map(String.init) }
}

/// Runs appd-exec with `profile` on fd 3, `seccomp` on fd 4 and a status file on fd 5, through
/// `sh -c exec ...` (a ChildProcess gets no fds above 2). `extraRedirections` opens more
/// fds for appd-exec to not pass on; `whileRunning` gets the pid and stdout once `readyMarker`
/// was printed. `launcherPrefix` runs before appd-exec (a command that execs its arguments).
func launch(
    profile: String, seccomp: [UInt8] = BPF.allowAll, extraRedirections: String = "",
    launcherPrefix: String = "",
    environment: [String: String] = [:], readyMarker: String? = nil,
    whileRunning: ((pid_t) -> Void)? = nil
) throws -> LaunchResult {
    let scratch = Scratch("appd-launch")
    try profile.write(toFile: scratch.sub("profile"), atomically: false, encoding: .utf8)
    try Data(seccomp).write(to: URL(fileURLWithPath: scratch.sub("filter")))
    _ = FileManager.default.createFile(atPath: scratch.sub("status"), contents: nil)

    let process = try ChildProcess(
        "/bin/sh",
        [
            "-c",
            "exec \(launcherPrefix) \"$0\" --profile-fd 3 --seccomp-fd 4 --status-fd 5 3<\"$1\" 4<\"$2\" 5>\"$3\" "
                + extraRedirections,
            launcherExecutable, scratch.sub("profile"), scratch.sub("filter"),
            scratch.sub("status"),
        ], environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
        input: "/dev/null", stderr: .capture)

    var stdout = Data()
    if let readyMarker, let out = process.output {
        let marker = Data(readyMarker.utf8)
        while stdout.range(of: marker) == nil {
            let chunk = out.availableData
            if chunk.isEmpty { break }
            stdout.append(chunk)
        }
        whileRunning?(process.processIdentifier)
    }
    let rest = process.finish()
    let statusLine = (try? String(contentsOfFile: scratch.sub("status"), encoding: .utf8)) ?? ""
    return LaunchResult(
        status: rest.code, signaled: process.signaled,
        stdout: String(decoding: stdout, as: UTF8.self) + rest.stdout, stderr: rest.stderr,
        statusLine: statusLine)
}

/// The sandbox with `extra` records, running `command`.
func run(
    _ command: [String], extra: [String] = [], seccomp: [UInt8] = BPF.allowAll,
    uid: Int = 65534, gid: Int = 65534, extraRedirections: String = ""
) throws -> LaunchResult {
    try launch(
        profile: profileText(sandboxRecords(uid: uid, gid: gid) + extra, command: command),
        seccomp: seccomp, extraRedirections: extraRedirections)
}

/// The host's mount table, to show that a launch left it alone.
func hostMounts() throws -> String {
    try String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)
}

/// Launches a sandbox whose app would print APP-RAN with `extra` redirections and options, and
/// expects appd-exec to refuse its arguments before anything runs: exit 127, the app never ran,
/// and `text` both on stderr (`appd-exec: arguments: ...`) and in the status line.
func expectArgumentsRefused(
    _ extra: String, mentioning text: String, sourceLocation: SourceLocation = #_sourceLocation
) throws {
    let result = try launch(
        profile: profileText(sandboxRecords(), command: shell("echo APP-RAN")),
        extraRedirections: extra)
    #expect(result.status == 127, sourceLocation: sourceLocation)
    #expect(!result.stdout.contains("APP-RAN"), "the app ran", sourceLocation: sourceLocation)
    #expect(
        result.stderr.contains("appd-exec: arguments: \(text)"), "\(result.stderr)",
        sourceLocation: sourceLocation)
    #expect(
        result.statusLine.contains(text), "\(result.statusLine)", sourceLocation: sourceLocation)
}
