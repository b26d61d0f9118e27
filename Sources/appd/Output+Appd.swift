import AppContainers
import AppdAPI
import AppdBase
import AppdCLI
import Foundation
import PrintableText

extension Output {
    /// `--no-daemon`: what recovery could not remove and moved aside (the daemon logs it).
    static func warnQuarantined(_ report: RecoveryReport) {
        for entry in report.quarantined {
            FileHandle.standardError.write(
                Data(
                    "appd: WARNING: could not remove \(entry.origin); quarantined as \(entry.path): \(entry.reason.printable) (fix the cause, then 'appd doctor --repair')\n"
                        .utf8))
        }
    }
}
