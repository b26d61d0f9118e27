import AppContainers
import AppdBase
import Foundation
import Glibc
import TestSupport
import Testing

@testable import AppdConfig
@testable import appd_oci

/// A config's hooks run as the host's root: only executables appd.conf's `[OCI] Hooks=` lists
/// (docs/oci-runtime.md, "Hooks"). The refusals need nothing of the host.
@Suite("appd-oci hooks: only what the node allows")
struct OCIHookCheckTests {
    static func hooks(_ json: String) throws -> OCISpec.Hooks {
        try JSONDecoder().decode(OCISpec.Hooks.self, from: Data(json.utf8))
    }

    @Test(
        "a hook the node does not list, one in the container's namespaces, a relative path, a bad timeout: refused with one line naming it"
    )
    func refused() throws {
        let cases: [(String, String)] = [
            (
                #"{"prestart": [{"path": "/bin/sh"}]}"#,
                "prestart hook /bin/sh is not an executable this node allows"
            ),
            (
                #"{"poststop": [{"path": "/usr/bin/true"}, {"path": "/bin/sh"}]}"#,
                "poststop hook /bin/sh"
            ),
            (
                #"{"createContainer": [{"path": "/usr/bin/true"}]}"#,
                "createContainer hooks would run in the container's namespaces"
            ),
            (#"{"startContainer": [{"path": "/usr/bin/true"}]}"#, "startContainer hooks"),
            (#"{"createRuntime": [{"path": "true"}]}"#, "createRuntime hook true is not absolute"),
            (#"{"poststart": [{"path": "/usr/bin/true", "timeout": 0}]}"#, "a timeout of 0 s"),
            (
                #"{"prestart": [{"path": "/usr/bin/missing-hook"}]}"#,
                "/usr/bin/missing-hook is not an executable"
            ),
        ]
        for (json, named) in cases {
            #expect {
                try OCIHooks.check(Self.hooks(json), allowed: [HookRule(path: "/usr/bin/true")])
            } throws: { error in
                let message = (error as? AppdError)?.message ?? ""
                return message.contains(named) && !message.contains("\n")
            }
        }
        let many =
            "[" + Array(repeating: #"{"path": "/usr/bin/true"}"#, count: 17).joined(separator: ",")
            + "]"
        #expect(throws: AppdError.self) {
            try OCIHooks.check(
                Self.hooks(#"{"prestart": \#(many)}"#), allowed: [HookRule(path: "/usr/bin/true")])
        }
    }

    @Test("a listed executable is allowed by its resolved path (/bin/true is /usr/bin/true here)")
    func allowed() throws {
        try OCIHooks.check(
            Self.hooks(
                #"{"prestart": [{"path": "/bin/true", "args": ["true"]}], "poststop": [{"path": "/usr/bin/true", "timeout": 5}]}"#
            ),
            allowed: [HookRule(path: "/usr/bin/true")])
        try OCIHooks.check(nil, allowed: [])
    }

    @Test(
        "[OCI] Hooks= takes absolute paths, space-separated; anything else names the file and line")
    func configuration() throws {
        #expect(
            AppdConfiguration().oci.hooks.map(\.description) == [
                "/usr/sbin/dockerd:libnetwork-setkey:TRACEPARENT,TRACESTATE",
                "/usr/bin/dockerd:libnetwork-setkey:TRACEPARENT,TRACESTATE",
            ])
        #expect(try AppdConfiguration.parse("[OCI]\nHooks=\n", file: "t.conf").oci.hooks.isEmpty)
        let parsed = try AppdConfiguration.parse(
            "[OCI]\nHooks=/usr/sbin/dockerd /usr/libexec/oci/hook:*:PATH,HOOK_MODE\n",
            file: "t.conf")
        #expect(
            parsed.oci.hooks == [
                HookRule(path: "/usr/sbin/dockerd"),
                HookRule(
                    path: "/usr/libexec/oci/hook", argv0: "*", environment: ["PATH", "HOOK_MODE"]),
            ])
        for bad in [
            "[OCI]\nHooks=dockerd\n", "[OCI]\nHook=/x\n", "[OCI]\nHooks=/x::LD_PRELOAD\n",
            "[OCI]\nHooks=/x::GLIBC_TUNABLES\n", "[OCI]\nHooks=/x:a:b:c\n",
        ] {
            #expect {
                try AppdConfiguration.parse(bad, file: "t.conf")
            } throws: { error in
                ((error as? AppdError)?.message ?? "").contains("t.conf:2")
            }
        }
    }
}

/// Hooks run by a real `appd-oci --plain`, as root on the host, with the state on stdin.
@Suite("appd-oci hooks: run at create, start and delete", .serialized, rootOnly)
struct OCIHookRunTests {
    /// A hook script that appends its phase and its stdin to `log`, or fails with `code`.
    static func script(at path: String, log: String, code: Int = 0, sleep: Int = 0) throws {
        let text = """
            #!/bin/sh
            { printf '%s ' "$1"; cat; echo; } >> \(log)
            \(sleep > 0 ? "sleep \(sleep)" : "")
            echo "hook output line" >&2
            exit \(code)
            """
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(chmod(path, 0o755) == 0)
    }

