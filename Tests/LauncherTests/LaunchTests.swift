import Foundation
import Testing

/// The app runs, its status comes back, signals reach it.
@Suite("appd-exec: running and ending the app", .serialized)
struct LaunchTests {
    @Test("/bin/true runs, and nothing is mounted in the caller's namespace", rootOnly)
    func trueRuns() throws {
        let before = try hostMounts()
        let result = try run(["/bin/true"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.statusLine == "exit 0\n")
        #expect(result.stderr.isEmpty)
        #expect(try hostMounts() == before)
    }

    @Test(
        "PID 1 confines itself on its own once the app process, sharing its memory, has exec'd",
        rootOnly)
    func initKeepsItsIdentity() throws {
        // The app process starts in PID 1's memory (vfork semantics) and gives up everything
        // there: its uid, no_new_privs and seccomp filter are its own. PID 1 then confines
        // itself (docs/launcher-protocol.md, "The helpers"): the app's uid as its effective one
        // only, no_new_privs and a filter of its own, and it keeps its signal mask. The app
        // waits a moment so that PID 1 is done.
        let fields = "grep -E '^(Uid|NoNewPrivs|Seccomp|SigBlk|CapEff):'"
        let result = try run(
            shell("sleep 0.5; \(fields) /proc/1/status; echo --; \(fields) /proc/self/status"))
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdoutLines.map {
            $0.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        }
        guard let split = lines.firstIndex(of: "--") else {
            Issue.record("no separator: \(lines)")
            return
        }
        let initLines = Array(lines[..<split])
        let appLines = Array(lines[(split + 1)...])
        #expect(initLines.contains("Uid: 0 65534 0 65534"), "\(initLines)")
        #expect(initLines.contains("NoNewPrivs: 1"), "\(initLines)")
        #expect(initLines.contains("Seccomp: 2"), "\(initLines)")
        #expect(initLines.contains("CapEff: 0000000000000000"), "\(initLines)")
        #expect(
            !initLines.contains("SigBlk: 0000000000000000"), "PID 1 blocks the signals it waits for"
        )
        #expect(appLines.contains("Uid: 65534 65534 65534 65534"), "\(appLines)")
        #expect(appLines.contains("NoNewPrivs: 1"), "\(appLines)")
        #expect(appLines.contains("Seccomp: 2"), "\(appLines)")
        #expect(appLines.contains("SigBlk: 0000000000000000"), "\(appLines)")
    }

    @Test("the app's exit code is the launcher's", rootOnly)
    func exitCodePropagates() throws {
        let result = try run(shell("exit 7"))
        #expect(result.status == 7, "\(result.stderr)")
        #expect(!result.signaled)
        #expect(result.statusLine == "exit 7\n")
    }

    @Test("an app killed by a signal gives 128+N", rootOnly)
    func signalDeath() throws {
        let killed = try run(shell("kill -9 $$"))
        #expect(killed.status == 128 + 9, "\(killed.stderr)")
        #expect(!killed.signaled, "the launcher exits with a code, it does not die itself")
        #expect(killed.statusLine == "signal 9\n")

        let segv = try run(shell("kill -SEGV $$"))
        #expect(segv.status == 128 + SIGSEGV)
        #expect(segv.statusLine == "signal \(SIGSEGV)\n")
    }

    @Test("SIGTERM sent to appd-exec reaches the app", rootOnly)
    func sigtermIsForwarded() throws {
        let script = """
            trap 'echo got-term; exit 42' TERM
            echo ready
            while :; do sleep 0.05; done
            """
        let result = try launch(
            profile: profileText(sandboxRecords(), command: shell(script)), readyMarker: "ready"
        ) { pid in
            kill(pid, SIGTERM)
        }
        #expect(result.stdoutLines == ["ready", "got-term"], "\(result.stderr)")
        #expect(result.status == 42)
        #expect(result.statusLine == "exit 42\n")
    }

    @Test("SIGUSR1 and SIGHUP are forwarded too", rootOnly)
    func otherSignalsAreForwarded() throws {
        let script = """
            trap 'echo got-usr1' USR1
            trap 'echo got-hup; exit 3' HUP
            echo ready
            while :; do sleep 0.05; done
            """
        let result = try launch(
            profile: profileText(sandboxRecords(), command: shell(script)), readyMarker: "ready"
        ) { pid in
            kill(pid, SIGUSR1)
            usleep(300_000)
            kill(pid, SIGHUP)
        }
        #expect(result.stdoutLines == ["ready", "got-usr1", "got-hup"], "\(result.stderr)")
        #expect(result.status == 3)
    }

    @Test("arguments are percent-decoded and passed in order", rootOnly)
    func argumentsArePassed() throws {
        let result = try run(["/usr/bin/printf", "[%s]\n", "two words", "tab\there", "100%", ""])
        #expect(
            result.stdoutLines == ["[two words]", "[tab\there]", "[100%]", "[]"], "\(result.stderr)"
        )
    }
}
