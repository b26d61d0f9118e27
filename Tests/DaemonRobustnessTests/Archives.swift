import Foundation
import TestSupport

/// The probe app (Examples/Probe, built next to the tests) as `appd install` streams a bundle:
/// the bundle folder's contents. `probe sleep N` runs for N seconds, printing nothing.
func probeBundleArchive(id: String = "com.example.probe") throws -> [UInt8] {
    let executable = try Data(contentsOf: URL(fileURLWithPath: builtExecutable("Probe")))
    let info = plist([
        ("CFBundleIdentifier", "<string>\(id)</string>"),
        ("CFBundleExecutable", "<string>Probe</string>"),
        ("CFBundleName", "<string>Probe</string>"),
        ("CFBundleVersion", "<string>1</string>"),
        ("CFBundlePackageType", "<string>APPL</string>"),
    ])
    let entitlements = plist([("com.apple.security.app-sandbox", "<true/>")])
    return tarArchive([
        .directory("./"),
        .file("./Info.plist", info),
        .file("./Entitlements.plist", entitlements),
        .file("./Probe", Array(executable), mode: "0000755"),
    ])
}

private func plist(_ entries: [(String, String)]) -> String {
    """
    <?xml version="1.0" encoding="UTF-8"?>
    <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
    <plist version="1.0"><dict>
    \(entries.map { "<key>\($0.0)</key>\($0.1)" }.joined(separator: "\n"))
    </dict></plist>
    """
}
