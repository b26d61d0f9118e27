/// `POST /v1/reload` (and `appd reload`, SIGHUP, `systemctl reload appd`): appd.conf read
/// again and put in force for everything that starts after it; running apps are not touched.
public struct APIReloadResult: Codable, Sendable, Equatable {
    /// The file that was read; nil when appd runs on built-in defaults (no file).
    public var config: String?
    /// The sections whose settings changed (`[Signer vendor]`, `[Sandbox]` ...), in file order
    /// of the known sections; empty when the file says what was already in force.
    public var changed: [String]
    /// Keys that changed in the file but take effect only when appd restarts (the socket, the
    /// cgroup parent ...): their old values stay in force until then.
    public var restartRequired: [String]
    /// What a changed `[App ID]` section changed at once on running instances and data
    /// containers (`com.example.notes 3f2a…: memory 67108864`); absent from older daemons.
    public var applied: [String]?

    public init(
        config: String?, changed: [String], restartRequired: [String], applied: [String]? = nil
    ) {
        self.config = config
        self.changed = changed
        self.restartRequired = restartRequired
        self.applied = applied
    }
}
