import Glibc
import LauncherProtocol

/// The close-on-exec pipe from PID 1 and the app process back to the outer launcher. Each
/// sends one line (LauncherProtocol's `LauncherStatus`): PID 1 `exit CODE` or `signal N` when
/// the app ended, either of them `error STEP: MESSAGE` when a step failed. The pipe closes by itself when the app execs,
/// so a line in it is only ever about the sandbox, never from the app.
struct Report {
    let fd: Int32

    func send(_ line: String) {
        FileIO.writeAll(fd, singleLine(line) + "\n")
    }

    /// Reports `error`, and ends the process without running the app.
    func fail(_ error: Error) -> Never {
        send(LauncherStatus.failed(failureText(error)).line)
        _exit(127)
    }
}

/// What the outer launcher learnt from the report pipe and PID 1's wait status.
enum Outcome {
    case ended(ExitStatus)
    case failed(String)

    /// The first error wins: a failed app process makes PID 1 report `exit 127` after it.
    init(report: [UInt8], initStatus: ExitStatus) {
        // Walked line by line, not split into an array (a runtime metadata lookup per launch).
        var first: String?
        var error: String?
        var start = 0
        while start < report.count && error == nil {
            let end = report[start...].firstIndex(of: 0x0A) ?? report.count
            if end > start {
                let line = String(decoding: report[start..<end], as: UTF8.self)
                if case .failed(let message)? = LauncherStatus(line: line) {
                    error = message
                } else if first == nil {
                    first = line
                }
            }
            start = end + 1
        }
        if let error {
            self = .failed(error)
        } else if let line = first, let status = ExitStatus(line: line) {
            self = .ended(status)
        } else if case .signaled = initStatus {
            // PID 1 was killed (the supervisor's cgroup.kill, or SIGKILL to the launcher's
            // children): the whole namespace went with it.
            self = .ended(initStatus)
        } else {
            self = .failed("init: ended (\(initStatus.line)) without reporting the app's status")
        }
    }
}
