import AppdBase
import Foundation

/// The entitlements a bundle requests, every key kept with its type, and what each means here.
///
/// Requesting is not having: what an app is granted is decided later, by signature and policy,
/// and compiled into a sandbox profile. This type only says what was asked for.
public struct Entitlements: Sendable, Equatable {
    public let values: [String: PlistValue]

    public init(values: [String: PlistValue]) {
        self.values = values
    }

    /// Reads entitlements stored by appd (binary plist) or shipped in a bundle (XML or binary).
    public init(plistData: Data, maxBytes: Int = 16 << 20) throws {
        do {
            values = try PropertyListReader.dictionary(from: plistData, maxBytes: maxBytes)
        } catch {
            throw AppdError(.corruptState, "stored entitlements \(error.message)")
        }
    }

    /// A binary plist of `values`, as the registry stores it.
    public func plistData() throws -> Data {
        try PropertyListSerialization.data(
            fromPropertyList: values.mapValues(\.foundationObject), format: .binary, options: 0)
    }

    public func bool(_ key: String) -> Bool { values[key]?.boolValue == true }

    /// Strings of an array-valued entitlement such as application groups.
    public func strings(_ key: String) -> [String] {
        guard case .array(let items) = values[key] else { return [] }
        return items.compactMap(\.stringValue)
    }

    /// Every requested key with what it does on Linux, sorted by key.
    public var report: [EntitlementReport] {
        values.keys.sorted().map { key in
            EntitlementReport(
                key: key, value: values[key]!, meaning: EntitlementCatalog.meaning(of: key))
        }
    }

    /// Keys appd does not know at all; they are kept and listed, never dropped.
    public var unknownKeys: [String] {
        report.filter { $0.meaning == .unknown }.map(\.key)
    }

    /// Checks what the sandbox will interpret: keys with a Linux effect must have the type the
    /// catalog says and no unexpanded build placeholders. Returns (errors, warnings).
    public func validate(file: String) -> (errors: [BundleProblem], warnings: [BundleProblem]) {
        var errors: [BundleProblem] = []
        var warnings: [BundleProblem] = []
        for key in values.keys.sorted() {
            let value = values[key]!
            let placeholder = value.allStrings.first(where: containsBuildPlaceholder)
            guard case .linux(_, let expected) = EntitlementCatalog.meaning(of: key) else {
                if let placeholder {
                    warnings.append(
                        BundleProblem(
                            file,
                            "\(key) holds the unexpanded build setting '\(placeholder)' (the key has no effect on Linux)"
                        ))
                }
                continue
            }
            if !expected.matches(value) {
                errors.append(
                    BundleProblem(file, "\(key) must be \(expected.text), not a \(value.typeName)"))
            } else if let placeholder {
                errors.append(
                    BundleProblem(
                        file, "\(key) holds the unexpanded build setting '\(placeholder)'"))
            }
        }
        return (errors, warnings)
    }
}

/// One requested entitlement and what appd makes of it.
public struct EntitlementReport: Sendable, Encodable {
    public let key: String
    public let value: PlistValue
    public let meaning: EntitlementMeaning

    enum CodingKeys: String, CodingKey { case key, value, status, effect }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(key, forKey: .key)
        try container.encode(value, forKey: .value)
        switch meaning {
        case .linux(let effect, _):
            try container.encode("linux", forKey: .status)
            try container.encode(effect, forKey: .effect)
        case .noLinuxEffect(let what):
            try container.encode("no-linux-effect", forKey: .status)
            try container.encode(what, forKey: .effect)
        case .unknown:
            try container.encode("unknown", forKey: .status)
        }
    }
}

public enum EntitlementMeaning: Sendable, Equatable {
    /// The sandbox acts on this key; the text says how.
    case linux(effect: String, type: EntitlementType)
    /// A known Apple key with nothing to do on Linux; recorded and reported.
    case noLinuxEffect(String)
    case unknown
}

public enum EntitlementType: Sendable, Equatable {
    case bool
    case stringArray

    func matches(_ value: PlistValue) -> Bool {
        switch (self, value) {
        case (.bool, .bool): true
        case (.stringArray, .array(let items)): items.allSatisfy { $0.stringValue != nil }
        default: false
        }
    }

    var text: String { self == .bool ? "a boolean" : "an array of strings" }
}

/// The keys appd knows (docs/sandbox.md, "The sandbox").
public enum EntitlementCatalog {
    public static let appSandbox = "com.apple.security.app-sandbox"
    public static let networkClient = "com.apple.security.network.client"
    public static let networkServer = "com.apple.security.network.server"
    public static let applicationGroups = "com.apple.security.application-groups"
    public static let readOnlyPaths =
        "com.apple.security.temporary-exception.files.absolute-path.read-only"
    public static let readWritePaths =
        "com.apple.security.temporary-exception.files.absolute-path.read-write"
    public static let camera = "com.apple.security.device.camera"
    public static let audioInput = "com.apple.security.device.audio-input"
    public static let usb = "com.apple.security.device.usb"
    public static let allowJIT = "com.apple.security.cs.allow-jit"
    public static let allowUnsignedExecutableMemory =
        "com.apple.security.cs.allow-unsigned-executable-memory"
    public static let debugger = "com.apple.security.cs.debugger"
    public static let getTaskAllow = "com.apple.security.get-task-allow"

