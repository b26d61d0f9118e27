import AppdBase
import Foundation
import Testing

@Suite("AppID: one app whatever the case of its id, ASCII folding only, a string on the wire")
struct AppIDTests {
    @Test("ids that differ in ASCII case are one app, keep their spelling, and hash alike")
    func caseFolded() {
        let registry = AppID("com.Example.Notes")
        let typed = AppID("COM.example.notes")
        #expect(registry == typed)
        #expect(Set([registry, typed]).count == 1)
        #expect([registry: 1][typed] == 1)
        #expect(
            registry.description == "com.Example.Notes" && typed.spelling == "COM.example.notes")
        #expect(registry.key == "com.example.notes")
        #expect(registry.matches("com.example.NOTES") && !registry.matches("com.example.note"))
        #expect(AppID("com.example.a") < AppID("COM.EXAMPLE.B"))
    }

    @Test("only ASCII folds: the Kelvin sign and other non-ASCII letters are not an ASCII id")
    func asciiOnly() {
        // "\u{212A}" lowercases to "k" in Unicode; SQLite's NOCASE, the registry's rule, does
        // not fold it, so neither does AppID.
        #expect(AppID("com.example.\u{212A}ey") != AppID("com.example.key"))
        #expect("com.example.\u{212A}ey".lowercased() == "com.example.key")
        #expect(AppID("com.example.É") != AppID("com.example.é"))
        #expect(AppID.folded("A-Z.0-9.a") == "a-z.0-9.a")
    }

    @Test("on the wire it is the plain string it was spelled with, and reads back as one")
    func wire() throws {
        struct Body: Codable { var app: AppID }
        let data = try JSONEncoder().encode(Body(app: "com.Example.Notes"))
        #expect(String(decoding: data, as: UTF8.self) == #"{"app":"com.Example.Notes"}"#)
        let back = try JSONDecoder().decode(
            Body.self, from: Data(#"{"app":"COM.EXAMPLE.NOTES"}"#.utf8))
        #expect(back.app == "com.example.notes" && back.app.spelling == "COM.EXAMPLE.NOTES")
        #expect(throws: (any Error).self) {
            try JSONDecoder().decode(Body.self, from: Data(#"{"app":7}"#.utf8))
        }
    }
}