    static func hooks(_ hook: String, failing: String? = nil, timeout: Int? = nil) -> [String: Any]
    {
        func entry(_ path: String, _ phase: String) -> [String: Any] {
            var object: [String: Any] = ["path": path, "args": [path, phase]]
            if let timeout { object["timeout"] = timeout }
            return object
        }
        return [
            "prestart": [entry(failing ?? hook, "prestart")],
            "createRuntime": [entry(hook, "createRuntime")],
            "poststart": [entry(hook, "poststart")], "poststop": [entry(hook, "poststop")],
        ]
    }

    @Test(
        "prestart, createRuntime, poststart and poststop each run once, in order, with the state (id, status, pid, bundle) on stdin"
    )
    func lifecycle() throws {
        var bundle = try PlainContainerTests.Bundle()
        defer { bundle.remove() }
        let hook = "\(bundle.directory)/hook.sh"
        let log = "\(bundle.directory)/hooks.log"
        try Self.script(at: hook, log: log)
        bundle.appdConfiguration = "[OCI]\nHooks=\(hook)\n"
        try bundle.write(script: "exit 0") { $0["hooks"] = Self.hooks(hook) }
        let result = try bundle.oci(["run", "--bundle", bundle.bundle, bundle.id])
        #expect(result.code == 0, "\(result.stderr)")
        let lines = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
            .split(separator: "\n").map(String.init)
        #expect(
            lines.map { $0.split(separator: " ").first.map(String.init) ?? "" }
                == ["prestart", "createRuntime", "poststart", "poststop"], "\(lines)")
        for (line, status) in zip(lines, ["created", "created", "running", "stopped"]) {
            let json = line.drop { $0 != " " }.dropFirst()
            let state = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
            #expect(state?["id"] as? String == bundle.id, "\(line)")
            #expect(state?["status"] as? String == status, "\(line)")
            #expect(state?["bundle"] as? String == bundle.bundle, "\(line)")
            let pid = state?["pid"] as? Int ?? -1
            #expect(status == "stopped" ? pid == 0 : pid > 0, "\(line)")
        }
    }

    @Test(
        "a prestart hook that fails, or outlives its timeout, fails create with its reason and leaves nothing; one not listed never runs"
    )
    func failures() throws {
        var bundle = try PlainContainerTests.Bundle()
        defer { bundle.remove() }
        let hook = "\(bundle.directory)/hook.sh"
        let failing = "\(bundle.directory)/failing.sh"
        let slow = "\(bundle.directory)/slow.sh"
        let log = "\(bundle.directory)/hooks.log"
        try Self.script(at: hook, log: log)
        try Self.script(at: failing, log: log, code: 3)
        try Self.script(at: slow, log: log, sleep: 30)
        bundle.appdConfiguration = "[OCI]\nHooks=\(hook) \(failing) \(slow)\n"

        try bundle.write(script: "exit 0") { $0["hooks"] = Self.hooks(hook, failing: failing) }
        var result = try bundle.oci(["create", "--bundle", bundle.bundle, bundle.id])
        #expect(result.code == 1)
        #expect(
            result.stderr.contains(
                "the prestart hook \(failing) failed (exit status 3): hook output line"),
            "\(result.stderr)")
        #expect(try bundle.oci(["state", bundle.id]).stderr.contains("container does not exist"))

