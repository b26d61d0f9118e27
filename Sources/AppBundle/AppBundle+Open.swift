import AppdBase
import Foundation
import PrintableText

extension AppBundle {
    /// When a folder `X.app` holds the bundle one level down (a tar made of the folder rather
    /// than of its contents: `tar -cf X.tar X.app`), what to do instead; else "".
    static func nestedBundleHint(_ paths: some Sequence<String>) -> String {
        let nested = paths.compactMap { path -> String? in
            let parts = path.split(separator: "/", omittingEmptySubsequences: false)
            let isInfo =
                (parts.count == 2 && parts[1] == "Info.plist")
                || (parts.count == 3 && parts[1] == "Contents" && parts[2] == "Info.plist")
            guard isInfo, parts[0].hasSuffix(".app"), parts[0].count > 4 else { return nil }
            return String(parts[0])
        }.sorted()
        guard let folder = nested.first else { return "" }
        return
            "; it holds \(folder)/ with one: the archive was made of the folder rather than of its contents "
            + "(make it with tar -C \(folder) -cf \(folder.dropLast(4)).tar . , or install \(folder) itself)"
    }

    /// Reads and validates the bundle at `path`: walks the whole tree once, reading the property
    /// lists through the same descriptors the walk checked, then checks the keys appd interprets.
    ///
    /// Throws `invalidBundle` with every problem found, so one run shows them all.
    public static func open(at path: String, limits: BundleLimits = .init()) throws -> AppBundle {
        let path = absolute(path)
        var reader = PlistCollector(limits: limits)
        let tree = try BundleWalker.walk(path, limits: limits, visitor: &reader)
        var problems = tree.problems
        var warnings: [BundleProblem] = []

        func plist(_ relative: String, maxBytes: Int) -> [String: PlistValue]? {
            switch tree.entries[relative]?.kind {
            case nil: return nil
            case .symlink:
                problems.append(BundleProblem(relative, "is a symlink; it must be a regular file"))
                return nil
            default: break
            }
            guard let data = reader.contents[relative] else {
                problems.append(BundleProblem(relative, "could not be read"))
                return nil
            }
            do {
                return try PropertyListReader.dictionary(from: data, maxBytes: maxBytes)
            } catch {
                problems.append(BundleProblem(relative, error.message))
                return nil
            }
        }

        let hasFlat = tree.entries[BundleLayout.ios.infoPlistPath] != nil
        let hasContents = tree.entries[BundleLayout.macos.infoPlistPath] != nil
        let layout: BundleLayout = !hasFlat && hasContents ? .macos : .ios
        if hasFlat && hasContents {
            problems.append(
                BundleProblem(
                    "",
                    "has both Info.plist and Contents/Info.plist; a bundle is either flat (iOS) or has Contents/ (macOS)"
                ))
        } else if !hasFlat && !hasContents && !tree.problems.contains(where: { $0.path.isEmpty }) {
            problems.append(
                BundleProblem(
                    "",
                    "has no Info.plist (looked for Info.plist and Contents/Info.plist)"
                        + nestedBundleHint(tree.entries.keys)))
        }

        var info: InfoPlist?
        if let dict = plist(layout.infoPlistPath, maxBytes: limits.maxInfoPlistBytes) {
            var infoProblems: [String] = []
            info = InfoPlist(validating: dict, problems: &infoProblems)
            problems += infoProblems.map { BundleProblem(layout.infoPlistPath, $0) }
        }

        var executablePath = ""
        if let info {
            executablePath = layout.executablePath(info.executable)
            switch tree.entries[executablePath]?.kind {
            case nil:
                problems.append(
                    BundleProblem(
                        executablePath,
                        "is missing; CFBundleExecutable names '\(info.executable)'"))
            case .symlink:
                problems.append(
                    BundleProblem(
                        executablePath,
                        "is a symlink; the executable must be a regular file"))
            case .regularFile where tree.entries[executablePath]!.isExecutable == false:
                problems.append(
                    BundleProblem(
                        executablePath,
                        "is not executable (chmod +x it before packaging)"))
            default: break
            }
        }

        var entitlements = Entitlements(values: [:])
        if let dict = plist(layout.entitlementsPath, maxBytes: limits.maxEntitlementsBytes) {
            entitlements = Entitlements(values: dict)
            let (errors, notes) = entitlements.validate(file: layout.entitlementsPath)
            problems += errors
            warnings += notes
        }

        // Every program carried is read; a malformed one is refused whatever it is for.
        if reader.tooManyPrograms {
            problems.append(
                BundleProblem(
                    "",
                    "has more than \(PlistCollector.maxPrograms) files with an execute bit or under Frameworks/"
                ))
        }
        var programs: [BundleProgram] = []
        for (relative, content) in reader.programs.sorted(by: { $0.key < $1.key }) {
            switch content {
            case .failure(let error):
                problems.append(
                    BundleProblem(relative, "is a malformed ELF file: \(error.message)"))
            case .success(let kind?):
                programs.append(BundleProgram(path: relative, kind: kind))
            case .success(nil):
                if relative == executablePath {
                    problems.append(
                        BundleProblem(
                            relative,
                            "is neither an ELF program nor a script (#!); Linux cannot run it"))
                }
            }
        }
        if let main = programs.firstIndex(where: { $0.path == executablePath }) {
            programs.insert(programs.remove(at: main), at: 0)
        }
        for program in programs {
            if case .elf(let elf) = program.kind, elf.osABI != 0, elf.osABI != 3 {
                problems.append(
                    BundleProblem(
                        program.path,
                        "is built for OS ABI \(elf.osABI) (\(ELFMachine.osABIName(elf.osABI))), not Linux"
                    ))
            }
            if case .script(let interpreter) = program.kind, !interpreter.hasPrefix("/") {
                problems.append(
                    BundleProblem(
                        program.path,
                        "is a script whose #! line names '\(Printable(interpreter))', not an absolute path"
                    ))
            }
        }
        var symlinks: [String: String] = [:]
        for (relative, entry) in tree.entries {
            if case .symlink(let target) = entry.kind { symlinks[relative] = target }
        }

        guard problems.isEmpty, let info else {
            let count = problems.count == 1 ? "1 problem" : "\(problems.count) problems"
            throw AppdError(
                .invalidBundle, "not a valid app bundle (\(count))",
                subject: .init(.bundle, view: path), problems: problems)
        }
        return AppBundle(
            path: path, layout: layout, info: info, entitlements: entitlements,
            executablePath: executablePath, fileCount: tree.fileCount, totalBytes: tree.totalBytes,
            warnings: warnings, programs: programs, symlinks: symlinks)
    }

