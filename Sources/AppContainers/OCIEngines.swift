import AppdBase
import Foundation
import Glibc

/// Which OCI engines on this host are configured to call appd-oci (docs/kubernetes.md), for
/// `appd doctor`: containerd's CRI runtimes (`/etc/containerd/config.toml`), podman's
/// `[engine.runtimes]` (`containers.conf` in /etc/containers, its `containers.conf.d`, and
/// /usr/share/containers) and docker's `runtimes` (`/etc/docker/daemon.json`). An engine
/// "knows" the runtime when an entry names a binary whose file name is `appd-oci`.
/// Informational only: nothing here is a finding, an unreadable file is a note. Every file is
/// read bounded (`maxFileBytes`), at most `maxDropInFiles` drop-ins.
public struct OCIRuntimeRegistration: Sendable, Codable, Equatable {
    /// The appd-oci executable found: the installed one, else the build's beside `appd`.
    public var runtime: String?
    /// Where it was looked for when it was not found.
    public var searched: [String] = []
    /// Each runtime entry that names an appd-oci.
    public var entries: [Entry] = []
    /// The engines whose configuration file exists but names no appd-oci.
    public var unconfigured: [String] = []
    /// What could not be read, or is configured but will not work as it stands.
    public var notes: [String] = []

    public struct Entry: Sendable, Codable, Equatable {
        /// `containerd`, `podman` or `docker`.
        public var engine: String
        /// The file holding the entry.
        public var file: String
        /// The runtime's name in that engine (the RuntimeClass handler, `--runtime NAME`).
        public var name: String
        /// The binary it names.
        public var binary: String
    }

    /// The notes that mean every container of an engine fails (a cgroup driver the host
    /// lacks), and a file the admin named that could not be read: what `appd doctor --oci`
    /// counts as needing attention.
    public var failures: [String] {
        notes.filter { $0.contains(" is refused at create") || $0.contains("(given)") }
    }

    /// The engines that know it, each once, in the order checked.
    public var engines: [String] {
        var seen = Set<String>()
        return entries.map(\.engine).filter { seen.insert($0).inserted }
    }
}

/// The engines' configuration files to read instead of the default places (`appd doctor
/// --containerd-config`, `--podman-config`, `--docker-config`): a node whose engines keep
/// theirs elsewhere (k3s's containerd, a podman `--config`, dockerd `--config-file`). Each is
/// read as given, never below a host root.
public struct EngineConfigPaths: Sendable, Equatable {
    public var containerd: String?
    /// containers.conf files, or folders whose `*.conf` files are read in name order.
    public var podman: [String]
    public var docker: String?

    public init(containerd: String? = nil, podman: [String] = [], docker: String? = nil) {
        self.containerd = containerd
        self.podman = podman
        self.docker = docker
    }

    /// Every path given.
    public var all: [String] {
        [containerd].compactMap { $0 } + podman + [docker].compactMap { $0 }
    }
}

public enum OCIEngines {
    public static let installedRuntime = "/usr/libexec/appd/appd-oci"
    static let maxFileBytes = 1 << 20
    static let maxDropInFiles = 64

