import AppdAPI
import AppdBase

/// The instance routes of docs/api.md ("Routes"), one typed method each.
extension AppdClient {
    /// `GET /v1/instances`: the running instances, of one app with `app`, the exited ones too
    /// with `all`.
    public func instances(app: String? = nil, all: Bool = false) throws(AppdError)
        -> [APIInstance]
    {
        try get(Self.path("instances", query: ["app": app, "all": all ? "1" : nil]))
    }

    /// `GET /v1/instances/{iid}`.
    public func instance(_ id: String) throws(AppdError) -> APIInstance {
        try get(Self.path("instances", id))
    }

    /// `GET /v1/instances/{iid}/wait`: the instance once it has exited (a long poll).
    public func wait(_ id: String) throws(AppdError) -> APIInstance {
        try get(Self.path("instances", id, "wait"))
    }

    /// `POST /v1/instances/{iid}/terminate`: SIGTERM, then the cgroup killed after `grace`
    /// seconds (nil: the daemon's `TerminateGracePeriod`).
    public func terminate(_ id: String, grace: Double? = nil) throws(AppdError) -> APIInstance {
        try post(Self.path("instances", id, "terminate"), body: TerminateRequest(grace: grace))
    }

    /// `POST /v1/instances/{iid}/restart`: the new instance, once the old one has ended.
    public func restart(_ id: String, grace: Double? = nil) throws(AppdError) -> APIInstance {
        try post(Self.path("instances", id, "restart"), body: TerminateRequest(grace: grace))
    }

    /// `POST /v1/instances/{iid}/kill`.
    public func kill(_ id: String) throws(AppdError) -> APIInstance {
        try post(Self.path("instances", id, "kill"))
    }

    /// `POST /v1/instances/{iid}/suspend`.
    public func suspend(_ id: String) throws(AppdError) -> APIInstance {
        try post(Self.path("instances", id, "suspend"))
    }

    /// `POST /v1/instances/{iid}/resume`.
    public func resume(_ id: String) throws(AppdError) -> APIInstance {
        try post(Self.path("instances", id, "resume"))
    }

    /// `POST /v1/instances/{iid}/activate`.
    public func activate(_ id: String) throws(AppdError) -> APIInstance {
        try post(Self.path("instances", id, "activate"))
    }

    /// `POST /v1/instances/{iid}/background`.
    public func background(_ id: String) throws(AppdError) -> APIInstance {
        try post(Self.path("instances", id, "background"))
    }

    /// What `GET /v1/instances/{iid}/logs` sends besides the instance (docs/api.md).
    public struct LogOptions: Sendable, Equatable {
        /// Keep the stream open until the instance exits.
        public var follow = false
        /// Only the last N lines first.
        public var tail: Int?
        /// Only the lines read at or after this time (RFC 3339, or seconds since the epoch).
        public var since: String?
        /// Each line prefixed by the time the relay read it.
        public var timestamps = false

        public init(
            follow: Bool = false, tail: Int? = nil, since: String? = nil, timestamps: Bool = false
        ) {
            self.follow = follow
            self.tail = tail
            self.since = since
            self.timestamps = timestamps
        }
    }

    /// `GET /v1/instances/{iid}/logs`: the instance's output, handed to `onData` as it comes.
    public func logs(
        _ id: String, _ options: LogOptions = LogOptions(),
        onData: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        try stream(
            Self.path(
                "instances", id, "logs",
                query: [
                    "follow": options.follow ? "1" : nil, "tail": options.tail.map(String.init),
                    "since": options.since, "timestamps": options.timestamps ? "1" : nil,
                ]),
            onData: onData)
    }
}
