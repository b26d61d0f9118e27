import AppdBase
import PrintableText

/// What a host offers a bundle's programs, asked by `AppBundle.programNeeds(on:)`. Sandbox's
/// `HostLibraries` answers for this host or for a root folder (another host's filesystem).
public protocol ProgramHost {
    /// The host's CPU, as the engines name it (GOARCH).
    var architecture: String { get }
    /// How messages name it: "this host", "the host at DIR".
    var name: String { get }
    /// Whether `path` (absolute) is a file the host has and an app sees; for an ELF file, its
    /// headers must match `elfClass` and `machine` when they are given.
    func hasFile(_ path: String, elfClass: ELFFile.Class?, machine: UInt16?) -> Bool
    /// Where the loader finds library `name` for an object of `elfClass` and `machine`:
    /// beneath `directories` only, or (nil) through its cache and default directories.
    func library(
        _ name: String, elfClass: ELFFile.Class, machine: UInt16, in directories: [String]?
    ) -> String?
}

extension ProgramHost {
    public var name: String { "this host" }
}

/// What one program of a bundle needs to run, and where each need was found.
public struct ProgramNeeds: Sendable, Equatable, Codable {
    public struct Need: Sendable, Equatable, Codable {
        public enum Kind: String, Sendable, Codable {
            case architecture, loader, library, interpreter
            /// A script's interpreter the app may execute: named in Info.plist's
            /// `AppdHostExecutables` (found at that key) or inside the bundle.
            case hostExecutable
        }
        public var kind: Kind
        public var name: String
        /// Where it was found: `bundle:<relative path>` or a host path (or the host's
        /// architecture); nil: missing.
        public var foundAt: String?

        public init(kind: Kind, name: String, foundAt: String?) {
            self.kind = kind
            self.name = name
            self.foundAt = foundAt
        }

        /// How a refusal names it: "the loader /lib64/ld-linux-x86-64.so.2".
        public var described: String {
            switch kind {
            case .architecture: "the \(name) architecture"
            case .loader: "the loader \(Printable(name))"
            case .library: "the library \(Printable(name))"
            case .interpreter: "the interpreter \(Printable(name))"
            case .hostExecutable: "\(Printable(name)) named in \(HostExecutables.infoKey)"
            }
        }
    }

    /// Relative to the bundle root.
    public var path: String
    /// `ELF64 x86-64 (amd64), dynamic`, `ELF64 AArch64 (arm64), static`, `script`; a library
    /// needing nothing (or a static-pie) is a `shared object`.
    public var format: String
    /// GOARCH of an ELF program (nil for a script or an unnamed machine).
    public var architecture: String?
    public var needs: [Need]

    public var missing: [Need] { needs.filter { $0.foundAt == nil } }
}

extension AppBundle {
    /// The architectures of the bundle's ELF programs, each with the first program built for
    /// it; more than one means the programs disagree (`appd image` refuses that).
    public var architectures: [(architecture: String, program: String)] {
        var seen: [(String, String)] = []
        for program in programs {
            guard let elf = program.elf else { continue }
            let arch = elf.architecture ?? elf.machineName
            if !seen.contains(where: { $0.0 == arch }) { seen.append((arch, program.path)) }
        }
        return seen
    }