    private static func absolute(_ path: String) -> String {
        var path = path
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        if path.hasPrefix("/") { return path }
        let cwd = FileManager.default.currentDirectoryPath
        return path == "." ? cwd : (cwd as NSString).appendingPathComponent(path)
    }
}

/// Counts the tree and keeps the bytes of the few property lists appd reads, read from the fds
/// the walker checked (so a swapped file cannot slip in between the check and the read).
private struct PlistCollector: BundleVisitor {
    static let candidates: Set<String> = [
        BundleLayout.ios.infoPlistPath, BundleLayout.macos.infoPlistPath,
        BundleLayout.ios.entitlementsPath, BundleLayout.macos.entitlementsPath,
    ]

    let limits: BundleLimits
    var contents: [String: Data] = [:]
    /// Each file with an execute bit or under Frameworks/: what it is (nil: not a program), or
    /// why its ELF headers are refused.
    var programs: [String: Result<BundleProgram.Kind?, ELFError>] = [:]
    /// More files than `maxPrograms` had an execute bit or lay under Frameworks/.
    var tooManyPrograms = false

    init(limits: BundleLimits) { self.limits = limits }

    /// The most programs one bundle's reading keeps (each at most ~70 KB: ELFFile's bounds);
    /// past it the walk reports one problem.
    static let maxPrograms = 2048

    func wantsDescriptor(for entry: BundleEntry) -> Bool {
        Self.candidates.contains(entry.relativePath) || Self.mayBeProgram(entry)
    }

    static func mayBeProgram(_ entry: BundleEntry) -> Bool {
        guard entry.kind == .regularFile else { return false }
        let path = entry.relativePath
        return entry.isExecutable || path.hasPrefix("Frameworks/")
            || path.hasPrefix("Contents/Frameworks/")
    }

    mutating func enterDirectory(_ entry: BundleEntry, fd: Int32) throws {}
    mutating func leaveDirectory(_ entry: BundleEntry, fd: Int32) throws {}
    mutating func visitSymlink(_ entry: BundleEntry) throws {}

