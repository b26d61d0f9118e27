/// `[OCI]`: what appd-oci, the OCI runtime, may do on the node beyond the sandbox
/// (docs/oci-runtime.md, "Hooks").
public struct OCISettings: Sendable, Equatable {
    /// `Hooks=`: the hooks a container's config may name (runtime-spec "Lifecycle"), which
    /// appd-oci runs as the host's root, outside any sandbox: entries `PATH[:ARGV0[:NAMES]]`,
    /// space-separated (`HookRule`). By default docker's daemon as its `libnetwork-setkey`
    /// prestart hook, which docker adds to every container (it sets up the container's
    /// network); `Hooks=` empty: a config with any hook is refused.
    public var hooks: [HookRule] = OCISettings.defaultHooks

    public static let defaultHooks = ["/usr/sbin/dockerd", "/usr/bin/dockerd"].map {
        HookRule(
            path: $0, argv0: "libnetwork-setkey", environment: ["TRACEPARENT", "TRACESTATE"])
    }

    /// `MemoryMax=`, `TasksMax=`: the node's ceiling on a container's memory and pids limits.
    /// nil (the default): none, the engine's limits are applied as set. A config or `update`
    /// asking more is refused naming the key; a container the engine gives no limit gets the
    /// sandbox's default, capped by the ceiling.
    public var memoryMax: Int64?
    public var tasksMax: Int?

    public init() {}

    /// More would be a list nobody reviews.
    public static let maximumHooks = 32
}

/// One `[OCI] Hooks=` entry: which executable may be a hook, how it may be called, and which
/// environment it may be given. `PATH` alone: the hook's `args[0]` is its path (or absent) and
/// its `env` empty; `PATH:ARGV0`: `args[0]` must be ARGV0 (docker's daemon runs its network setup
/// only as `libnetwork-setkey`; `*` takes any arguments); `PATH:ARGV0:NAME,NAME`: the variables
/// it may be given (an empty ARGV0 is the path). The rest of a hook's arguments are its own
/// (bounded); a variable not listed is refused at `create`, and the dynamic loader's and glibc's
/// (`LD_*`, `GCONV_PATH`, `GLIBC_TUNABLES`, ...), which would load code the config chose into a
/// root process, can never be listed.
public struct HookRule: Sendable, Equatable, CustomStringConvertible {
    public var path: String
    /// nil: the hook's own path (or no `args`); `*`: any.
    public var argv0: String?
    public var environment: [String]

    public init(path: String, argv0: String? = nil, environment: [String] = []) {
        self.path = path
        self.argv0 = argv0
        self.environment = environment
    }

    /// glibc's "unsecure" variables (those it drops for setuid programs) and the loader's.
    public static func isLoaderVariable(_ name: String) -> Bool {
        name.hasPrefix("LD_") || name.hasPrefix("MALLOC_")
            || [
                "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN",
                "LOCPATH", "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TMPDIR",
                "TZDIR",
            ].contains(name)
    }

    /// `PATH[:ARGV0[:NAME,NAME]]`, nil when malformed.
    public init?(parsing entry: String) {
        let parts = entry.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard (1...3).contains(parts.count), parts[0].hasPrefix("/") else { return nil }
        path = parts[0]
        argv0 = parts.count > 1 && !parts[1].isEmpty ? parts[1] : nil
        environment = parts.count > 2 ? parts[2].split(separator: ",").map(String.init) : []
        let nameOK = { (name: String) -> Bool in
            guard let first = name.utf8.first,
                !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first)
            else { return false }
            return name.utf8.allSatisfy { byte in
                byte == UInt8(ascii: "_") || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
            }
        }
        guard environment.allSatisfy({ nameOK($0) && !Self.isLoaderVariable($0) }) else {
            return nil
        }
    }

    public var description: String {
        var text = path
        if argv0 != nil || !environment.isEmpty { text += ":" + (argv0 ?? "") }
        if !environment.isEmpty { text += ":" + environment.joined(separator: ",") }
        return text
    }
}
