import Foundation
import TestSupport
import Testing

/// `appd-oci features` and docs/oci-runtime.md's `features` row say the same: the hooks it
/// runs, its namespaces and cgroup drivers (issue 37: the two disagreed on hooks and systemd).
@Suite("appd-oci features agrees with docs/oci-runtime.md")
struct FeaturesDocTests {
    @Test(
        "every hook, namespace and cgroup driver the JSON claims is in the docs' row, and none it denies"
    )
    func agree() throws {
        let result = try ChildProcess("appd-oci", ["features"], stdout: .capture, stderr: .capture)
            .finish()
        #expect(result.code == 0, "\(result.stderr)")
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/oci-runtime.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        let row = try #require(
            text.split(separator: "\n").first { $0.hasPrefix("| `features` |") }.map(String.init))
        let hooks = json["hooks"] as? [String] ?? []
        #expect(!hooks.isEmpty)
        #expect(row.contains("hooks `\(hooks.joined(separator: " "))`"), "\(row)")
        let linux = json["linux"] as? [String: Any] ?? [:]
        let namespaces = linux["namespaces"] as? [String] ?? []
        #expect(row.contains("namespaces `\(namespaces.joined(separator: " "))`"), "\(row)")
        let cgroup = linux["cgroup"] as? [String: Bool] ?? [:]
        let drivers = ["v1", "v2", "systemd"].filter { cgroup[$0] == true }
        #expect(row.contains("cgroup `\(drivers.joined(separator: " "))`"), "\(row)")
        #expect(cgroup["systemdUser"] == false && row.contains("not `systemdUser`"))
        let capabilities = linux["capabilities"] as? [String] ?? ["?"]
        #expect(capabilities.isEmpty && row.contains("no capabilities"))
        let annotations = json["annotations"] as? [String: String] ?? [:]
        for key in annotations.keys { #expect(row.contains("`\(key)`"), "\(key)") }
    }
}