        let started = Date()
        try bundle.write(script: "exit 0") {
            $0["hooks"] = Self.hooks(hook, failing: slow, timeout: 1)
        }
        result = try bundle.oci(["create", "--bundle", bundle.bundle, bundle.id])
        #expect(result.code == 1)
        #expect(result.stderr.contains("killed after its timeout of 1 s"), "\(result.stderr)")
        #expect(
            Date().timeIntervalSince(started) < 20, "the hook was not waited for past its timeout")
        #expect(try bundle.oci(["state", bundle.id]).stderr.contains("container does not exist"))
        let slots =
            (try? FileManager.default.contentsOfDirectory(atPath: "\(bundle.directory)/userns"))
            ?? []
        #expect(slots.isEmpty, "\(slots)")

        // Not listed: refused before anything runs.
        try "".write(toFile: log, atomically: true, encoding: .utf8)
        bundle.appdConfiguration = "[OCI]\nHooks=\(failing)\n"
        try bundle.write(script: "exit 0") { $0["hooks"] = Self.hooks(hook) }
        result = try bundle.oci(["create", "--bundle", bundle.bundle, bundle.id])
        #expect(result.code == 1)
        #expect(result.stderr.contains("is not an executable this node allows"), "\(result.stderr)")
        #expect((try? String(contentsOfFile: log, encoding: .utf8)) == "")
    }
}

/// What appd-oci runs on the host (hooks, busctl) is waited for and read within bounds.
@Suite("HostCommand: bounded in time and output")
struct HostCommandTests {
    func shell(_ script: String, input: [UInt8] = [], timeout: Int = 10) throws
        -> (result: HostCommand.Result, seconds: Double)
    {
        let started = Date()
        let result = try HostCommand(
            path: "/bin/sh", arguments: ["sh", "-c", script], environment: ["PATH=/usr/bin:/bin"],
            input: input, timeoutSeconds: timeout
        ).run()
        return (result, Date().timeIntervalSince(started))
    }

    @Test("its exit status and output; the environment is exactly the one given")
    func status() throws {
        let run = try shell("echo \"[$HOME]\"; exit 7")
        #expect(run.result.status >> 8 == 7 && !run.result.timedOut)
        #expect(run.result.output == "[]\n")
        #expect(run.result.describe(timeout: 10) == "exit status 7")
    }

    @Test(
        "a program that leaves a child holding its output, ignores 1 MiB of input, or prints 1 MiB: returns at once, with 4 KiB kept"
    )
    func bounded() throws {
        let detached = try shell("sleep 30 & echo started")
        #expect(detached.result.status == 0 && detached.result.output == "started\n")
        #expect(detached.seconds < 3, "waited \(detached.seconds) s for a child it left")
        let ignoring = try shell("exit 0", input: [UInt8](repeating: 0x41, count: 1 << 20))
        #expect(ignoring.result.status == 0 && ignoring.seconds < 3)
        let reading = try shell("wc -c", input: [UInt8](repeating: 0x41, count: 1 << 20))
        #expect(reading.result.output.trimmingCharacters(in: .whitespacesAndNewlines) == "1048576")
        let loud = try shell("head -c 1048576 /dev/zero | tr '\\0' x")
        #expect(loud.result.status == 0 && loud.result.output.utf8.count == 4096)
    }

    @Test("past its timeout it is killed and the call returns")
    func timeout() throws {
        let run = try shell("sleep 30", timeout: 1)
        #expect(run.result.timedOut && run.seconds < 5)
        #expect(run.result.describe(timeout: 1) == "killed after its timeout of 1 s")
    }
}
