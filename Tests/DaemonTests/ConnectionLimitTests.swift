import AppdAPI
import AppdClient
import Foundation
import Testing

/// A local user who may connect, opening many connections (issue 13 §5): a Python script run
/// as another uid with setpriv. It opens COUNT connections; with `events` each asks
/// GET /v1/events, with `version` GET /v1/version (kept alive); it writes what each got (the
/// status, or `closed`) and one body per status to RESULT, then holds every connection open
/// until killed.
let attackerScript = #"""
    import json, selectors, socket, sys, time
    path, count, mode, result = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    target = {"events": "/v1/events", "version": "/v1/version"}[mode]
    socks, refused = [], 0
    for _ in range(count):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            s.sendall(("GET %s HTTP/1.1\r\nHost: appd\r\n\r\n" % target).encode())
            socks.append(s)
        except OSError:
            refused += 1
            s.close()
    selector = selectors.DefaultSelector()
    for s in socks:
        s.setblocking(False)
        selector.register(s, selectors.EVENT_READ)
    data = {s: b"" for s in socks}
    done = {}
    deadline = time.time() + 6
    while len(done) < len(socks) and time.time() < deadline:
        for key, _ in selector.select(0.2):
            s = key.fileobj
            try:
                chunk = s.recv(65536)
            except OSError:
                chunk = b""
            data[s] += chunk
            head, sep, body = data[s].partition(b"\r\n\r\n")
            if not chunk:
                done[s] = head.split(b" ")[1].decode() if head.startswith(b"HTTP/") else "closed"
            elif sep and s not in done:
                status = head.split(b" ")[1].decode()
                # An error's JSON body is whole once it ends with a newline.
                if status in ("200",) or body.endswith(b"\n"):
                    done[s] = status
            if s in done:
                selector.unregister(s)
    statuses, samples = {}, {}
    for s in socks:
        status = done.get(s, "pending")
        statuses[status] = statuses.get(status, 0) + 1
        samples.setdefault(status, data[s].partition(b"\r\n\r\n")[2].decode(errors="replace")[:600])
    with open(result + ".tmp", "w") as f:
        json.dump({"statuses": statuses, "samples": samples, "connectFailed": refused}, f)
    import os
    os.rename(result + ".tmp", result)
    while True:
        time.sleep(60)
    """#

struct AttackResult: Decodable {
    var statuses: [String: Int]
    var samples: [String: String]
    var connectFailed: Int

    func count(_ status: String) -> Int { statuses[status] ?? 0 }
}

/// One running attacker; killed (by its pid) when it goes away.
final class ConnectionAttacker {
    let process: ChildProcess
    let result: String

    init(_ daemon: TestDaemon, uid: Int, count: Int, mode: String) throws {
        let script = "\(daemon.directory)/attacker.py"
        if !FileManager.default.fileExists(atPath: script) {
            try attackerScript.write(toFile: script, atomically: true, encoding: .utf8)
            chmod(script, 0o644)
        }
        // Written by the attacker's uid: a directory of its own, open to it.
        let folder = "\(daemon.directory)/attacker-\(uid)-\(mode)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        chown(folder, uid_t(uid), gid_t(uid))
        result = "\(folder)/result.json"
        process = try ChildProcess(
            "/usr/bin/setpriv",
            [
                "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/python3", script,
                daemon.socket, "\(count)", mode, result,
            ], environment: ["PATH": "/usr/bin:/bin", "HOME": "/"], stdout: .discard)
    }

    /// What every connection got, once all have an answer (or 6 s passed).
    func outcome() throws -> AttackResult {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let data = FileManager.default.contents(atPath: result) {
                return try JSONDecoder().decode(AttackResult.self, from: data)
            }
            guard process.isRunning else { break }
            usleep(100_000)
        }
        throw DaemonFailure("the attacker wrote no result to \(result)")
    }

    func stop() {
        process.signal(SIGKILL)
        process.waitUntilExit()
    }

    deinit { stop() }
}

@Suite("connection limits per user, with a reserve for root", .serialized, rootOnly)
struct ConnectionLimitTests {
    static let config = """
        [API]
        SocketMode=0666
        MaxConnections=64
        ReservedConnections=8
        MaxConnectionsPerUser=16
        MaxStreamsPerUser=4
        """

    /// `GET path` as `uid` (curl through the socket); returns the status.
    func status(_ daemon: TestDaemon, uid: Int, _ path: String, maxTime: Int = 3) throws -> String {
        let result = try daemon.run(
            "/usr/bin/setpriv",
            [
                "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/curl",
                "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "\(maxTime)",
                "--unix-socket", daemon.socket,
                "http://appd\(path)",
            ])
        return result.output
    }

    @Test(
        "one user opening 100 event streams gets 4 and 429s for the rest; users together get 503 at the reserve; root is answered within 1 s throughout; the user is served again once it leaves"
    )
    func limits() throws {
        let daemon = try TestDaemon(config: Self.config)
        let root = Responsiveness(daemon)

        let streams = try ConnectionAttacker(daemon, uid: 65534, count: 100, mode: "events")
        let got = try streams.outcome()
        print("events as uid 65534: \(got.statuses), connect failed \(got.connectFailed)")
        #expect(got.count("200") == 4, "\(got.statuses)")
        // The rest: 429, or closed unanswered when more than 64 refusals were under way at once.
        #expect(got.count("429") >= 50, "\(got.statuses)")
        #expect(got.count("200") + got.count("429") + got.count("closed") == 100, "\(got.statuses)")
        let tooMany = got.samples["429"] ?? ""
        #expect(
            tooMany.contains("\"code\":\"tooManyRequests\"")
                || tooMany.contains("\"code\" : \"tooManyRequests\""), "\(tooMany)")
        #expect(tooMany.contains("uid 65534"), "\(tooMany)")
        #expect(tooMany.contains("hint"), "\(tooMany)")

        // Four more users, each holding what it may: together they reach the reserve.
        var others: [ConnectionAttacker] = []
        var unavailable = 0
        var served = got.count("200")
        for uid in 40001...40004 {
            let attacker = try ConnectionAttacker(daemon, uid: uid, count: 30, mode: "version")
            let outcome = try attacker.outcome()
            print("version as uid \(uid): \(outcome.statuses)")
            #expect(outcome.count("200") <= 16, "\(outcome.statuses)")
            served += outcome.count("200")
            unavailable += outcome.count("503")
            if let body = outcome.samples["503"] {
                #expect(body.contains("ReservedConnections"), "\(body)")
            }
            others.append(attacker)
        }
        #expect(served <= 64 - 8, "the users held \(served) connections")
        #expect(unavailable > 0, "no 503 at the reserve")
        // Root: more than a user may hold, in the reserve, all answered.
        for _ in 0..<5 {
            #expect(try daemon.client.get("/v1/version", as: APIDaemonInfo.self).caller.uid == 0)
        }
        #expect(
            try status(daemon, uid: 65534, "/v1/version") != "200",
            "a user was served past its limits")
        root.expectResponsive("connection attack")

        streams.stop()
        for other in others { other.stop() }
        // Gone: served again at once.
        #expect(try daemon.eventually { try status(daemon, uid: 65534, "/v1/version") == "200" })
        let list = try daemon.run(
            "/usr/bin/setpriv",
            [
                "--reuid=65534", "--regid=65534", "--clear-groups",
                builtExecutable("appctl"), "--socket", daemon.socket, "list",
            ])
        #expect(list.code == 0, "\(list.output)")
        let again = try ConnectionAttacker(daemon, uid: 65534, count: 2, mode: "events")
        #expect(try again.outcome().count("200") == 2)
        again.stop()
        try daemon.expectStillWorks("connections")
    }

    @Test(
        "the issue's attack at the issue's fd limit: defaults, appd at 1,024 fds, one user opens 1,100 event streams and nine more hold what they may; root is answered within 1 s and the daemon still installs"
    )
    func issueAttack() throws {
        let daemon = try TestDaemon(config: "[API]\nSocketMode=0666\n")
        guard let pid = daemon.process?.processIdentifier else {
            throw DaemonFailure("no daemon process")
        }
        let limit = try TestDaemon.run("/usr/bin/prlimit", ["--pid", "\(pid)", "--nofile=1024:"])
        #expect(limit.code == 0, "\(limit.output)")
        let root = Responsiveness(daemon)
        let streams = try ConnectionAttacker(daemon, uid: 65534, count: 1100, mode: "events")
        let got = try streams.outcome()
        print(
            "1,100 event streams as uid 65534: \(got.statuses), connect failed \(got.connectFailed)"
        )
        #expect(got.count("200") == 16, "\(got.statuses)")
        var held = got.count("200")
        var others: [ConnectionAttacker] = []
        var unavailable = 0
        for uid in 40011...40019 {
            let attacker = try ConnectionAttacker(daemon, uid: uid, count: 80, mode: "version")
            let outcome = try attacker.outcome()
            held += outcome.count("200")
            unavailable += outcome.count("503")
            others.append(attacker)
        }
        print("nine more users: \(held) connections served in all, \(unavailable) answered 503")
        #expect(unavailable > 0)
        #expect(try daemon.client.get("/v1/version", as: APIDaemonInfo.self).pid == pid)
        root.expectResponsive("1,100 streams at 1,024 fds")
        streams.stop()
        for other in others { other.stop() }
        #expect(try daemon.eventually { try status(daemon, uid: 65534, "/v1/version") == "200" })
        try daemon.expectStillWorks("issue-attack")
    }

    @Test(
        "the admin group is served in the reserve when other users hold the rest; root is served past every cap"
    )
    func adminReserve() throws {
        let daemon = try TestDaemon(config: Self.config + "\nAdminAllowed=nobody\n")
        let root = Responsiveness(daemon)
        var held: [ConnectionAttacker] = []
        var served = 0
        for uid in 40001...40004 {
            let user = try ConnectionAttacker(daemon, uid: uid, count: 30, mode: "version")
            served += try user.outcome().count("200")
            held.append(user)
        }
        #expect(served == 64 - 8)
        #expect(try status(daemon, uid: 40005, "/v1/version") == "503")
        // nobody is in AdminAllowed: the reserve is its.
        let admin = try ConnectionAttacker(daemon, uid: 65534, count: 30, mode: "version")
        let got = try admin.outcome()
        print("admin in the reserve: \(got.statuses)")
        #expect(got.count("200") == 8, "\(got.statuses)")
        #expect(got.count("503") == 22, "\(got.statuses)")
        // Everything is taken: root still gets in, as often as it likes.
        let rootHeld = try ConnectionAttacker(daemon, uid: 0, count: 20, mode: "version")
        #expect(try rootHeld.outcome().count("200") == 20)
        root.expectResponsive("connections full, admin in the reserve")
        for user in held + [admin, rootHeld] { user.stop() }
        try daemon.expectStillWorks("admin-reserve")
    }
}
