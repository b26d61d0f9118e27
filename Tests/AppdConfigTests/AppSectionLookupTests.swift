import AppdBase
import Foundation
import Testing

@testable import AppdConfig

/// `[App ID]` sections are keyed by `AppID`: found in any ASCII case, as the registry finds the
/// app, and by nothing else.
@Suite("[App ID] sections: found by the app's id in any ASCII case")
struct AppSectionLookupTests {
    @Test("a section is the app's whatever the case it is asked in; the Kelvin sign is not a K")
    func lookup() throws {
        let text = "[App com.Example.Key]\nRunAtLoad=yes\n"
        let config = try AppdConfiguration.parse(text, file: "t.conf")
        #expect(config.override(for: "COM.EXAMPLE.KEY")?.service.runAtLoad == true)
        #expect(config.override(for: AppID("com.example.key"))?.service.runAtLoad == true)
        // lowercased() maps U+212A to "k"; the registry's NOCASE does not, and neither may this.
        #expect(config.override(for: "com.example.\u{212A}ey") == nil)
        #expect(config.apps.keys.map(\.spelling) == ["com.Example.Key"])
        // appd override of the same app in another case edits that section, adds none.
        let edited = AppdConfiguration.replacingApp(
            "COM.example.KEY", with: [(key: "RunAtLoad", value: "no")], in: text)
        let read = try AppdConfiguration.parse(edited, file: "t.conf")
        #expect(read.apps.count == 1)
        #expect(read.override(for: "com.example.key")?.service.runAtLoad == false)
    }
}
