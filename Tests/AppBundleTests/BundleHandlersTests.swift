import AppdBase
import Foundation
import Testing

@testable import AppBundle

@Suite("URL schemes and document types of Info.plist")
struct BundleHandlersTests {
    static var notesInfo: [String: Any] {
        validInfo.merging([
            "CFBundleURLTypes": [
                [
                    "CFBundleURLName": "com.example.notes",
                    "CFBundleURLSchemes": ["notes", "X-Notes"],
                ]
            ],
            "CFBundleDocumentTypes": [
                [
                    "CFBundleTypeName": "Text", "CFBundleTypeRole": "Editor",
                    "LSItemContentTypes": ["public.plain-text", "com.example.unknown"],
                ],
                [
                    "CFBundleTypeRole": "Viewer", "CFBundleTypeExtensions": ["CSV"],
                    "CFBundleTypeMIMETypes": ["text/csv"],
                ],
            ],
        ]) { $1 }
    }

    @Test("schemes, extensions and MIME types are read, lowercased, known UTIs mapped")
    func reads() throws {
        let scratch = Scratch()
        let bundle = try AppBundle.open(
            at: try makeBundle(scratch.sub("Notes.app"), info: Self.notesInfo))
        let handlers = bundle.info.handlers
        #expect(handlers.schemes == ["notes", "x-notes"])
        #expect(handlers.urlTypes.first?.name == "com.example.notes")
        #expect(handlers.documentTypes.count == 2)
        #expect(handlers.documentTypes[0].role == .editor)
        #expect(handlers.documentTypes[0].extensions == ["txt", "text"])
        #expect(handlers.documentTypes[0].mimeTypes == ["text/plain"])
        #expect(handlers.documentTypes[1].extensions == ["csv"])
        #expect(handlers.documentClaims == ["text/plain", "text/csv", ".txt", ".text", ".csv"])
        #expect(handlers.role(forExtension: "TXT", mimeType: nil) == .editor)
        #expect(handlers.role(forExtension: nil, mimeType: "text/csv") == .viewer)
        #expect(handlers.role(forExtension: "png", mimeType: "image/png") == nil)
        #expect(handlers.claims(scheme: "NOTES"))
    }

    @Test("a malformed entry refuses the bundle, naming the key and its index")
    func malformed() throws {
        let cases: [(Any, Any?, String)] = [
            (
                [["CFBundleURLSchemes": ["no way"]]], nil,
                "CFBundleURLTypes[0].CFBundleURLSchemes[0] 'no way' is not a URL scheme"
            ),
            ([["CFBundleURLName": "x"]], nil, "CFBundleURLTypes[0] has no CFBundleURLSchemes"),
            ("notes", nil, "CFBundleURLTypes must be an array of dictionaries, not a string"),
            (
                [["CFBundleURLSchemes": [1]]], nil,
                "CFBundleURLTypes[0].CFBundleURLSchemes[0] must be a string, not a integer"
            ),
            (
                Array(repeating: ["CFBundleURLSchemes": ["a"]], count: 33), nil,
                "CFBundleURLTypes has 33 entries; at most 32"
            ),
            (
                [], [["CFBundleTypeRole": "Owner", "CFBundleTypeExtensions": ["txt"]]],
                "CFBundleDocumentTypes[0].CFBundleTypeRole 'Owner' is not Editor, Viewer or None"
            ),
            (
                [], [["CFBundleTypeExtensions": ["*"]]],
                "CFBundleDocumentTypes[0].CFBundleTypeExtensions[0] '*' is not a file extension"
            ),
            (
                [], [["CFBundleTypeMIMETypes": ["text/*"]]],
                "CFBundleDocumentTypes[0].CFBundleTypeMIMETypes[0] 'text/*' is not a MIME type"
            ),
            (
                [], [["LSItemContentTypes": ["com.example.x"]]],
                "CFBundleDocumentTypes[0] names no extension, MIME type or known content type"
            ),
            (
                [], [["CFBundleTypeExtensions": Array(repeating: "a", count: 40)]],
                "CFBundleDocumentTypes[0].CFBundleTypeExtensions has 40 items; at most 32"
            ),
        ]
        for (index, (urls, documents, expected)) in cases.enumerated() {
            let scratch = Scratch()
            var info = validInfo
            info["CFBundleURLTypes"] = urls
            if let documents { info["CFBundleDocumentTypes"] = documents }
            let found = problems(try makeBundle(scratch.sub("Bad\(index).app"), info: info))
            #expect(found.contains { $0.contains(expected) }, "\(expected): \(found)")
        }
    }
}