    public static let effects: [String: (String, EntitlementType)] = [
        appSandbox: (
            "the app runs sandboxed; false is refused unless policy allows unsandboxed apps", .bool
        ),
        networkClient: (
            "host network for outgoing connections; binding TCP or UDP ports is refused", .bool
        ),
        networkServer: ("host network; may bind and listen", .bool),
        applicationGroups: ("each group's shared container is mounted read-write", .stringArray),
        readOnlyPaths: ("these host paths readable, where admin policy lists them", .stringArray),
        readWritePaths: ("these host paths writable, where admin policy lists them", .stringArray),
        camera: ("/dev/video* where present", .bool),
        audioInput: ("/dev/snd/* where present", .bool),
        usb: ("/dev/bus/usb where present", .bool),
        allowJIT: ("may map memory writable and executable", .bool),
        allowUnsignedExecutableMemory: ("may map memory writable and executable", .bool),
        debugger: ("may ptrace its own processes inside the sandbox", .bool),
        getTaskAllow: ("may ptrace its own processes inside the sandbox", .bool),
    ]

    /// Known Apple keys, and key families, that do nothing on Linux.
    static let inert: [String: String] = [
        "aps-environment": "push notifications",
        "application-identifier": "App Store identity",
        "keychain-access-groups": "keychain sharing",
        "com.apple.application-identifier": "App Store identity",
        "com.apple.security.files.user-selected.read-only": "file picker access",
        "com.apple.security.files.user-selected.read-write": "file picker access",
        "com.apple.security.files.user-selected.executable": "file picker access",
        "com.apple.security.files.downloads.read-only": "Downloads folder access",
        "com.apple.security.files.downloads.read-write": "Downloads folder access",
        "com.apple.security.files.bookmarks.app-scope": "security-scoped bookmarks",
        "com.apple.security.files.bookmarks.document-scope": "security-scoped bookmarks",
        "com.apple.security.assets.pictures.read-only": "Pictures folder access",
        "com.apple.security.assets.pictures.read-write": "Pictures folder access",
        "com.apple.security.assets.music.read-only": "Music folder access",
        "com.apple.security.assets.music.read-write": "Music folder access",
        "com.apple.security.assets.movies.read-only": "Movies folder access",
        "com.apple.security.assets.movies.read-write": "Movies folder access",
        "com.apple.security.print": "printing",
        "com.apple.security.device.bluetooth": "Bluetooth",
        "com.apple.security.device.microphone": "microphone (use device.audio-input)",
        "com.apple.security.device.serial": "serial ports",
        "com.apple.security.cs.disable-library-validation": "macOS library validation",
        "com.apple.security.cs.allow-dyld-environment-variables": "macOS dyld variables",
        "com.apple.security.cs.disable-executable-page-protection": "macOS page protection",
        "com.apple.security.automation.apple-events": "Apple Events",
        "com.apple.security.scripting-targets": "Apple Events",
        "com.apple.security.inherit": "macOS sandbox inheritance",
        "com.apple.security.virtualization": "Virtualization.framework",
        "com.apple.security.hypervisor": "Hypervisor.framework",
        "com.apple.security.smartcard": "smart cards",
        "com.apple.security.network.client.mach-lookup": "Mach services",
    ]

    static let inertPrefixes: [(String, String)] = [
        ("com.apple.developer.", "Apple platform service"),
        (
            "com.apple.security.personal-information.",
            "personal information (contacts, calendars, location)"
        ),
        ("com.apple.security.temporary-exception.mach-", "Mach services"),
        ("com.apple.security.temporary-exception.apple-events", "Apple Events"),
        ("com.apple.security.temporary-exception.shared-preference.", "shared preferences"),
        ("com.apple.security.temporary-exception.sbpl", "macOS sandbox profile language"),
        ("com.apple.security.temporary-exception.iokit-", "IOKit"),
        (
            "com.apple.security.temporary-exception.files.home-relative-path.",
            "home-relative paths (there is no user home in appd)"
        ),
        ("com.apple.private.", "Apple-private"),
    ]

    public static func meaning(of key: String) -> EntitlementMeaning {
        if let (effect, type) = effects[key] { return .linux(effect: effect, type: type) }
        if let what = inert[key] { return .noLinuxEffect(what) }
        if let (_, what) = inertPrefixes.first(where: { key.hasPrefix($0.0) }) {
            return .noLinuxEffect(what)
        }
        return .unknown
    }
}

/// `$(NAME)` or `${NAME}`, as Xcode writes build settings before it expands them.
func containsBuildPlaceholder(_ text: String) -> Bool {
    text.contains("$(") || text.contains("${")
}
