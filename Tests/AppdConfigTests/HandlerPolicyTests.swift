import AppBundle
import AppdBase
import Foundation
import Testing

@testable import AppdConfig

@Suite("a signer grants the URL schemes and document types its apps claim")
struct HandlerPolicyTests {
    static let notes = BundleHandlers(
        urlTypes: [.init(schemes: ["notes"])],
        documentTypes: [
            .init(role: .editor, extensions: ["txt"], mimeTypes: ["text/plain"])
        ])

    /// An unsigned app's decision (the signed one's, with a signer's keys, DaemonTests
    /// HandlerTests drives through a real install).
    static func refusal(_ extra: String, _ handlers: BundleHandlers = notes) throws -> String? {
        let policy = try AppdConfiguration.parse(
            "[Signing]\nAllowUnsigned=yes\n\(extra)\n", file: "t.conf"
        ).signing
        do {
            _ = try policy.authorize(
                signature: nil, bundleID: "com.example.notes",
                entitlements: Entitlements(values: [:]), handlers: handlers)
            return nil
        } catch {
            return (error as? AppdError)?.message ?? "\(error)"
        }
    }

    @Test("empty by default: a claimed scheme and type are refused, naming the key and claims")
    func refusedByDefault() throws {
        let message = try #require(try Self.refusal(""))
        #expect(message.contains("claims URL schemes in CFBundleURLTypes (Info.plist)"))
        #expect(message.hasSuffix("may not grant: notes"), "\(message)")
        let types = try #require(try Self.refusal("UnsignedURLSchemes=notes"))
        #expect(types.contains("claims document types in CFBundleDocumentTypes (Info.plist)"))
        #expect(types.hasSuffix("may not grant: text/plain, .txt"), "\(types)")
        #expect(try Self.refusal("", BundleHandlers()) == nil)
    }

    @Test("granted by pattern, compared without case")
    func granted() throws {
        #expect(
            try Self.refusal("UnsignedURLSchemes=NO*\nUnsignedDocumentTypes=text/* .txt") == nil)
        #expect(try Self.refusal("UnsignedURLSchemes=*\nUnsignedDocumentTypes=text/plain") != nil)
        #expect(try Self.refusal("UnsignedURLSchemes=note\nUnsignedDocumentTypes=*") != nil)
    }

    @Test("[Handlers] reads the admin's choices, extensions before MIME types")
    func adminChoices() throws {
        let config = try AppdConfiguration.parse(
            "[Handlers]\nURLSchemes=Notes=com.example.notes\nDocumentTypes=.txt=com.example.a text/plain=com.example.b\n",
            file: "t.conf")
        #expect(config.handlers.app(forScheme: "NOTES") == "com.example.notes")
        #expect(config.handlers.app(forExtension: "TXT", mimeType: "text/plain") == "com.example.a")
        #expect(config.handlers.app(forExtension: "md", mimeType: "text/plain") == "com.example.b")
        #expect(throws: AppdError.self) {
            try AppdConfiguration.parse("[Handlers]\nDocumentTypes=txt=com.x\n", file: "t.conf")
        }
    }
}
