import AppContainers
import AppdBase
import Foundation
import Testing

@testable import AppdConfig
@testable import AppdServer

@Suite("docs/api.md and the server agree")
struct APIDocTests {
    static var documentedRoutes: Set<String> {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/api.md")
        let text = (try? String(contentsOf: docs, encoding: .utf8)) ?? ""
        // Rows of the routes table: | `GET /v1/apps/{id}` | read | ...
        var routes: Set<String> = []
        for line in text.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let first = cells.first, first.hasPrefix("`"), first.contains(" /v1") else {
                continue
            }
            routes.insert(
                "\(first.trimmingCharacters(in: CharacterSet(charactersIn: "`"))) \(cells[1])")
        }
        return routes
    }

    @Test(
        "every route the router serves is in the table of docs/api.md with its right, and nothing else is"
    )
    func routesMatch() {
        let served = Set(
            Router.routes.map { route in
                "\(route.method) /v1/" + route.pattern.joined(separator: "/")
                    + " \(route.right.rawValue)"
            })
        #expect(!Self.documentedRoutes.isEmpty)
        #expect(
            served == Self.documentedRoutes,
            "served only: \(served.subtracting(Self.documentedRoutes)); documented only: \(Self.documentedRoutes.subtracting(served))"
        )
    }
}

@Suite("rights from [API]")
struct AuthorizerTests {
    func authorizer(_ configure: (inout APISettings) throws -> Void) rethrows -> Authorizer {
        var settings = APISettings()
        try configure(&settings)
        return Authorizer(settings: settings)
    }

    @Test("root has every right whatever the config says")
    func root() throws {
        let none = try authorizer {
            $0.readAllowed = try AccessList("")
            $0.controlAllowed = try AccessList("")
            $0.adminAllowed = try AccessList("")
        }
        #expect(none.rights(of: Caller(uid: 0, gid: 0, pid: 1)) == [.read, .control, .admin])
    }

    @Test("by default a stranger may only read; a higher right brings the lower ones")
    func defaults() throws {
        let stranger = Caller(uid: 65534, gid: 65534, pid: 1)
        #expect(try authorizer { _ in }.rights(of: stranger) == [.read])
        #expect(
            try authorizer { $0.adminAllowed = try AccessList("nobody") }.rights(of: stranger) == [
                .read, .control, .admin,
            ])
        #expect(try authorizer { $0.readAllowed = try AccessList("") }.rights(of: stranger) == [])
        // A group by its primary gid.
        #expect(
            try authorizer { $0.controlAllowed = try AccessList("@nogroup") }.rights(of: stranger)
                == [.read, .control])
    }

    @Test("a refusal is a 403 that names the setting and the caller")
    func refusal() throws {
        let error = #expect(throws: AppdError.self) {
            try authorizer { _ in }.check(Caller(uid: 65534, gid: 65534, pid: 1), .admin)
        }
        #expect(error?.code.httpStatus == 403)
        #expect(
            error?.message.contains(
                "uid 65534 may not install or uninstall apps: [API] AdminAllowed=@appd-admin")
                == true)
    }

    @Test("access lists parse *, @group and user names; a bare @ is refused")
    func parsing() throws {
        let list = try AccessList("* @wheel alice root")
        #expect(list.everyone && list.groups == ["wheel"] && list.users == ["alice"])
        #expect(throws: AccessListError.self) { try AccessList("@") }
    }
}
