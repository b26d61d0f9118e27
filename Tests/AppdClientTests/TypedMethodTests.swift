import AppdAPI
import AppdBase
import AppdClient
import Foundation
import Testing

/// One call of a typed method and the request it must put on the wire: the line (verb, path,
/// query in docs/api.md's spelling) and the JSON body, if any.
struct WireCase: CustomTestStringConvertible, Sendable {
    var name: String
    var line: String
    var body: String?
    var call: @Sendable (AppdClient) throws -> Void

    var testDescription: String { name }
}

private let instanceAnswer = APIInstance(
    id: "3f2a9c01d4e7", app: "com.example.notes", state: .active, pid: 42, uid: 60001,
    arguments: [], launchedBy: 0, startedAt: Date(timeIntervalSince1970: 1_800_000_000),
    log: "/var/lib/appd/logs/com.example.notes/3f2a9c01d4e7.log")

private let id = "3f2a9c01d4e7"
private let app = "com.example.notes"

private let wireCases: [WireCase] = [
    WireCase(name: "apps", line: "GET /v1/apps") { _ = try $0.apps() },
    WireCase(name: "app", line: "GET /v1/apps/com.example.notes") { _ = try $0.app(app) },
    WireCase(name: "uninstall", line: "DELETE /v1/apps/com.example.notes") {
        _ = try $0.uninstall(app)
    },
    WireCase(name: "uninstall keepData", line: "DELETE /v1/apps/com.example.notes?keepData=1") {
        _ = try $0.uninstall(app, keepData: true)
    },
    WireCase(name: "container", line: "GET /v1/apps/com.example.notes/containers/data") {
        _ = try $0.container(app, kind: "data")
    },
    WireCase(
        name: "groupContainer",
        line: "GET /v1/apps/com.example.notes/containers/group/group.example%2Fx"
    ) { _ = try $0.groupContainer(app, group: "group.example/x") },
    WireCase(
        name: "launch", line: "POST /v1/apps/com.example.notes/launch",
        body: #"{"arguments":["-v"],"background":true}"#
    ) { _ = try $0.launch(app, LaunchRequest(arguments: ["-v"], background: true)) },
    WireCase(name: "instances", line: "GET /v1/instances") { _ = try $0.instances() },
    WireCase(
        name: "instances of an app, all", line: "GET /v1/instances?app=com.example.notes&all=1"
    ) {
        _ = try $0.instances(app: app, all: true)
    },
    WireCase(name: "instances, all", line: "GET /v1/instances?all=1") {
        _ = try $0.instances(all: true)
    },
    WireCase(name: "instance", line: "GET /v1/instances/3f2a9c01d4e7") { _ = try $0.instance(id) },
    WireCase(name: "wait", line: "GET /v1/instances/3f2a9c01d4e7/wait") { _ = try $0.wait(id) },
    WireCase(name: "terminate", line: "POST /v1/instances/3f2a9c01d4e7/terminate", body: "{}") {
        _ = try $0.terminate(id)
    },
    WireCase(
        name: "terminate with grace", line: "POST /v1/instances/3f2a9c01d4e7/terminate",
        body: #"{"grace":2.5}"#
    ) { _ = try $0.terminate(id, grace: 2.5) },
    WireCase(
        name: "restart", line: "POST /v1/instances/3f2a9c01d4e7/restart", body: #"{"grace":0}"#
    ) { _ = try $0.restart(id, grace: 0) },
    WireCase(name: "kill", line: "POST /v1/instances/3f2a9c01d4e7/kill") { _ = try $0.kill(id) },
    WireCase(name: "suspend", line: "POST /v1/instances/3f2a9c01d4e7/suspend") {
        _ = try $0.suspend(id)
    },
    WireCase(name: "resume", line: "POST /v1/instances/3f2a9c01d4e7/resume") {
        _ = try $0.resume(id)
    },
    WireCase(name: "activate", line: "POST /v1/instances/3f2a9c01d4e7/activate") {
        _ = try $0.activate(id)
    },
    WireCase(name: "background", line: "POST /v1/instances/3f2a9c01d4e7/background") {
        _ = try $0.background(id)
    },
    WireCase(name: "logs", line: "GET /v1/instances/3f2a9c01d4e7/logs") {
        try $0.logs(id) { _ in }
    },
    WireCase(
        name: "logs with every option",
        line:
            "GET /v1/instances/3f2a9c01d4e7/logs?follow=1&tail=20&since=2026-11-24T10%3A00%3A00Z&timestamps=1"
    ) {
        try $0.logs(
            id, .init(follow: true, tail: 20, since: "2026-11-24T10:00:00Z", timestamps: true)
        ) { _ in }
    },
    WireCase(name: "version", line: "GET /v1/version") { _ = try $0.version() },
    WireCase(name: "services", line: "GET /v1/services") { _ = try $0.services() },
    WireCase(name: "usage", line: "GET /v1/usage") { _ = try $0.usage() },
    WireCase(name: "usage of an app", line: "GET /v1/usage?app=com.example.notes") {
        _ = try $0.usage(app: app)
    },
    WireCase(name: "memory warning", line: "POST /v1/memory-warning?app=com.example.notes") {
        _ = try $0.memoryWarning(app: app)
    },
    WireCase(name: "memory warning to all", line: "POST /v1/memory-warning") {
        _ = try $0.memoryWarning(app: nil)
    },
    WireCase(name: "reload", line: "POST /v1/reload") { _ = try $0.reload() },
    WireCase(name: "events since", line: "GET /v1/events?since=17") {
        try $0.events(since: "17") { _ in }
    },
    WireCase(name: "denials", line: "GET /v1/denials") { _ = try $0.denials() },
    WireCase(name: "denials of an instance", line: "GET /v1/denials?instance=3f2a9c01d4e7") {
        _ = try $0.denials(.instance(id))
    },
    WireCase(
        name: "followed denials of an app", line: "GET /v1/denials?app=com.example.notes&follow=1"
    ) {
        try $0.followDenials(.app(app)) { _ in }
    },
]

