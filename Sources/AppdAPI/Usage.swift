#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// `GET /v1/usage`: what each live instance uses now (`appctl top`). CPU is a running total:
/// two samples give a rate.
public struct APIUsage: Codable, Sendable, Equatable {
    public var sampledAt: Date
    public var instances: [APIInstanceUsage]

    public init(sampledAt: Date, instances: [APIInstanceUsage]) {
        self.sampledAt = sampledAt
        self.instances = instances
    }
}

public struct APIInstanceUsage: Codable, Sendable, Equatable {
    public var id: String
    public var app: String
    public var state: InstanceState
    public var startedAt: Date
    /// Bytes charged to its cgroup now (page cache included); nil without a memory controller.
    public var memoryBytes: Int64?
    /// CPU time of all its processes since it started; nil where the cgroup keeps none.
    public var cpuSeconds: Double?

    public init(
        id: String, app: String, state: InstanceState, startedAt: Date, memoryBytes: Int64?,
        cpuSeconds: Double?
    ) {
        self.id = id
        self.app = app
        self.state = state
        self.startedAt = startedAt
        self.memoryBytes = memoryBytes
        self.cpuSeconds = cpuSeconds
    }
}
