import LauncherProtocol
import Sandbox
import Testing

/// The status line (docs/launcher-protocol.md): written by appd-exec as `LauncherStatus.line`,
/// read by the daemon's `SandboxLaunch.parseStatus`.
@Suite("launcher status line")
struct StatusLineTests {
    @Test(
        "each status the launcher writes is the daemon's exit status",
        arguments: [
            (LauncherStatus.exited(0), AppExitStatus.exited(0)),
            (.exited(255), .exited(255)),
            (.exited(-1), .exited(-1)),
            (.signaled(9), .signaled(9)),
            (
                .failed("mount: ro-bind /a on /b (ENOENT)"),
                .failedToLaunch("mount: ro-bind /a on /b (ENOENT)")
            ),
            (.failed(""), .failedToLaunch("")),
        ])
    func roundTrip(status: LauncherStatus, expected: AppExitStatus) {
        #expect(LauncherStatus(line: status.line) == status)
        #expect(SandboxLaunch.parseStatus(status.line + "\n") == expected)
        // Only the first line counts: PID 1's report after an error is never read as the fate.
        #expect(SandboxLaunch.parseStatus(status.line + "\nexit 3\n") == expected)
    }

    @Test("a line that is none of the three is no status; the wait status is then all there is")
    func garbage() {
        for line in ["", "exit", "exit x", "signal 9 9", "exited 0", "ready", "Exit 0"] {
            #expect(LauncherStatus(line: line) == nil, "\(line)")
            #expect(SandboxLaunch.parseStatus(line) == nil, "\(line)")
        }
        #expect(SandboxLaunch.status(line: "", waitStatus: 3 << 8) == .exited(3))
        #expect(
            SandboxLaunch.status(line: "", waitStatus: nil)
                == .failedToLaunch("the launcher ended without a status"))
    }

    @Test("the template's ready line is no exit status")
    func ready() {
        #expect(LauncherStatus(line: LauncherStatus.readyLine) == nil)
    }
}
