import Testing

@testable import Sandbox

/// The locale apps get as `LANG`: the host's when it exists here, else C.UTF-8 (HostLocale).
@Suite("the host's locale for apps")
struct HostLocaleTests {
    @Test("LC_ALL, else LANG, when the host has it; C.UTF-8 otherwise or for anything odd")
    func pick() {
        let all: (String) -> Bool = { _ in true }
        let none: (String) -> Bool = { _ in false }
        #expect(HostLocale.pick(environment: ["LANG": "de_DE.UTF-8"], exists: all) == "de_DE.UTF-8")
        #expect(
            HostLocale.pick(
                environment: ["LC_ALL": "fr_FR.UTF-8", "LANG": "de_DE.UTF-8"], exists: all)
                == "fr_FR.UTF-8")
        #expect(HostLocale.pick(environment: ["LANG": "de_DE.UTF-8"], exists: none) == "C.UTF-8")
        #expect(HostLocale.pick(environment: [:], exists: all) == "C.UTF-8")
        #expect(HostLocale.pick(environment: ["LANG": "C"], exists: all) == "C.UTF-8")
        #expect(HostLocale.pick(environment: ["LANG": "de_DE;rm -rf"], exists: all) == "C.UTF-8")
        #expect(
            HostLocale.pick(environment: ["LANG": String(repeating: "a", count: 65)], exists: all)
                == "C.UTF-8")
    }

    @Test("the C library's own answer: C.UTF-8 exists, a made-up locale does not")
    func exists() {
        #expect(HostLocale.exists("C.UTF-8"))
        #expect(!HostLocale.exists("xx_YY.UTF-8"))
    }
}
