import AppdAPI
import AppdBase
import AppdClient
import Foundation
import Testing

let sampleApp = APIApp(
    bundleId: "com.example.hello", state: "installed", title: "Hello", version: "3",
    shortVersion: "1.0",
    uid: 20001, gid: 20001, dataContainer: "/var/lib/appd/Containers/Data/X",
    installedAt: Date(timeIntervalSince1970: 1_700_000_000),
    updatedAt: Date(timeIntervalSince1970: 1_700_000_000))

func json(_ value: some Encodable) -> String {
    (try? APICoding.encoder().encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? ""
}

/// The chunked framing of `pieces`, each as one chunk, and the last chunk.
func chunked(_ pieces: [String], extensions: Bool = false) -> String {
    pieces.map {
        String($0.utf8.count, radix: 16) + (extensions ? ";note=x" : "") + "\r\n\($0)\r\n"
    }.joined() + "0\r\n\r\n"
}

@Suite("AppdClient requests and answers")
struct ClientTests {
    @Test("a JSON answer with a Content-Length is decoded; the request says what it is")
    func contentLength() throws {
        let server = try CannedServer { connection in
            connection.respond("200 OK", json([sampleApp]))
        }
        let apps = try AppdClient(socketPath: server.socketPath).get(
            AppdClient.path("apps"), as: [APIApp].self)
        #expect(apps == [sampleApp])
        let request = try #require(server.finish().first)
        #expect(request.line == "GET /v1/apps HTTP/1.1")
        #expect(request.header("Host") == "localhost")
        #expect(request.header("Connection") == "close")
        #expect(request.header("Accept") == "application/json")
    }

    @Test("a chunked answer is put back together (chunk extensions and trailers ignored)")
    func chunkedBody() throws {
        let body = json(sampleApp)
        let middle = body.index(body.startIndex, offsetBy: body.count / 2)
        let server = try CannedServer { connection in
            connection.write(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
            )
            connection.write(
                String(
                    chunked([String(body[..<middle]), String(body[middle...])], extensions: true)
                        .dropLast(1)))
            connection.write("X-Trailer: yes\r\n\r\n")
        }
        let app = try AppdClient(socketPath: server.socketPath).get(
            AppdClient.path("apps", "com.example.hello"), as: APIApp.self)
        #expect(app == sampleApp)
        #expect(server.finish().first?.line == "GET /v1/apps/com.example.hello HTTP/1.1")
    }

    @Test("a POST sends its body as JSON with a Content-Length")
    func postJSON() throws {
        let server = try CannedServer { connection in
            connection.readBody()
            connection.respond("201 Created", #"{"arguments": ["a b"]}"#)
        }
        let echoed = try AppdClient(socketPath: server.socketPath)
            .post(
                AppdClient.path("apps", "com.example.hello", "launch"),
                body: LaunchRequest(arguments: ["--verbose", "x"]), as: LaunchRequest.self)
        #expect(echoed.arguments == ["a b"])
        let request = try #require(server.finish().first)
        #expect(request.line == "POST /v1/apps/com.example.hello/launch HTTP/1.1")
        #expect(request.header("Content-Type") == "application/json")
        #expect(request.header("Content-Length") == "\(request.body.count)")
        #expect(
            try JSONDecoder().decode(LaunchRequest.self, from: request.body).arguments == [
                "--verbose", "x",
            ])
    }

    @Test("a POST without a body says Content-Length: 0; a DELETE sends none")
    func emptyBodies() throws {
        let server = try CannedServer { connection in
            connection.respond("200 OK", #"{"grace": 1}"#)
        }
        let client = AppdClient(socketPath: server.socketPath)
        _ = try client.post(
            AppdClient.path("instances", "0123456789ab", "kill"), as: TerminateRequest.self)
        _ = try client.delete(
            AppdClient.path("apps", "com.example.hello", query: ["keepData": "1"]),
            as: TerminateRequest.self)
        let requests = server.finish()
        #expect(
            requests.map(\.line) == [
                "POST /v1/instances/0123456789ab/kill HTTP/1.1",
                "DELETE /v1/apps/com.example.hello?keepData=1 HTTP/1.1",
            ])
        #expect(requests.map { $0.header("Content-Length") } == ["0", nil])
    }

    @Test("an error body becomes the daemon's AppdError: code, message, problems, hint")
    func errorBody() throws {
        let error = AppdError(
            .permissionDenied, "uid 1000 may not launch apps: [API] ControlAllowed=@appd",
            problems: [BundleProblem(path: "Info.plist", message: "bad")],
            hint: "join the appd group")
        let server = try CannedServer { connection in
            connection.respond("403 Forbidden", json(APIErrorBody(error)))
        }
        #expect(throws: error) {
            try AppdClient(socketPath: server.socketPath).post(
                AppdClient.path("apps", "x.y", "launch"), as: APIInstance.self)
        }
        server.stop()
    }

    @Test("an error body that is not JSON still says what came back")
    func nonJSONError() throws {
        let server = try CannedServer { connection in
            connection.respond(
                "502 Bad Gateway", "<html>upstream gone</html>\nmore", type: "text/html")
        }
        let error = try #require(throws: AppdError.self) {
            try AppdClient(socketPath: server.socketPath).get(
                AppdClient.path("apps"), as: [APIApp].self)
        }
        #expect(error.code == .internal)
        #expect(
            error.message
                == "appd answered GET /v1/apps with 502 Bad Gateway: <html>upstream gone</html>")
        server.stop()
    }

    @Test("a 404 without a body is notFound")
    func bareNotFound() throws {
        let server = try CannedServer { connection in
            connection.write("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        }
        let error = try #require(throws: AppdError.self) {
            try AppdClient(socketPath: server.socketPath).get("/v1/nothing", as: [APIApp].self)
        }
        #expect(error.code == .notFound)
        #expect(error.message == "appd answered GET /v1/nothing with 404 Not Found")
        server.stop()
    }

    @Test("a 2xx answer that does not decode is badResponse, naming the field")
    func undecodable() throws {
        let server = try CannedServer { connection in
            connection.respond("200 OK", #"[{"bundleId": "x.y"}]"#)
        }
        let error = try #require(throws: AppdError.self) {
            try AppdClient(socketPath: server.socketPath).get(
                AppdClient.path("apps"), as: [APIApp].self)
        }
        #expect(error.code == .badResponse)
        #expect(
            error.message.hasPrefix(
                "cannot read appd's answer to GET /v1/apps: [0]: missing 'state'"))
        server.stop()
    }
}

