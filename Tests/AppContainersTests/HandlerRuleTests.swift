import AppBundle
import AppdBase
import AppdConfig
import Foundation
import Testing

@testable import AppContainers

@Suite("which app opens an item: --with, [Handlers], Editor before Viewer, first installed")
struct HandlerRuleTests {
    static func app(_ id: String, at seconds: Double, _ role: BundleHandlers.Role?, scheme: Bool)
        -> HandlerCandidate
    {
        HandlerCandidate(
            id: AppID(id), installedAt: Date(timeIntervalSince1970: seconds),
            handlers: BundleHandlers(
                urlTypes: scheme ? [.init(schemes: ["notes"])] : [],
                documentTypes: role.map {
                    [.init(role: $0, extensions: ["txt"], mimeTypes: ["text/plain"])]
                } ?? []))
    }

    static let apps = [
        app("com.example.viewer", at: 1, .viewer, scheme: true),
        app("com.example.editor", at: 2, .editor, scheme: true),
        app("com.example.later", at: 3, .editor, scheme: false),
        app("com.example.declares", at: 0, BundleHandlers.Role.none, scheme: false),
    ]

    func choose(_ item: String, admin: String = "", named: String? = nil) throws -> HandlerChoice {
        let config = try AppdConfiguration.parse("[Handlers]\n\(admin)\n", file: "t.conf")
        return try HandlerRule.choose(
            try OpenItem(item), among: Self.apps, admin: config.handlers,
            named: named.map { AppID($0) })
    }

    @Test("files: an Editor before a Viewer, then the first installed; a None role never opens")
    func files() throws {
        #expect(
            try choose("/home/u/a.TXT")
                == HandlerChoice(app: "com.example.editor", role: .editor, chosenBy: "rule"))
        let viewer = try choose("/home/u/a.txt", named: "com.example.viewer")
        #expect(viewer.role == .viewer && viewer.chosenBy == "named")
        #expect(throws: AppdError.self) {
            try choose("/home/u/a.txt", named: "com.example.declares")
        }
        #expect(throws: AppdError.self) { try choose("/home/u/picture.png") }
    }

    @Test("URLs: the first installed; [Handlers] first when its app claims the item")
    func urls() throws {
        #expect(try choose("notes:x").app == "com.example.viewer")
        #expect(
            try choose("Notes:x", admin: "URLSchemes=notes=com.example.editor").chosenBy
                == "[Handlers]")
        // The admin's choice that does not claim the scheme is passed over.
        #expect(
            try choose("notes:x", admin: "URLSchemes=notes=com.example.later").app
                == "com.example.viewer")
        let text = try choose("/a.txt", admin: "DocumentTypes=text/plain=com.example.later")
        #expect(text.app == "com.example.later" && text.chosenBy == "[Handlers]")
    }

    @Test("an item is a URL or an absolute path, bounded, printable")
    func items() throws {
        #expect(try OpenItem("/a/b.tar.GZ") == .file(path: "/a/b.tar.GZ", ext: "gz", mimeType: nil))
        #expect(try OpenItem("/a/.bashrc") == .file(path: "/a/.bashrc", ext: nil, mimeType: nil))
        #expect(
            try OpenItem("/a/n.txt") == .file(path: "/a/n.txt", ext: "txt", mimeType: "text/plain"))
        for bad in [
            "relative/path", "", "no way:x", "notes:a b",
            String(repeating: "a", count: 5000) + ":x",
        ] {
            #expect(throws: AppdError.self, "\(bad.prefix(20))") { try OpenItem(bad) }
        }
    }
}
