import AppdBase
import Foundation
import TestSupport
import Testing

@testable import AppBundle

/// A host with the files and libraries a test gives it, all x86-64.
private struct FakeHost: ProgramHost {
    var architecture = "amd64"
    var files: Set<String> = ["/lib64/ld-linux-x86-64.so.2", "/bin/sh"]
    var libraries: [String: String] = ["libc.so.6": "/lib/x86_64-linux-gnu/libc.so.6"]

    func hasFile(_ path: String, elfClass: ELFFile.Class?, machine: UInt16?) -> Bool {
        files.contains(path) && (machine == nil || machine == 62)
    }

    func library(
        _ name: String, elfClass: ELFFile.Class, machine: UInt16, in directories: [String]?
    ) -> String? {
        guard machine == 62, directories == nil else { return nil }
        return libraries[name]
    }
}

private func writeELF(_ builder: ELFBuilder, to path: String, mode: mode_t = 0o755) throws {
    try FileManager.default.createDirectory(
        atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    try Data(builder.bytes).write(to: URL(fileURLWithPath: path))
    chmod(path, mode)
}

@Suite("AppBundle.programNeeds")
struct ProgramNeedsTests {
    @Test("the executable and a framework found through $ORIGIN RUNPATH, symlink and all")
    func frameworks() throws {
        let scratch = Scratch()
        let app = try makeBundle(scratch.sub("Hello.app"))
        try writeELF(
            .x8664(needed: ["libgreet.so.1", "libc.so.6"], runpath: "$ORIGIN/Frameworks"),
            to: "\(app)/Hello")
        try writeELF(.x8664(), to: "\(app)/Frameworks/libgreet.so.1.0", mode: 0o644)
        try FileManager.default.createSymbolicLink(
            atPath: "\(app)/Frameworks/libgreet.so.1", withDestinationPath: "libgreet.so.1.0")
        let bundle = try AppBundle.open(at: app)
        #expect(bundle.programs.map(\.path) == ["Hello", "Frameworks/libgreet.so.1.0"])
        let needs = bundle.programNeeds(on: FakeHost())
        #expect(AppBundle.hostProblems(needs).isEmpty)
        let found = needs[0].needs.map { "\($0.kind.rawValue) \($0.name) \($0.foundAt ?? "-")" }
        #expect(
            found == [
                "architecture amd64 amd64",
                "loader /lib64/ld-linux-x86-64.so.2 /lib64/ld-linux-x86-64.so.2",
                "library libgreet.so.1 bundle:Frameworks/libgreet.so.1.0",
                "library libc.so.6 /lib/x86_64-linux-gnu/libc.so.6",
            ])
        #expect(needs[0].format == "ELF64 x86-64 (amd64), dynamic")
    }

    @Test("a library neither in the bundle nor on the host is named, with the file needing it")
    func missingLibrary() throws {
        let scratch = Scratch()
        let app = try makeBundle(scratch.sub("Hello.app"))
        try writeELF(.x8664(needed: ["libfoo.so.3", "libc.so.6"]), to: "\(app)/Hello")
        let problems = AppBundle.hostProblems(
            try AppBundle.open(at: app).programNeeds(on: FakeHost()))
        #expect(
            problems.map(\.description) == [
                "Hello: needs the library libfoo.so.3, found neither in the bundle nor on this host"
            ])
    }

    @Test(
        "a RUNPATH without $ORIGIN does not find the bundle's frameworks; one leaving the bundle finds nothing"
    )
    func runpathMustBeOrigin() throws {
        let scratch = Scratch()
        let app = try makeBundle(scratch.sub("Hello.app"))
        try writeELF(.x8664(), to: "\(app)/Frameworks/libgreet.so.1", mode: 0o644)
        try writeELF(
            .x8664(needed: ["libgreet.so.1"], runpath: "Frameworks:$ORIGIN/../Frameworks"),
            to: "\(app)/Hello")
        let problems = AppBundle.hostProblems(
            try AppBundle.open(at: app).programNeeds(on: FakeHost()))
        #expect(problems.map(\.path) == ["Hello"])
    }

    @Test("another machine's program is refused for its architecture, and its framework too")
    func otherArchitecture() throws {
        let scratch = Scratch()
        let app = try makeBundle(scratch.sub("Hello.app"))
        try writeELF(.aarch64(), to: "\(app)/Hello")
        let bundle = try AppBundle.open(at: app)
        #expect(bundle.architectures.map(\.architecture) == ["arm64"])
        let problems = AppBundle.hostProblems(bundle.programNeeds(on: FakeHost()))
        #expect(problems.map(\.description) == ["Hello: is built for arm64; this host is amd64"])
    }

    @Test("programs of two architectures are told apart")
    func mixed() throws {
        let scratch = Scratch()
        let app = try makeBundle(scratch.sub("Hello.app"))
        try writeELF(.x8664(), to: "\(app)/Hello")
        try writeELF(.aarch64(), to: "\(app)/Frameworks/libarm.so", mode: 0o644)
        let bundle = try AppBundle.open(at: app)
        #expect(bundle.architectures.map(\.architecture) == ["amd64", "arm64"])
        #expect(bundle.architectures.map(\.program) == ["Hello", "Frameworks/libarm.so"])
    }

    @Test("a script's interpreter must be on the host")
    func script() throws {
        let scratch = Scratch()
        let app = try makeBundle(scratch.sub("Hello.app"))
        let bundle = try AppBundle.open(at: app)
        #expect(
            bundle.programs == [BundleProgram(path: "Hello", kind: .script(interpreter: "/bin/sh"))]
        )
        #expect(AppBundle.hostProblems(bundle.programNeeds(on: FakeHost())).isEmpty)
        try write("#!/usr/bin/python9 -u\nprint(1)\n", to: "\(app)/Hello")
        let problems = AppBundle.hostProblems(
            try AppBundle.open(at: app).programNeeds(on: FakeHost()))
        #expect(
            problems.map(\.description) == [
                "Hello: needs the interpreter /usr/bin/python9, not found on this host"
            ])
    }

    @Test(
        "a script runs only through an interpreter AppdHostExecutables names (as its #! spells it) or the bundle carries"
    )
    func scriptInterpreterNamed() throws {
        let scratch = Scratch()
        let app = try makeBundle(scratch.sub("Hello.app"))
        let unnamed = try AppBundle.open(at: app)
        #expect(
            unnamed.unnamedInterpreters.map(\.description).first?.hasPrefix(
                "Hello: runs through its interpreter /bin/sh (#!), which AppdHostExecutables in Info.plist does not name"
            ) == true)
        #expect(unnamed.programNeeds(on: FakeHost())[0].needs.last?.foundAt == nil)
        // The host's other spelling of the same shell is not the one Landlock is given.
        var info = validInfo
        info["AppdHostExecutables"] = ["/usr/bin/sh"]
        try makeBundle(scratch.sub("Other.app"), info: info)
        #expect(try AppBundle.open(at: scratch.sub("Other.app")).unnamedInterpreters.count == 1)
        info["AppdHostExecutables"] = ["/usr/bin/sh", "/bin/sh"]
        try makeBundle(scratch.sub("Named.app"), info: info)
        let named = try AppBundle.open(at: scratch.sub("Named.app"))
        #expect(named.unnamedInterpreters.isEmpty)
        #expect(named.programNeeds(on: FakeHost())[0].needs.last?.foundAt == "AppdHostExecutables")
        // An interpreter the bundle carries (its own path), and one that only looks like it.
        let carried = try makeBundle(scratch.sub("Carried.app"))
        try writeELF(.x8664(), to: "\(carried)/bin/tool")
        let root = try AppBundle.open(at: carried).path
        try write("#!\(root)/bin/tool\n", to: "\(carried)/Hello")
        chmod("\(carried)/Hello", 0o755)
        let inBundle = try AppBundle.open(at: carried)
        #expect(inBundle.unnamedInterpreters.isEmpty)
        #expect(
            inBundle.programNeeds(on: FakeHost()).first { $0.path == "Hello" }?.needs.last?
                .foundAt == "bundle:bin/tool")
        try write("#!\(root)/bin/../../escape\n", to: "\(carried)/Hello")
        chmod("\(carried)/Hello", 0o755)
        #expect(try AppBundle.open(at: carried).unnamedInterpreters.count == 1)
    }

    @Test("a truncated ELF executable or framework is refused at open, with the offset")
    func truncated() throws {
        let scratch = Scratch()
        let app = try makeBundle(scratch.sub("Hello.app"))
        let bytes = ELFBuilder.x8664().bytes
        try Data(bytes.prefix(100)).write(to: URL(fileURLWithPath: "\(app)/Hello"))
        try Data(bytes.prefix(30)).write(to: URL(fileURLWithPath: "\(app)/libcut.so"))
        chmod("\(app)/libcut.so", 0o644)
        try FileManager.default.createDirectory(
            atPath: "\(app)/Frameworks", withIntermediateDirectories: true)
        try Data(bytes.prefix(30)).write(to: URL(fileURLWithPath: "\(app)/Frameworks/libcut.so"))
        let found = problems(app)
        #expect(found.count == 2)
        #expect(
            found[0].hasPrefix(
                "Frameworks/libcut.so: is a malformed ELF file: offset 0: the ELF header"))
        #expect(
            found[1].hasPrefix(
                "Hello: is a malformed ELF file: offset 64: the program header table"))
    }

    @Test("an executable that is neither ELF nor a script, or built for another OS, is refused")
    func notAProgram() throws {
        let scratch = Scratch()
        let app = try makeBundle(scratch.sub("Hello.app"))
        try write("echo hello\n", to: "\(app)/Hello")
        #expect(
            problems(app) == [
                "Hello: is neither an ELF program nor a script (#!); Linux cannot run it"
            ])
        var freebsd = ELFBuilder.x8664()
        freebsd.osABI = 9
        try writeELF(freebsd, to: "\(app)/Hello")
        #expect(problems(app) == ["Hello: is built for OS ABI 9 (FreeBSD), not Linux"])
    }
}