    /// Checks the configuration files below `hostRoot` (`""`: this host; tests give a fake
    /// tree). `besideExecutable`: the directory of the running `appd`, where a build keeps
    /// appd-oci.
    /// `paths`: files given instead of the default places, read as they are named.
    public static func check(
        hostRoot: String = "", besideExecutable: String? = nil,
        paths: EngineConfigPaths = EngineConfigPaths()
    ) -> OCIRuntimeRegistration {
        var result = OCIRuntimeRegistration()
        let candidates =
            [hostRoot + installedRuntime] + (besideExecutable.map { ["\($0)/appd-oci"] } ?? [])
        result.runtime = candidates.first { access($0, X_OK) == 0 }
        if result.runtime == nil { result.searched = candidates }

        // What the admin named is read as named, and its absence said.
        var given = Set(paths.all)
        func read(_ path: String) -> String? {
            let explicit = given.contains(path)
            switch readBounded(explicit ? path : hostRoot + path) {
            case .success(let text): return text
            case .failure(let problem):
                if problem != .absent || explicit {
                    result.notes.append("\(path)\(explicit ? " (given)" : ""): \(problem.text)")
                }
                return nil
            }
        }
        func add(_ engine: String, _ file: String, _ found: [(name: String, binary: String)]) {
            for (name, binary) in found where names(binary) {
                result.entries.append(.init(engine: engine, file: file, name: name, binary: binary))
                if access(hostRoot + binary, X_OK) != 0 {
                    result.notes.append(
                        "\(engine)'s runtime \(name) (\(file)) names \(binary), which is not an executable file"
                    )
                }
            }
        }

        let containerd = paths.containerd ?? "/etc/containerd/config.toml"
        if let text = read(containerd) {
            let before = result.entries.count
            add("containerd", containerd, containerdRuntimes(text))
            if result.entries.count == before { result.unconfigured.append("containerd") }
            result.notes += containerdNotes(
                text, names: Set(result.entries[before...].map(\.name)),
                systemdRunning: access(hostRoot + "/run/systemd/system", F_OK) == 0)
        }

        var podmanFiles: [String] = []
        func addDropIns(_ dropIns: String, at path: String) {
            guard let directory = try? FileDescriptor.directory(path) else { return }
            let confs = ((try? directory.entries()) ?? []).filter { $0.hasSuffix(".conf") }.sorted()
            podmanFiles += confs.prefix(maxDropInFiles).map { "\(dropIns)/\($0)" }
            if confs.count > maxDropInFiles {
                result.notes.append(
                    "\(dropIns): only the first \(maxDropInFiles) of \(confs.count) files were read"
                )
            }
        }
        if paths.podman.isEmpty {
            podmanFiles = [
                "/usr/share/containers/containers.conf", "/etc/containers/containers.conf",
            ]
            let dropIns = "/etc/containers/containers.conf.d"
            addDropIns(dropIns, at: hostRoot + dropIns)
        } else {
            for path in paths.podman {
                var info = stat()
                if stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR {
                    let before = podmanFiles.count
                    addDropIns(path, at: path)
                    given.formUnion(podmanFiles[before...])
                } else {
                    podmanFiles.append(path)
                }
            }
        }
        var podmanRead = false
        var jsonNames: Set<String>?
        var cgroupManager: (String, String)?
        let podmanBefore = result.entries.count
        for file in podmanFiles {
            guard let text = read(file) else { continue }
            podmanRead = true
            let parsed = containersConfRuntimes(text)
            add("podman", file, parsed.runtimes)
            // The last file that sets the list decides (the later ones override).
            if let names = parsed.supportsJSON { jsonNames = Set(names) }
            if let manager = parsed.cgroupManager { cgroupManager = (manager, file) }
        }
        // podman's default is systemd where systemd runs, cgroupfs elsewhere: only a file
        // that sets systemd on a host without it breaks every container.
        if result.entries.count > podmanBefore, let (manager, file) = cgroupManager,
            manager == "systemd", access(hostRoot + "/run/systemd/system", F_OK) != 0
        {
            result.notes.append(
                "podman: \(file) sets cgroup_manager = \"systemd\" but systemd is not running here: every container is refused at create; set cgroup_manager = \"cgroupfs\""
            )
        }
        if podmanRead && result.entries.count == podmanBefore {
            result.unconfigured.append("podman")
        }
        for entry in result.entries[podmanBefore...] where !(jsonNames ?? []).contains(entry.name) {
            result.notes.append(
                "podman: \(entry.name) is not in runtime_supports_json, so podman reads its errors as text and loses the message"
            )
        }

        let docker = paths.docker ?? "/etc/docker/daemon.json"
        if let text = read(docker) {
            let before = result.entries.count
            switch dockerRuntimes(text) {
            case .success(let found): add("docker", docker, found)
            case .failure(let problem): result.notes.append("\(docker): \(problem.message)")
            }
            if result.entries.count == before { result.unconfigured.append("docker") }
        }
        return result
    }

