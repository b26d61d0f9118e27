import Foundation

// The sample app for appd. It shows what an installed app sees: its bundle (resources and
// Info.plist through Bundle.main) and its containers (HOME is the data container, TMPDIR is
// $HOME/tmp/). Nothing here knows about appd; the same code runs unchanged on iOS.

func warn(_ message: String) {
    FileHandle.standardError.write(Data("Hello: \(message)\n".utf8))
}

func fail(_ message: String) -> Never {
    warn(message)
    exit(1)
}

guard let greetingPath = Bundle.main.path(forResource: "greeting", ofType: "txt") else {
    fail("greeting.txt is missing from the bundle at \(Bundle.main.bundlePath)")
}
guard let greeting = try? String(contentsOfFile: greetingPath, encoding: .utf8) else {
    fail("cannot read \(greetingPath)")
}
print(greeting.trimmingCharacters(in: .whitespacesAndNewlines))

let info = Bundle.main.infoDictionary ?? [:]
let environment = ProcessInfo.processInfo.environment
let version = info["CFBundleShortVersionString"] as? String ?? "?"
let build = info["CFBundleVersion"] as? String ?? "?"
print("bundle id: \(info["CFBundleIdentifier"] as? String ?? "(none)")")
print("version:   \(version) (\(build))")
print("bundle:    \(Bundle.main.bundlePath)")
print("HOME:      \(environment["HOME"] ?? "(unset)")")
print("TMPDIR:    \(environment["TMPDIR"] ?? "(unset)")")
print("arguments: \(Array(CommandLine.arguments.dropFirst()))")

// Documents/ lives in the data container, which survives upgrades: the launch count shows it.
if let home = environment["HOME"], FileManager.default.isWritableFile(atPath: home) {
    let documents = URL(fileURLWithPath: home).appendingPathComponent("Documents")
    let counter = documents.appendingPathComponent("launches.txt")
    do {
        try FileManager.default.createDirectory(at: documents, withIntermediateDirectories: true)
        let text = (try? String(contentsOf: counter, encoding: .utf8)) ?? ""
        let previous = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        try "\(previous + 1)\n".write(to: counter, atomically: true, encoding: .utf8)
        print("launches:  \(previous + 1) (\(counter.path))")
    } catch {
        // Not fatal: the sandbox may deny the write, and that is worth seeing, not crashing on.
        warn("cannot update \(counter.path): \(error)")
    }
}

// Preferences persist in the data container (Library/Preferences) across launches.
let defaults = UserDefaults.standard
let opened = defaults.integer(forKey: "timesOpened") + 1
defaults.set(opened, forKey: "timesOpened")
defaults.synchronize()
print("defaults:  timesOpened = \(opened)")

// Child processes work inside the sandbox (fork/exec, pipes, Foundation's run loop): a host
// program the signed Info.plist names (AppdHostExecutables); no other is executable here.
let child = Process()
child.executableURL = URL(fileURLWithPath: "/usr/bin/id")
child.arguments = ["-u"]
let pipe = Pipe()
child.standardOutput = pipe
do {
    try child.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    child.waitUntilExit()
    print(
        "process:   child says hi from \(String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) (status \(child.terminationStatus))"
    )
} catch {
    warn("cannot run /usr/bin/id: \(error)")
}
