import AppdBase
import CLinux
import Glibc

/// Where an instance's stdin, stdout and stderr go: the one choice about output a front door
/// makes when it plans a launch (`SandboxLaunch.init(profile:launcher:cgroups:output:)`).
public enum LaunchOutput {
    /// This process's stdout and stderr; its stdin too when `keepStdin` (a console: `appd run
    /// --console`; appd-oci without a terminal, whose engine owns the pipes), else /dev/null.
    case inherited(keepStdin: Bool)
    /// A terminal (appd-oci's console socket): the app's stdin, stdout and stderr. The caller
    /// keeps it and closes it after the start.
    case terminal(Int32)
    /// A pipe, whose read end the launcher's output relay drains into a log file (rotated) and
    /// the journal: the app writes a pipe, never a host file (docs/app-output.md). The daemon's
    /// instances and `appd run` without a console.
    case relay(LogDestination)
}

/// Where the output relay writes: a file in a log folder the caller opened, and optionally
/// the journal. Its fds stay the caller's, who closes them after the start (or after `run`):
/// the launcher gets copies of them.
public struct LogDestination {
    /// The log folder (`logs/<app>/` of the state root), opened `O_DIRECTORY`.
    public var folder: Int32
    /// The file's name in it (`<instance>.log`).
    public var name: String
    /// Rotated past this size (at most `Int32.max`: the launcher's field).
    public var maxBytes: Int64
    /// A datagram socket connected to journald, or nil.
    public var journal: Int32?
    /// `KEY=VALUE` fields of every journal entry.
    public var journalFields: [String]

    public init(
        folder: Int32, name: String, maxBytes: Int64, journal: Int32? = nil,
        journalFields: [String] = []
    ) {
        self.folder = folder
        self.name = name
        self.maxBytes = min(maxBytes, Int64(Int32.max))
        self.journal = journal
        self.journalFields = journalFields
    }
}

extension LogDestination {
    /// `<logs>/<app>/`, made (0700) if missing, `logs` too when that is missing, and opened
    /// O_DIRECTORY|O_NOFOLLOW: a symlink planted as the folder is refused, not followed. Where
    /// the daemon's instances and `appd run` both have the relay write `<instance>.log`.
    public static func openFolder(logs: String, app: String) throws -> Int32 {
        let folder = "\(logs)/\(app)"
        var made = mkdir(folder, 0o700) == 0 || errno == EEXIST
        if !made && errno == ENOENT {
            // No logs folder yet (a fresh state root): it first, then the app's.
            if mkdir(logs, 0o700) != 0 && errno != EEXIST {
                throw AppdError.system("mkdir \(logs)")
            }
            made = mkdir(folder, 0o700) == 0 || errno == EEXIST
        }
        guard made else { throw AppdError.system("mkdir \(folder)") }
        let fd = open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw AppdError.system("open \(folder)") }
        return fd
    }
}

extension SandboxLaunch {
    /// The one way a front door plans a launch (the daemon, `appd run`, appd-oci's create and
    /// exec): the compiled profile, the launcher (`Launcher=` of `[Sandbox]`, else found), the
    /// cgroup settings, the profile's own limits, and where the output goes. For `.relay` the
    /// pipe is made here and is the launch's (`handedOver`): `run` closes it once the launcher
    /// holds it (or when the start fails); a caller of `start` closes `handedOver` after the
    /// start, whatever happened. A terminal and a destination's fds stay the caller's.
    public init(
        profile: SandboxProfile, launcher configured: String?, cgroups: CgroupSettings,
        output: LaunchOutput
    ) throws {
        let launcher = try Self.findLauncher(configured: configured)
        self.init(
            profile: profile, launcher: launcher, cgroups: cgroups, limits: profile.cgroupLimits)
        switch output {
        case .inherited(let keepStdin):
            self.keepStdin = keepStdin
        case .terminal(let terminal):
            input = terminal
            self.output = terminal
        case .relay(let destination):
            var pipe: [Int32] = [-1, -1]
            guard appd_pipe_cloexec(&pipe) == 0 else {
                throw AppdError.system("pipe for the app's output")
            }
            self.output = pipe[1]
            relay = OutputRelayArguments(
                readFD: pipe[0], logDirectoryFD: destination.folder, logName: destination.name,
                logMaxBytes: destination.maxBytes, journalFD: destination.journal,
                journalFields: destination.journalFields)
        }
    }

    /// The output pipe a `.relay` plan made (both ends): the launch's to close, `run` itself,
    /// a caller of `start` after it. Empty otherwise.
    public var handedOver: [Int32] {
        guard let relay, let output else { return [] }
        return [output, relay.readFD]
    }
}
