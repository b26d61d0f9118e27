import AppBundle
import AppContainers
import AppdBase
import Foundation
import Testing

/// Issue 38: install, verify and image read every program a bundle carries. Bundles built here
/// with the C compiler (static, libc only, Frameworks/ through $ORIGIN, a missing library, a
/// truncated file) and an AArch64 program written byte by byte.
@Suite("what a bundle's programs need from the host", .serialized)
struct ProgramCheckTests {
    @Test(
        "install accepts a static, a libc-only and a Frameworks program, and refuses the rest with one line each"
    )
    func install() throws {
        guard isRoot else { return }
        let scratch = Scratch()
        let store = try store(scratch.sub("root"))
        for kind in [ProgramBundle.staticProgram, .libcOnly, .frameworks] {
            let bundle = try kind.write(
                in: scratch.sub("src-\(kind.rawValue)"), id: "com.example.\(kind.rawValue)")
            let result = try store.install(bundleAt: bundle)
            #expect(result.bundle.programs.first?.path == "Prog", "\(kind)")
        }
        let refusals: [(ProgramBundle, String)] = [
            (
                .missingLibrary,
                "Prog.app cannot run on this host: Prog: needs the library libgreet.so, found neither in the bundle nor on this host"
            ),
            (
                .otherMachine,
                "Prog.app cannot run on this host: Prog: is built for arm64; this host is amd64"
            ),
            (.truncated, "Prog: is a malformed ELF file: offset 64: the program header table"),
        ]
        for (kind, expected) in refusals {
            let bundle = try kind.write(
                in: scratch.sub("src-\(kind.rawValue)"), id: "com.example.\(kind.rawValue)")
            do {
                _ = try store.install(bundleAt: bundle)
                Issue.record("\(kind) was installed")
            } catch let error as AppdError {
                let text = ([error.message] + error.problems.map(\.description)).joined(
                    separator: "\n")
                #expect(error.code == .invalidBundle)
                #expect(text.contains(expected), "\(kind): \(text)")
            }
        }
        #expect(try store.apps().count == 3)
    }

