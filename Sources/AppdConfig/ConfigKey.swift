/// One key of appd.conf, declared once in `ConfigKey.all`: its section, its name, the kind of
/// value it takes, where that value lands, whether an `[App ID]` section (and so `appd
/// override`) may set it, and its line in appd.conf(5). The parser, the lists of known keys in
/// errors, the override editing and the checks of the man page and the shipped sample all read
/// this table; nothing else lists keys.
public struct ConfigKey: Sendable {
    public enum Section: String, Sendable, CaseIterable {
        case bundle = "Bundle"
        case users = "Users"
        case sandbox = "Sandbox"
        case api = "API"
        case supervisor = "Supervisor"
        case lifecycle = "Lifecycle"
        case storage = "Storage"
        case oci = "OCI"
        case signing = "Signing"
        /// `[Signer NAME]`, one per trusted key.
        case signer = "Signer"
        /// `[Handlers]`: the admin's choice of the app that opens a scheme or a type.
        case handlers = "Handlers"
        /// `[App ID]`: keys only an app's section has (the `[Sandbox]` keys it may set are
        /// declared in `[Sandbox]`, with `app` set).
        case app = "App"
    }

    public let section: Section
    public let name: String
    /// What appd.conf(5) says of it, in one line.
    public let summary: String
    /// Sets it in the host's settings; nil for a key only `[App ID]` has.
    let host:
        (@Sendable (inout AppdConfiguration, String, ConfigPlace) throws(ConfigProblem) -> Void)?
    /// How an `[App ID]` section holds it; nil when only the host's section may set it.
    let app: AppRule?

    /// Whether `[App ID]` and `appd override` may set it.
    public var appSettable: Bool { app != nil }

    /// How one `[App ID]` section keeps a key: set from text, unset (the host's value applies
    /// again), and the text `appd override` writes back (nil: not set).
    struct AppRule: Sendable {
        let set: @Sendable (inout AppOverride, String) throws(ConfigProblem) -> Void
        let unset: @Sendable (inout AppOverride) -> Void
        let written: @Sendable (AppOverride) -> String?
    }
}

/// Where a line was read: what a value needs beyond its text (a signer's `Key=` is read
/// relative to the file's folder) and what an error names.
struct ConfigPlace {
    var file: String
    /// The section as written: `Signer example`, `App com.example.notes`.
    var section: String
}

extension ConfigKey {
    /// A key of the host's settings (`path`), of a section other than `[Signer]` and `[App]`.
    /// `app`: an `[App ID]` section may set it too, for its app; the section keeps the text,
    /// checked here, and applies it over the host's settings (`AppOverride.applied(to:)`).
    static func key<Value>(
        _ section: Section, _ name: String, _ value: ConfigValue<Value>,
        _ path: WritableKeyPath<AppdConfiguration, Value> & Sendable, app: Bool = false,
        _ summary: String
    ) -> ConfigKey {
        ConfigKey(
            section: section, name: name, summary: summary,
            host: { (config, text, _) throws(ConfigProblem) in
                config[keyPath: path] = try value.read(text)
            },
            app: app
                ? AppRule(
                    set: { (override, text) throws(ConfigProblem) in
                        _ = try value.read(text)
                        override.sandbox.removeAll { $0.key == name }
                        override.sandbox.append((name, text))
                    },
                    unset: { $0.sandbox.removeAll { $0.key == name } },
                    written: { $0.sandbox.last { $0.key == name }?.value })
                : nil)
    }

    /// A key of the `[Signer NAME]` section being read.
    static func signer<Value>(
        _ name: String, _ value: ConfigValue<Value>,
        _ path: WritableKeyPath<SigningPolicy.Signer, Value> & Sendable, _ summary: String
    ) -> ConfigKey {
        ConfigKey(
            section: .signer, name: name, summary: summary,
            host: { (config, text, _) throws(ConfigProblem) in
                let read = try value.read(text)
                config.signing.signers[config.signing.signers.count - 1][keyPath: path] = read
            },
            app: nil)
    }

    /// A key only `[App ID]` has; `written` gives its text, nil for the default (not written).
    static func app<Value>(
        _ name: String, _ value: ConfigValue<Value>,
        _ path: WritableKeyPath<AppOverride, Value> & Sendable,
        written: @escaping @Sendable (Value) -> String?, _ summary: String
    ) -> ConfigKey {
        ConfigKey(
            section: .app, name: name, summary: summary, host: nil,
            app: AppRule(
                set: { (override, text) throws(ConfigProblem) in
                    override[keyPath: path] = try value.read(text)
                },
                unset: { $0[keyPath: path] = AppOverride()[keyPath: path] },
                written: { written($0[keyPath: path]) }))
    }
}

extension ConfigKey {
    /// The keys of `section` as its header may hold them (`[App ID]`: every key an app's
    /// section may set, in the order `appd override` writes them).
    public static func keys(of section: Section) -> [ConfigKey] {
        section == .app
            ? all.filter(\.appSettable) : all.filter { $0.section == section && $0.host != nil }
    }

    /// The key `name` of `section`, if it is one.
    static func find(_ name: String, in section: Section) -> ConfigKey? {
        index[section]?[name]
    }

    private static let index: [Section: [String: ConfigKey]] = Dictionary(
        uniqueKeysWithValues: Section.allCases.map { section in
            (
                section,
                Dictionary(keys(of: section).map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
            )
        })

    /// What an unknown key's error suggests: the key it was probably meant to be, then every
    /// key of the section.
    static func hint(unknown name: String, in section: Section) -> String {
        let keys = keys(of: section)
        let known = "known keys: " + keys.map(\.name).joined(separator: ", ")
        guard let near = keys.min(by: { distance($0.name, name) < distance($1.name, name) }),
            distance(near.name, name) <= max(2, name.count / 4)
        else { return known }
        return "did you mean \(near.name)= (\(near.summary))? \(known)"
    }

    /// Edits (insert, delete, replace) from `a` to `b`, ignoring case.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a.lowercased().utf8)
        let b = Array(b.lowercased().utf8)
        guard !a.isEmpty, !b.isEmpty else { return max(a.count, b.count) }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(
                    previous[j] + 1, current[j - 1] + 1,
                    previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