    /// Whether `binary` is an appd-oci (its file name).
    static func names(_ binary: String) -> Bool {
        binary.split(separator: "/").last == "appd-oci"
    }

    // MARK: the three formats

    /// containerd's `config.toml`: every `….runtimes.NAME.options.BinaryName = "PATH"`,
    /// spelled as a table header and a key (`[plugins."io.containerd.grpc.v1.cri".containerd.
    /// runtimes.appd.options]` then `BinaryName = "…"`) or as dotted keys below a shorter
    /// header.
    public static func containerdRuntimes(_ text: String) -> [(name: String, binary: String)] {
        var found: [(name: String, binary: String)] = []
        for (key, value) in TOMLLines(text) {
            guard key.count >= 4, key[key.count - 1] == "BinaryName",
                key[key.count - 2] == "options", key[key.count - 4] == "runtimes",
                let binary = value.strings.first, value.isString
            else { continue }
            found.append((key[key.count - 3], binary))
        }
        return found
    }

    /// containers.conf: the `[engine.runtimes]` table (`NAME = ["PATH", …]`, podman takes the
    /// first path that exists) and `[engine] runtime_supports_json`.
    public static func containersConfRuntimes(_ text: String) -> (
        runtimes: [(name: String, binary: String)], supportsJSON: [String]?,
        cgroupManager: String?
    ) {
        var runtimes: [(name: String, binary: String)] = []
        var supportsJSON: [String]?
        var cgroupManager: String?
        for (key, value) in TOMLLines(text) {
            if key.count == 3, key[0] == "engine", key[1] == "runtimes" {
                for path in value.strings where names(path) { runtimes.append((key[2], path)) }
            } else if key == ["engine", "runtime_supports_json"] {
                supportsJSON = value.strings
            } else if key == ["engine", "cgroup_manager"], value.isString {
                cgroupManager = value.strings.first
            }
        }
        return (runtimes, supportsJSON, cgroupManager)
    }

    /// docker's `daemon.json`: `"runtimes": {"NAME": {"path": "PATH"}}`.
    public static func dockerRuntimes(_ text: String) -> Result<
        [(name: String, binary: String)], AppdError
    > {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)),
            let top = object as? [String: Any]
        else { return .failure(AppdError(.invalidConfig, "not a JSON object")) }
        guard let runtimes = top["runtimes"] else { return .success([]) }
        guard let table = runtimes as? [String: Any] else {
            return .failure(AppdError(.invalidConfig, "\"runtimes\" is not an object"))
        }
        return .success(
            table.keys.sorted().compactMap { name in
                guard let path = (table[name] as? [String: Any])?["path"] as? String else {
                    return nil
                }
                return (name, path)
            })
    }

    // MARK: reading

    enum ReadProblem: Error, Equatable {
        case absent
        case unreadable(String)

        var text: String {
            switch self {
            case .absent: "absent"
            case .unreadable(let why): why
            }
        }
    }

    /// A regular file's text, at most `maxFileBytes` (a FIFO or a device is not read: it
    /// could block or never end).
    static func readBounded(_ path: String) -> Result<String, ReadProblem> {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else {
            let code = errno
            return .failure(
                code == ENOENT || code == ENOTDIR
                    ? .absent : .unreadable("cannot be opened: \(errnoText(code))"))
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            return .failure(.unreadable("not a regular file"))
        }
        switch readAll(fd, limit: maxFileBytes + 1) {
        case .success(let bytes) where bytes.count > maxFileBytes:
            return .failure(.unreadable("larger than \(maxFileBytes) bytes, not read"))
        case .success(let bytes): return .success(String(decoding: bytes, as: UTF8.self))
        case .failure(let error):
            return .failure(.unreadable("cannot be read: \(errnoText(error.rawValue))"))
        }
    }
}

