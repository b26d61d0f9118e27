/// `[OCI]`: what appd-oci, the OCI runtime, may do on the node beyond the sandbox
/// (docs/oci-runtime.md, "Hooks").
public struct OCISettings: Sendable, Equatable {
    /// `Hooks=`: the executables a container's config may name as hooks (runtime-spec
    /// "Lifecycle"), which appd-oci runs as the host's root, outside any sandbox: absolute
    /// paths, space-separated, compared with the hook's path once both are resolved. By default
    /// docker's daemon, whose `libnetwork-setkey` prestart hook docker adds to every container
    /// (it sets up the container's network); `Hooks=` empty: a config with any hook is refused.
    public var hooks: [String] = OCISettings.defaultHooks

    public static let defaultHooks = ["/usr/sbin/dockerd", "/usr/bin/dockerd"]

    public init() {}

    public static let keys = ["Hooks"]
    /// More would be a list nobody reviews.
    public static let maximumHooks = 32
}
