import AppdConfig
import Testing

@testable import appd

/// `appd override` edits an `[App ID]` section: each key the table lets that section set has an
/// option of its own (RevokeEntitlements through --deny and --allow).
@Suite("appd override's options")
struct OverrideOptionTests {
    /// `MemoryMax` → `memory-max`, `CPUWeight` → `cpu-weight`: ArgumentParser's spelling of the
    /// property of the same name.
    static func option(_ key: String) -> String {
        let characters = Array(key)
        var result = ""
        for (index, character) in characters.enumerated() {
            let previous = index > 0 ? characters[index - 1] : nil
            let next = index + 1 < characters.count ? characters[index + 1] : nil
            if character.isUppercase, let previous,
                previous.isLowercase || (previous.isUppercase && next?.isLowercase == true)
            {
                result.append("-")
            }
            result.append(Character(character.lowercased()))
        }
        return "--" + result
    }

    @Test("every key an [App ID] section may set has an appd override option")
    func everyAppKey() {
        #expect(Self.option("CPUWeight") == "--cpu-weight")
        let help = Override.helpMessage(columns: 400)
        for key in ConfigKey.keys(of: .app) {
            let option = key.name == "RevokeEntitlements" ? "--deny" : Self.option(key.name)
            #expect(help.contains(option + " "), "appd override has no \(option) for \(key.name)=")
        }
    }
}
