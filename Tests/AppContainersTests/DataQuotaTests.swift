import Foundation
import Testing

@testable import AppContainers
@testable import AppdConfig

@Suite("[Sandbox] DataQuota= in appd.conf, and what the host can enforce")
struct DataQuotaTests {
    @Test("DataQuota is a size of at least 1M, or infinity; unset by default")
    func parse() throws {
        #expect(AppdConfiguration().sandbox.dataQuota == nil)
        #expect(
            try AppdConfiguration.parse("[Sandbox]\nDataQuota=16M\n", file: "t.conf").sandbox
                .dataQuota == 16 << 20)
        #expect(
            try AppdConfiguration.parse("[Sandbox]\nDataQuota=2G\n", file: "t.conf").sandbox
                .dataQuota == 2 << 30)
        #expect(
            try AppdConfiguration.parse("[Sandbox]\nDataQuota=infinity\n", file: "t.conf").sandbox
                .dataQuota == nil)
        for bad in ["512K", "lots", "-1M", "99999999999T"] {
            let error = failure {
                _ = try AppdConfiguration.parse("[Sandbox]\nDataQuota=\(bad)\n", file: "t.conf")
            }
            #expect(
                error?.message
                    == "t.conf:2: [Sandbox] DataQuota=\(bad) is not a size of at least 1M, or infinity"
            )
        }
    }

    @Test(
        "a directory that is no filesystem with project quotas is reported as not enforced, with the reason"
    )
    func support() {
        // /proc has no quotas on any host.
        guard case .notEnforced(let reason) = DataQuota.support(at: "/proc") else {
            Issue.record("/proc cannot enforce a quota")
            return
        }
        #expect(!reason.isEmpty)
        guard case .notEnforced(let missing) = DataQuota.support(at: "/nonexistent-appd-root")
        else {
            Issue.record("a missing directory cannot enforce a quota")
            return
        }
        #expect(missing.hasPrefix("cannot open /nonexistent-appd-root"))
    }
}
