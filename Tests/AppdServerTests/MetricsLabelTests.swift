import AppdBase
import Foundation
import Testing

@testable import AppdServer

/// The per-app series of `GET /v1/metrics` are keyed by `AppID` (the daemon test `MetricsTests`
/// reads them from a real daemon).
@Suite("metrics per app: one series per installed app, whatever the case its sources use")
struct MetricsLabelTests {
    @Test(
        "CPU and denials counted under other spellings land on the installed app, labelled as the registry spells it"
    )
    func installedSpelling() async {
        let metrics = DaemonMetrics()
        metrics.denials.withLock {
            $0 = { ["COM.EXAMPLE.NOTES": 3, "com.example.gone": 5, "com.example.\u{212A}ey": 7] }
        }
        let text = String(
            decoding: await metrics.render(
                usage: [], installed: ["com.Example.Notes", "com.example.key"],
                endedCPU: ["com.example.notes": 1.5]),
            as: UTF8.self)
        let lines = text.split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(lines.contains(#"appd_app_cpu_seconds_total{app="com.Example.Notes"} 1.5"#))
        #expect(lines.contains(#"appd_denials_total{app="com.Example.Notes"} 3"#))
        // Not installed: no series. The Kelvin sign is not a K: not com.example.key's.
        #expect(!text.contains("com.example.gone"))
        #expect(!text.contains(#"appd_denials_total{app="com.example.key"}"#))
        #expect(!text.contains("NOTES") && !text.contains("com.example.notes"))
    }
}