    mutating func visitFile(_ entry: BundleEntry, fd: Int32) throws {
        guard fd >= 0 else { return }
        if Self.mayBeProgram(entry) {
            if programs.count < Self.maxPrograms {
                programs[entry.relativePath] = BundleProgram.read(
                    fd: fd, size: entry.size, executableBit: entry.isExecutable)
            } else {
                tooManyPrograms = true
            }
        }
        guard Self.candidates.contains(entry.relativePath) else { return }
        // One byte past the larger limit is enough to tell the parser the file is too big.
        let cap = max(limits.maxInfoPlistBytes, limits.maxEntitlementsBytes) + 1
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while data.count < cap {
            let wanted = min(buffer.count, cap - data.count)
            let n = buffer.withUnsafeMutableBytes { buffer in
                retryingInterrupts { read(fd, buffer.baseAddress, wanted) }
            }
            if n < 0 { throw AppdError.system("read \(entry.relativePath)") }
            if n == 0 { break }
            data.append(contentsOf: buffer[..<n])
        }
        contents[entry.relativePath] = data
    }
}

extension InfoPlist {
    /// Validates the keys appd interprets; each problem names its key.
    init?(validating dict: [String: PlistValue], problems: inout [String]) {
        func string(_ key: String, required: Bool) -> String? {
            switch dict[key] {
            case nil:
                if required { problems.append("\(key) is missing") }
                return nil
            case .string(let text)?:
                if containsBuildPlaceholder(text) {
                    problems.append(
                        "\(key) holds the unexpanded build setting '\(Printable(text))'; build the bundle with Xcode or expand it by hand"
                    )
                    return nil
                }
                // Every string read here may be printed (verify, install, info, list); a
                // control or bidi character in one could drive the admin's terminal.
                if let control = Printable.firstControl(in: text) {
                    problems.append(
                        "\(key) '\(Printable(text))' holds the control character \(Printable.codePoint(control)); Info.plist strings may not hold control or bidi characters"
                    )
                    return nil
                }
                if required && text.isEmpty {
                    problems.append("\(key) is empty")
                    return nil
                }
                return text
            case let value?:
                problems.append("\(key) must be a string, not a \(value.typeName)")
                return nil
            }
        }

        let rawID = string("CFBundleIdentifier", required: true)
        let executable = string("CFBundleExecutable", required: true)
        let rawVersion = string("CFBundleVersion", required: true)
        let shortVersion = string("CFBundleShortVersionString", required: false)
        let name = string("CFBundleName", required: false)
        let displayName = string("CFBundleDisplayName", required: false)
        let packageType = string("CFBundlePackageType", required: false)

        var identifier: BundleIdentifier?
        if let rawID {
            do { identifier = try BundleIdentifier(validating: rawID) } catch {
                problems.append("CFBundleIdentifier: \(error.message)")
            }
        }
        var version: BundleVersion?
        if let rawVersion {
            do { version = try BundleVersion(validating: rawVersion) } catch {
                problems.append("CFBundleVersion: \(error.message)")
            }
        }
        if let executable, let why = Self.badExecutableName(executable) {
            problems.append("CFBundleExecutable '\(Printable(executable))' \(why)")
        }
        if let packageType, packageType != "APPL" {
            problems.append(
                "CFBundlePackageType is '\(Printable(packageType))'; only applications (APPL) can be installed"
            )
        }
        let before = problems.count
        _ = HostExecutables.paths(in: dict, problems: &problems)
        _ = BundleHandlers.read(in: dict, problems: &problems)
        guard let identifier, let executable, let version, problems.count == before,
            Self.badExecutableName(executable) == nil,
            packageType == nil || packageType == "APPL"
        else { return nil }
        self.init(
            identifier: identifier, executable: executable, version: version,
            shortVersion: shortVersion, name: name, displayName: displayName,
            packageType: packageType, raw: dict)
    }

    /// Why a CFBundleExecutable value is not a plain file name, or nil if it is one.
    static func badExecutableName(_ name: String) -> String? {
        if name.contains("/") { return "must be a file name, not a path" }
        if name == "." || name == ".." { return "must be a file name" }
        if name.hasPrefix("-") { return "must not start with '-'" }
        if name.utf8.count > 255 { return "is longer than 255 bytes" }
        if let control = Printable.firstControl(in: name) {
            return "holds the control character \(Printable.codePoint(control))"
        }
        return nil
    }
}
