/// The line the launcher writes on its status fd (and PID 1 on its report pipe to the outer
/// launcher): `exit CODE` or `signal N` when the app ended, `error STEP: MESSAGE` when the
/// sandbox could not be built. A template launcher says `ready` instead (`readyLine`).
public enum LauncherStatus: Equatable, Sendable {
    case exited(Int32)
    case signaled(Int32)
    case failed(String)

    static let exitWord = "exit "
    static let signalWord = "signal "
    static let errorWord = "error "

    /// What a template launcher says once the shared namespaces exist.
    public static let readyLine = "ready"

    /// The line, without its newline.
    public var line: String {
        switch self {
        case .exited(let code): Self.exitWord + String(code)
        case .signaled(let signal): Self.signalWord + String(signal)
        case .failed(let message): Self.errorWord + message
        }
    }

    /// Parses one line (without its newline); nil when it is none of the three. A bare
    /// `error` is a failure without a message.
    public init?(line: String) {
        if line.hasPrefix(Self.errorWord) {
            self = .failed(String(line.dropFirst(Self.errorWord.utf8.count)))
        } else if line == "error" {
            self = .failed("")
        } else if line.hasPrefix(Self.exitWord),
            let code = Int32(line.dropFirst(Self.exitWord.utf8.count))
        {
            self = .exited(code)
        } else if line.hasPrefix(Self.signalWord),
            let signal = Int32(line.dropFirst(Self.signalWord.utf8.count))
        {
            self = .signaled(signal)
        } else {
            return nil
        }
    }
}