@Suite("AppdClient's typed methods put docs/api.md's requests on the wire")
struct TypedMethodTests {
    /// The daemon answers each with an error, so what is checked is the request alone (the
    /// answer's type is the method's signature); the error shows the answer was read.
    @Test("each method sends its route's verb, path, query and body", arguments: wireCases)
    func wire(_ wire: WireCase) throws {
        let server = try CannedServer { connection in
            connection.readBody()
            connection.respond(
                "404 Not Found", #"{"error": {"code": "notFound", "message": "gone"}}"#)
        }
        #expect(throws: AppdError.self) { try wire.call(AppdClient(socketPath: server.socketPath)) }
        let request = try #require(server.finish().first)
        #expect(request.line == "\(wire.line) HTTP/1.1")
        if let body = wire.body {
            let sent = try JSONSerialization.jsonObject(with: request.body) as? NSDictionary
            let expected =
                try JSONSerialization.jsonObject(with: Data(body.utf8)) as? NSDictionary
            #expect(sent == expected)
            #expect(request.header("Content-Type") == "application/json")
        } else {
            #expect(request.body.isEmpty)
            #expect(request.header("Content-Type") == nil)
        }
    }

    @Test("an answer is decoded into the route's type")
    func answers() throws {
        let server = try CannedServer { connection in
            connection.readBody()
            connection.respond("202 Accepted", json(instanceAnswer))
        }
        let client = AppdClient(socketPath: server.socketPath)
        #expect(try client.terminate(id, grace: 1) == instanceAnswer)
        _ = server.finish()
    }

    @Test("install streams the body chunked to POST /v1/apps with its query")
    func install() throws {
        let server = try CannedServer { connection in
            connection.readBody()
            connection.respond("404 Not Found", #"{"error": {"code": "notFound", "message": "x"}}"#)
        }
        #expect(throws: AppdError.self) {
            try AppdClient(socketPath: server.socketPath).install(
                name: "Hello World.app", allowSignerChange: true
            ) { write in
                try Array("tar bytes".utf8).withUnsafeBytes { try write($0) }
            }
        }
        let request = try #require(server.finish().first)
        #expect(request.line == "POST /v1/apps?name=Hello%20World.app&allowSignerChange=1 HTTP/1.1")
        #expect(request.header("Content-Type") == "application/x-tar")
        #expect(request.header("Transfer-Encoding") == "chunked")
        #expect(request.complete && request.body == Data("tar bytes".utf8))
    }
}