@Suite("AppdClient paths")
struct PathTests {
    @Test("components and query values are percent-encoded; nil query values are left out")
    func encoding() {
        #expect(
            AppdClient.path("apps", "com.example.Hello-2", "launch")
                == "/v1/apps/com.example.Hello-2/launch")
        #expect(AppdClient.path("apps", "a/b?c#d e") == "/v1/apps/a%2Fb%3Fc%23d%20e")
        #expect(AppdClient.path("apps", "..", "x") == "/v1/apps/%2E%2E/x")
        #expect(AppdClient.path("apps", "é") == "/v1/apps/%C3%A9")
        #expect(
            AppdClient.path("instances", query: ["app": "x&y=z", "all": nil])
                == "/v1/instances?app=x%26y%3Dz")
        #expect(
            AppdClient.path("apps", query: ["name": "My App.app", "allowDowngrade": "1"])
                == "/v1/apps?name=My%20App.app&allowDowngrade=1")
    }

    @Test("a path that could split the request line is refused before connecting")
    func invalidTarget() {
        let error = #expect(throws: AppdError.self) {
            try AppdClient(socketPath: "/nonexistent/appd.sock").get(
                "/v1/apps HTTP/1.1\r\nX: y", as: [APIApp].self)
        }
        #expect(error?.code == .badRequest)
    }
}