    @Test(
        "verify says per program what it needs and where this host has it; exits 1 when something is missing"
    )
    func verify() throws {
        let scratch = Scratch()
        let good = try ProgramBundle.frameworks.write(
            in: scratch.sub("good"), id: "com.example.good")
        let result = try runAppd(["verify", good])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(
            result.stdout.contains("program     Prog: ELF64 x86-64 (amd64), dynamic"),
            "\(result.stdout)")
        #expect(
            result.stdout.contains("library libgreet.so: in the bundle, Frameworks/libgreet.so"),
            "\(result.stdout)")
        #expect(result.stdout.contains("library libc.so.6: /"), "\(result.stdout)")
        #expect(
            result.stdout.contains(
                "program     Frameworks/libgreet.so: ELF64 x86-64 (amd64), shared object"))
        #expect(result.stdout.contains("runs        on this host (amd64)"), "\(result.stdout)")

        let missing = try ProgramBundle.missingLibrary.write(
            in: scratch.sub("missing"), id: "com.example.missing")
        let refused = try runAppd(["verify", missing])
        #expect(refused.status == 1)
        #expect(refused.stdout.contains("library libgreet.so: MISSING"), "\(refused.stdout)")
        #expect(refused.stdout.contains("runs        NOT on this host"), "\(refused.stdout)")

        let json = try runAppd(["verify", "--json", good])
        #expect(json.stdout.contains(#""foundAt" : "bundle:Frameworks"#), "\(json.stdout)")
    }

    @Test(
        "verify --host-root answers for the host whose filesystem is at DIR, through its own symlinks"
    )
    func verifyRoot() throws {
        let scratch = Scratch()
        let bundle = try ProgramBundle.libcOnly.write(
            in: scratch.sub("app"), id: "com.example.libc")
        // An empty root: no loader, no libc.
        let empty = scratch.sub("empty-root")
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        let bare = try runAppd(["verify", "--host-root", empty, bundle])
        #expect(bare.status == 1)
        #expect(bare.stdout.contains("runs        NOT on the host at \(empty)"), "\(bare.stdout)")
        #expect(
            bare.stdout.contains("loader /lib64/ld-linux-x86-64.so.2: MISSING"), "\(bare.stdout)")
        // A root with this host's loader and libc, behind an absolute symlink that means the
        // root's own /usr/lib, not ours.
        let root = scratch.sub("root")
        let files = FileManager.default
        try files.createDirectory(
            atPath: "\(root)/usr/lib/x86_64-linux-gnu", withIntermediateDirectories: true)
        try files.createDirectory(atPath: "\(root)/usr/lib64", withIntermediateDirectories: true)
        try files.createSymbolicLink(atPath: "\(root)/lib", withDestinationPath: "/usr/lib")
        try files.createSymbolicLink(atPath: "\(root)/lib64", withDestinationPath: "/usr/lib64")
        // The loader as Debian has it: /lib64/ld-linux-x86-64.so.2 a symlink to the absolute
        // /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2, which must resolve inside the root.
        try files.createSymbolicLink(
            atPath: "\(root)/usr/lib64/ld-linux-x86-64.so.2",
            withDestinationPath: "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
        for file in ["ld-linux-x86-64.so.2", "libc.so.6"] {
            try Data(contentsOf: URL(fileURLWithPath: "/lib/x86_64-linux-gnu/\(file)"))
                .write(to: URL(fileURLWithPath: "\(root)/usr/lib/x86_64-linux-gnu/\(file)"))
        }
        try files.createDirectory(atPath: "\(root)/bin", withIntermediateDirectories: true)
        try files.copyItem(atPath: "/bin/true", toPath: "\(root)/bin/sh")
        let ok = try runAppd(["verify", "--host-root", root, bundle])
        #expect(ok.status == 0, "\(ok.stdout)\(ok.stderr)")
        #expect(
            ok.stdout.contains("library libc.so.6: /lib/x86_64-linux-gnu/libc.so.6"), "\(ok.stdout)"
        )
    }

    @Test("image takes its architecture from the programs and refuses programs that disagree")
    func image() throws {
        let scratch = Scratch()
        func architecture(of bundle: String) throws -> (Int32, String) {
            let output = scratch.sub("\(UUID().uuidString).tar")
            let result = try runAppd(["image", bundle, "-o", output])
            guard result.status == 0 else { return (result.status, result.stderr) }
            let out = scratch.sub(UUID().uuidString)
            try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
            _ = try runTool("/usr/bin/tar", ["-xf", output, "-C", out])
            let config =
                try FileManager.default.contentsOfDirectory(atPath: out)
                .first { $0.hasSuffix(".json") && $0 != "manifest.json" } ?? ""
            let text = try String(contentsOfFile: "\(out)/\(config)", encoding: .utf8)
            return (0, text)
        }
        let arm = try ProgramBundle.otherMachine.write(
            in: scratch.sub("arm"), id: "com.example.arm")
        let (armStatus, armConfig) = try architecture(of: arm)
        #expect(armStatus == 0, "\(armConfig)")
        #expect(armConfig.contains(#""architecture":"arm64""#), "\(armConfig)")
        let native = try ProgramBundle.staticProgram.write(
            in: scratch.sub("native"), id: "com.example.native")
        let (_, nativeConfig) = try architecture(of: native)
        #expect(nativeConfig.contains(#""architecture":"amd64""#), "\(nativeConfig)")
        // An AArch64 library in Frameworks/ of an x86-64 program.
        let mixed = try ProgramBundle.staticProgram.write(
            in: scratch.sub("mixed"), id: "com.example.mixed")
        try FileManager.default.createDirectory(
            atPath: "\(mixed)/Frameworks", withIntermediateDirectories: true)
        try Data(ELFBuilder.aarch64().bytes).write(
            to: URL(fileURLWithPath: "\(mixed)/Frameworks/libarm.so"))
        let (status, message) = try architecture(of: mixed)
        #expect(status == 1)
        #expect(
            message.contains(
                "its programs are built for different architectures (Prog is amd64, Frameworks/libarm.so is arm64)"
            ),
            "\(message)")
    }

    /// Adds `UIRequiredDeviceCapabilities` (`value`, an XML fragment) to the bundle's Info.plist.
    static func require(_ value: String, in bundle: String) throws {
        let path = "\(bundle)/Info.plist"
        let text = try String(contentsOfFile: path, encoding: .utf8)
        try text.replacingOccurrences(
            of: "</dict></plist>",
            with: "<key>UIRequiredDeviceCapabilities</key>\(value)</dict></plist>"
        ).write(toFile: path, atomically: true, encoding: .utf8)
    }

    @Test(
        "UIRequiredDeviceCapabilities: another CPU refuses the install, this one and the rest do not"
    )
    func capabilities() throws {
        let scratch = Scratch()
        let arm = try ProgramBundle.libcOnly.write(in: scratch.sub("arm"), id: "com.example.arm")
        try Self.require("<array><string>arm64</string></array>", in: arm)
        let refused = try runAppd(["verify", arm])
        #expect(refused.status == 1)
        #expect(
            refused.stdout.contains(
                "Info.plist: UIRequiredDeviceCapabilities requires arm64; this host is amd64"),
            "\(refused.stdout)")
        let here = try ProgramBundle.libcOnly.write(in: scratch.sub("here"), id: "com.example.here")
        try Self.require(
            "<dict><key>x86_64</key><true/><key>wifi</key><true/><key>armv7</key><false/></dict>",
            in: here)
        let accepted = try runAppd(["verify", here])
        #expect(accepted.status == 0, "\(accepted.stdout)")
        #expect(
            accepted.stdout.contains("capabilities wifi: no effect on Linux"), "\(accepted.stdout)")
        guard isRoot else { return }
        let store = try store(scratch.sub("root"))
        #expect {
            try store.install(bundleAt: arm)
        } throws: { error in
            (error as? AppdError)?.message
                == "Prog.app cannot run on this host: Info.plist: UIRequiredDeviceCapabilities requires arm64; this host is amd64"
        }
        _ = try store.install(bundleAt: here)
    }

    /// What a refused script's line says: the script, its interpreter, the key to add and the
    /// grant it needs.
    static let unnamedShell =
        "Prog: runs through its interpreter /bin/sh (#!), which AppdHostExecutables in Info.plist does not name, and an app executes no host program it does not name: add /bin/sh to AppdHostExecutables (its signer must grant it: [Signer] HostExecutables= in appd.conf, or [Signing] UnsignedHostExecutables= for an unsigned bundle)"

    @Test(
        "a script whose interpreter AppdHostExecutables does not name is refused by verify, image and install, naming the interpreter and the key; named and granted, it installs"
    )
    func interpreterNamed() throws {
        let scratch = Scratch()
        let unnamed = try ProgramBundle.script.write(
            in: scratch.sub("unnamed"), id: "com.example.unnamed")
        let verify = try runAppd(["verify", unnamed])
        #expect(verify.status == 1)
        #expect(verify.stdout.contains("hostExecutable /bin/sh: MISSING"), "\(verify.stdout)")
        #expect(verify.stdout.contains(Self.unnamedShell), "\(verify.stdout)")
        let image = try runAppd(["image", unnamed, "-o", scratch.sub("unnamed.tar")])
        #expect(image.status == 1)
        #expect(image.stderr.contains("Prog.app: \(Self.unnamedShell)"), "\(image.stderr)")

        let named = try ProgramBundle.script.write(
            in: scratch.sub("named"), id: "com.example.named", hostExecutables: ["/bin/sh"])
        let accepted = try runAppd(["verify", named])
        #expect(accepted.status == 0, "\(accepted.stdout)\(accepted.stderr)")
        #expect(
            accepted.stdout.contains("hostExecutable /bin/sh: AppdHostExecutables"),
            "\(accepted.stdout)")
        guard isRoot else { return }
        let store = try store(scratch.sub("root"))
        #expect {
            try store.install(bundleAt: unnamed)
        } throws: { error in
            (error as? AppdError)?.message
                == "Prog.app cannot run on this host: \(Self.unnamedShell)"
        }
        _ = try store.install(bundleAt: named)
        // Named but not granted: the signing policy refuses it, naming the grant.
        var strict = unsignedConfig
        strict.signing.unsignedHostExecutables = []
        let strictStore = try AppContainersTests.store(scratch.sub("strict"), config: strict)
        #expect {
            try strictStore.install(bundleAt: named)
        } throws: { error in
            (error as? AppdError)?.message.contains(
                "may not grant: /bin/sh (an interpreter: it runs code that was never signed)")
                == true
        }
        #expect(try store.apps().map(\.bundleID) == ["com.example.named"])
    }
}