    /// Reads what each program needs and looks for it in the bundle (a library through its
    /// `$ORIGIN`-relative RUNPATH) and then on `host`, as the loader would.
    public func programNeeds(on host: some ProgramHost) -> [ProgramNeeds] {
        let byPath = Dictionary(programs.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
        let mainRPath = programs.first { $0.path == executablePath }?.elf?.rpath ?? []
        return programs.map { program in
            switch program.kind {
            case .script(let interpreter):
                let found = host.hasFile(interpreter, elfClass: nil, machine: nil)
                return ProgramNeeds(
                    path: program.path, format: "script", architecture: nil,
                    needs: [
                        .init(
                            kind: .interpreter, name: interpreter,
                            foundAt: found ? interpreter : nil),
                        .init(
                            kind: .hostExecutable, name: interpreter,
                            foundAt: interpreterAllowance(interpreter)),
                    ])
            case .elf(let elf):
                var needs: [ProgramNeeds.Need] = []
                let arch = elf.architecture ?? elf.machineName
                needs.append(
                    .init(
                        kind: .architecture, name: arch,
                        foundAt: arch == host.architecture ? host.architecture : nil))
                if let loader = elf.interpreter {
                    let found = host.hasFile(loader, elfClass: elf.elfClass, machine: elf.machine)
                    needs.append(.init(kind: .loader, name: loader, foundAt: found ? loader : nil))
                }
                // RUNPATH applies to the object's own NEEDED; RPATH (without RUNPATH) also to
                // what it loads, so the executable's RPATH is searched for its libraries too.
                let directories = elf.runpath.isEmpty ? elf.rpath + mainRPath : elf.runpath
                for name in elf.needed {
                    let found = findLibrary(
                        name, for: program.path, elf, directories: directories, byPath: byPath,
                        host: host)
                    needs.append(.init(kind: .library, name: name, foundAt: found))
                }
                let linkage =
                    !elf.isStatic ? "dynamic" : elf.type == 3 ? "shared object" : "static"
                return ProgramNeeds(
                    path: program.path,
                    format:
                        "\(elf.elfClass.rawValue) \(elf.machineName)"
                        + (elf.architecture.map { " (\($0))" } ?? "") + ", \(linkage)",
                    architecture: elf.architecture, needs: needs)
            }
        }
    }

    /// Why the sandbox would let a script's `interpreter` execute: `AppdHostExecutables`
    /// names it (as the `#!` line spells it), or it lies in the bundle (`bundle:<relative
    /// path>`); nil: it would not (Landlock executes no other host program).
    func interpreterAllowance(_ interpreter: String) -> String? {
        if info.hostExecutables.contains(interpreter) { return HostExecutables.infoKey }
        if interpreter.hasPrefix(path + "/"),
            let inside = resolve(
                interpreter.dropFirst(path.count + 1).split(separator: "/").map(String.init)),
            programs.contains(where: { $0.path == inside })
        {
            return "bundle:\(inside)"
        }
        return nil
    }

    /// One problem per script whose `#!` interpreter the sandbox would not execute: neither
    /// named in `AppdHostExecutables` nor in the bundle. Such a bundle installed, but its
    /// script failed at launch with EACCES; install, verify, `appd image` and appd-oci create
    /// refuse it, on any host.
    public var unnamedInterpreters: [BundleProblem] {
        programs.compactMap { program in
            guard case .script(let interpreter) = program.kind,
                interpreterAllowance(interpreter) == nil
            else { return nil }
            let name = Printable(interpreter)
            return BundleProblem(
                program.path,
                "runs through its interpreter \(name) (#!), which \(HostExecutables.infoKey) in Info.plist does not name, and an app executes no host program it does not name: add \(name) to \(HostExecutables.infoKey) (its signer must grant it: [Signer] HostExecutables= in appd.conf, or [Signing] UnsignedHostExecutables= for an unsigned bundle)"
            )
        }
    }

    /// One problem per program that cannot run on `host`, naming the file and what it lacks
    /// there (`unnamedInterpreters` says what no host would run).
    public static func hostProblems(_ needs: [ProgramNeeds], hostName: String = "this host")
        -> [BundleProblem]
    {
        needs.compactMap { program in
            let missing = program.missing.filter { $0.kind != .hostExecutable }
            guard !missing.isEmpty else { return nil }
            if let arch = missing.first(where: { $0.kind == .architecture }) {
                return BundleProblem(
                    program.path,
                    "is built for \(arch.name); \(hostName) is \(Self.hostArchitectureName(needs, arch))"
                )
            }
            let what = missing.map(\.described).joined(separator: ", ")
            let whereLooked =
                missing.contains { $0.kind == .library }
                ? "found neither in the bundle nor on \(hostName)" : "not found on \(hostName)"
            return BundleProblem(program.path, "needs \(what), \(whereLooked)")
        }
    }

    private static func hostArchitectureName(_ needs: [ProgramNeeds], _ missing: ProgramNeeds.Need)
        -> String
    {
        // A found architecture need names the host's; with none found, ask the platform.
        needs.lazy.flatMap(\.needs).first { $0.kind == .architecture && $0.foundAt != nil }?
            .foundAt ?? ELFMachine.hostArchitecture
    }

    private func findLibrary(
        _ name: String, for objectPath: String, _ elf: ELFFile, directories: [String],
        byPath: [String: BundleProgram], host: some ProgramHost
    ) -> String? {
        if name.contains("/") {
            guard name.hasPrefix("/") else { return nil }
            return host.hasFile(name, elfClass: elf.elfClass, machine: elf.machine) ? name : nil
        }
        let objectDirectory = objectPath.split(separator: "/").dropLast().map(String.init)
        for directory in directories {
            var rest: Substring?
            for token in ["$ORIGIN", "${ORIGIN}"] where directory.hasPrefix(token) {
                rest = directory.dropFirst(token.count)
            }
            if let rest {
                guard rest.isEmpty || rest.hasPrefix("/") else { continue }
                let candidate =
                    objectDirectory + rest.split(separator: "/").map(String.init) + [name]
                if let file = resolve(candidate), let library = byPath[file]?.elf,
                    library.elfClass == elf.elfClass, library.machine == elf.machine
                {
                    return "bundle:\(file)"
                }
            } else if directory.hasPrefix("/"), !directory.contains("$") {
                if let path = host.library(
                    name, elfClass: elf.elfClass, machine: elf.machine, in: [directory])
                {
                    return path
                }
            }
            // $LIB, $PLATFORM and relative entries: the loader's meaning depends on the
            // process (its working directory, the CPU); no bundle relies on them.
        }
        return host.library(name, elfClass: elf.elfClass, machine: elf.machine, in: nil)
    }

    /// `components` relative to the bundle root with `.`, `..` and the bundle's symlinks
    /// resolved; nil when it leaves the bundle or loops.
    func resolve(_ components: [String]) -> String? {
        var pending = components[...]
        var current: [String] = []
        var hops = 0
        while let component = pending.popFirst() {
            if component == "." || component.isEmpty { continue }
            if component == ".." {
                guard !current.isEmpty else { return nil }
                current.removeLast()
                continue
            }
            current.append(component)
            if let target = symlinks[current.joined(separator: "/")] {
                hops += 1
                guard hops <= 40, !target.hasPrefix("/") else { return nil }
                current.removeLast()
                pending = (target.split(separator: "/").map(String.init) + pending)[...]
            }
        }
        return current.joined(separator: "/")
    }
}

extension AppBundle {
    /// Refuses a bundle a program of which cannot run on `host`: another architecture, a
    /// missing loader or script interpreter, a script interpreter the sandbox would not
    /// execute (`unnamedInterpreters`), a library found neither in the bundle nor on the
    /// host; or whose `UIRequiredDeviceCapabilities` names another CPU. One problem per
    /// program, naming the file and everything it lacks; the message
    /// itself is the first problem, so a one-line error says it all.
    public func checkRuns(on host: some ProgramHost) throws {
        let capabilities = DeviceCapabilities.problems(
            info, hostArchitecture: host.architecture, hostName: host.name
        ).map { BundleProblem(layout.infoPlistPath, $0) }
        let hostProblems =
            capabilities + AppBundle.hostProblems(programNeeds(on: host), hostName: host.name)
        let problems = unnamedInterpreters + hostProblems
        guard let first = problems.first else { return }
        let more = problems.count > 1 ? " (and \(problems.count - 1) more)" : ""
        throw AppdError(
            .invalidBundle, "\(directoryName) cannot run on \(host.name): \(first)\(more)",
            problems: problems.count > 1 ? problems : [],
            hint: hostProblems.isEmpty
                ? "docs/info-plist.md, AppdHostExecutables"
                : "carry the libraries in \(layout.frameworksPath)/ with an $ORIGIN RUNPATH (docs/info-plist.md, \"What a bundle must carry\")"
        )
    }
}