/// The subset of TOML the engines' files use, read line by line: `[table.headers]` (dotted,
/// quoted parts), `key = value` with dotted or quoted keys, values that are strings or arrays
/// of strings (an array may span lines), `#` comments. Each assignment comes out with its full
/// key path (the header's parts, then the key's). What it cannot read (inline tables, numbers,
/// multi-line strings) comes out as a value with no strings, which no check matches.
struct TOMLLines: Sequence {
    struct Value {
        var strings: [String]
        /// A lone string, not an array.
        var isString: Bool
        /// The value as written (`true`, `"x"`), for what is not a string.
        var raw: String = ""
    }

    var text: String
    init(_ text: String) { self.text = text }

    func makeIterator() -> IndexingIterator<[([String], Value)]> {
        var result: [([String], Value)] = []
        var table: [String] = []
        var pending: (key: [String], text: String)?
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = Self.uncommented(String(raw)).trimmingCharacters(in: .whitespaces)
            if var open = pending {
                open.text += " " + line
                if Self.arrayClosed(open.text) {
                    result.append((open.key, Self.value(open.text)))
                    pending = nil
                } else {
                    pending = open
                }
                continue
            }
            if line.hasPrefix("[") {
                // `[[array.of.tables]]` is not used by these files for runtimes: its parts
                // still name the table.
                let inner = line.trimmingCharacters(in: CharacterSet(charactersIn: "[] "))
                table = Self.keyParts(inner)
                continue
            }
            guard let equals = Self.firstUnquoted("=", in: line) else { continue }
            let key = table + Self.keyParts(String(line[..<equals]))
            let rest = String(line[line.index(after: equals)...]).trimmingCharacters(
                in: .whitespaces)
            if rest.hasPrefix("[") && !Self.arrayClosed(rest) {
                pending = (key, rest)
            } else {
                result.append((key, Self.value(rest)))
            }
        }
        return result.makeIterator()
    }

    /// `a."b.c".'d'` → `["a", "b.c", "d"]`.
    static func keyParts(_ text: String) -> [String] {
        var parts: [String] = []
        var current = ""
        var quote: Character?
        for character in text {
            if let open = quote {
                if character == open { quote = nil } else { current.append(character) }
            } else if character == "\"" || character == "'" {
                quote = character
            } else if character == "." {
                parts.append(current.trimmingCharacters(in: .whitespaces))
                current = ""
            } else {
                current.append(character)
            }
        }
        parts.append(current.trimmingCharacters(in: .whitespaces))
        return parts
    }

    /// The strings of a value: `"x"`, `'x'`, `["x", 'y']`. Backslash escapes in `"…"` are
    /// taken as the character they escape (enough for paths).
    static func value(_ text: String) -> Value {
        var strings: [String] = []
        var current = ""
        var quote: Character?
        var escaped = false
        for character in text {
            if let open = quote {
                if escaped {
                    current.append(character)
                    escaped = false
                } else if open == "\"" && character == "\\" {
                    escaped = true
                } else if character == open {
                    strings.append(current)
                    current = ""
                    quote = nil
                } else {
                    current.append(character)
                }
            } else if character == "\"" || character == "'" {
                quote = character
            }
        }
        return Value(
            strings: strings, isString: !text.hasPrefix("[") && strings.count == 1, raw: text)
    }

    /// The line without its `#` comment (a `#` inside a string stays).
    static func uncommented(_ line: String) -> String {
        guard let hash = firstUnquoted("#", in: line) else { return line }
        return String(line[..<hash])
    }

    static func firstUnquoted(_ target: Character, in text: String) -> String.Index? {
        var quote: Character?
        var escaped = false
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            if let open = quote {
                if escaped {
                    escaped = false
                } else if open == "\"" && character == "\\" {
                    escaped = true
                } else if character == open {
                    quote = nil
                }
            } else if character == "\"" || character == "'" {
                quote = character
            } else if character == target {
                return index
            }
            index = text.index(after: index)
        }
        return nil
    }

    /// Whether the `[` the text starts with has its `]` (outside strings).
    static func arrayClosed(_ text: String) -> Bool {
        guard let close = firstUnquoted("]", in: text) else { return false }
        return close > text.startIndex
    }
}
