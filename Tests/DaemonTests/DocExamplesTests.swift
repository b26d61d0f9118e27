import Foundation
import Testing

/// The examples the README and the man pages print, run as printed against a real `appd serve`,
/// so a renamed flag or a changed message breaks the build, not the reader (issue 23).
///
/// What is run: every `$ ` line of the README's ```` ```console ```` blocks, and every line of the
/// man pages' EXAMPLES sections, through `/bin/sh` in a folder holding the Notes sample as
/// `Notes.app` (unsigned, as a developer has it). The host's paths are the daemon's:
/// `/etc/appd/appd.conf` is the test daemon's config and `APPD_ROOT`/`APPD_CONFIG` point at it, as
/// an admin's shell on a host points at `/var/lib/appd` and `/etc/appd/appd.conf`.
///
/// What is checked: each command exits 0, unless the output printed under it starts with
/// `appd:` or `appctl:` (a refusal the page shows), then it must fail; an example that reaches
/// another machine (`ssh://`) must at least parse (no usage error, exit 64). Each printed output
/// line's words that cannot vary between runs (those without a digit; a line with `…` is elided
/// output and not compared) must appear, in order, in one line of what the command printed.
/// Commands that follow (`-f`, `--console`, `top` without `--once`) run at most 20 s.
@Suite("the examples the README and the man pages print", .serialized, rootOnly)
struct DocExamplesTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    @Test(
        "the README's tour and examples run against a real daemon and print what the README shows")
    func readme() throws {
        let examples = try Self.consoleExamples(
            String(contentsOfFile: "\(Self.repository)/README.md", encoding: .utf8))
        #expect(examples.count >= 15, "the README's console blocks hold \(examples.count) commands")
        let session = try ExampleSession(trustingNewKeys: false)
        for example in examples { session.check(example, source: "README.md") }
    }

    @Test("appd(8)'s examples run against a real daemon")
    func appdManPage() throws {
        let examples = try Self.manPageExamples("\(Self.repository)/docs/man/appd.8")
        #expect(examples.count >= 5)
        let session = try ExampleSession()
        for example in examples { session.check(example, source: "appd.8") }
    }

    @Test("appctl(1)'s examples run against a real daemon that has Notes installed")
    func appctlManPage() throws {
        let examples = try Self.manPageExamples("\(Self.repository)/docs/man/appctl.1")
        #expect(examples.count >= 5)
        let session = try ExampleSession()
        try session.daemon.installSample("Notes")
        for example in examples { session.check(example, source: "appctl.1") }
    }

    @Test("the example checker fails a renamed flag, a changed message and a missing line")
    func checkerCatchesDrift() throws {
        let session = try ExampleSession()
        let drifted = [
            Example(command: "appctl ps --every", expected: []),
            Example(
                command: "appctl version", expected: ["appd is running somewhere else entirely"]),
            Example(command: "appd list", expected: ["No such listing"]),
        ]
        for example in drifted {
            #expect(session.problem(example) != nil, "\(example.command) passed the checker")
        }
        #expect(session.problem(Example(command: "appctl version", expected: [])) == nil)
    }

    // MARK: - Reading the examples

    struct Example {
        var command: String
        var expected: [String]
    }

    /// The `$ ` lines of every ```` ```console ```` block, each with the lines printed under it.
    static func consoleExamples(_ markdown: String) -> [Example] {
        var examples: [Example] = []
        var inBlock = false
        var pending: String?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false).map(
            String.init)
        {
            if line.hasPrefix("```") {
                inBlock = !inBlock && line == "```console"
                continue
            }
            guard inBlock else { continue }
            if let open = pending {
                pending = line.hasSuffix("\\") ? open + String(line.dropLast()) : nil
                if pending == nil { examples.append(Example(command: open + line, expected: [])) }
            } else if line.hasPrefix("$ ") {
                let command = String(line.dropFirst(2))
                if command.hasSuffix("\\") {
                    pending = String(command.dropLast())
                } else {
                    examples.append(Example(command: command, expected: []))
                }
            } else if !line.isEmpty, !examples.isEmpty {
                examples[examples.count - 1].expected.append(line)
            }
        }
        return examples
    }

    /// The lines of a man page's EXAMPLES section (between `.nf` and `.fi`), unescaped.
    static func manPageExamples(_ path: String) throws -> [Example] {
        let page = try String(contentsOfFile: path, encoding: .utf8)
        var inSection = false
        var examples: [Example] = []
        for line in page.split(separator: "\n").map(String.init) {
            if line.hasPrefix(".SH") {
                inSection = line == ".SH EXAMPLES"
                continue
            }
            guard inSection, !line.hasPrefix("."), !line.isEmpty else { continue }
            let command = line.replacingOccurrences(of: "\\-", with: "-").replacingOccurrences(
                of: "\\(aq", with: "'"
            )
            .replacingOccurrences(of: "\\e", with: "\\")
            examples.append(Example(command: command, expected: []))
        }
        return examples
    }
}

/// A real daemon, a folder holding the unsigned Notes sample, and the environment an admin's
/// shell has, for running documented commands.
final class ExampleSession {
    let daemon: TestDaemon
    let folder: String
    let binaries = URL(fileURLWithPath: builtExecutable("appd")).deletingLastPathComponent().path

    /// Whether a key `appd keygen --name NAME` makes is trusted by the session (the man pages
    /// show no appd.conf edit) or left to the examples to trust (the README's tour does it).
    let trustsNewKeys: Bool

    init(trustingNewKeys: Bool = true) throws {
        trustsNewKeys = trustingNewKeys
        daemon = try TestDaemon()
        folder = "\(daemon.directory)/work"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try daemon.assembleSample("Notes", into: "\(folder)/Notes.app")
    }

    var environment: [String: String] {
        [
            "PATH": "\(binaries):/usr/bin:/bin", "HOME": folder, "APPD_ROOT": daemon.root,
            "APPD_CONFIG": daemon.configPath, "LANG": "C.UTF-8",
        ]
    }

    /// Records an issue naming the page and the command when `example` does not run as printed.
    func check(_ example: DocExamplesTests.Example, source: String) {
        if let problem = problem(example) {
            Issue.record("\(source): $ \(example.command)\n\(problem)")
        }
    }

    /// Why `example` does not run as printed, or nil when it does. A command that only reads
    /// what the daemon knows (`appctl ps`, `logs`, `top`, `denials`) is run again for up to 15 s
    /// while its output does not yet show what the page prints: the page shows the app after it
    /// has printed, the test may ask a moment before.
    func problem(_ example: DocExamplesTests.Example) -> String? {
        let command = hostPaths(example.command)
        if command.contains("Notes.ipa"),
            !FileManager.default.fileExists(atPath: "\(folder)/Notes.ipa")
        {
            do { try makeIPA(from: "\(folder)/Notes.app", to: "\(folder)/Notes.ipa") } catch {
                return "making Notes.ipa: \(error)"
            }
        }
        let follows =
            command.contains(" -f ") || command.contains("--console")
            || (command.contains("appctl top") && !command.contains("--once"))
        let reads =
            !follows
            && ["appctl ps", "appctl logs", "appctl top", "appctl denials"].contains {
                command.hasPrefix($0)
            }
        let deadline = Date().addingTimeInterval(15)
        while true {
            let problem = runOnce(
                command, expected: example.expected.map(hostPaths), follows: follows)
            guard let problem, reads, Date() < deadline else {
                if problem == nil, trustsNewKeys, let signer = Self.keygenName(command) {
                    return addSigner(signer)
                }
                return problem
            }
            usleep(200_000)
        }
    }

    /// The page's host paths as this daemon's.
    private func hostPaths(_ text: String) -> String {
        text.replacingOccurrences(of: "/etc/appd/appd.conf", with: daemon.configPath)
            .replacingOccurrences(of: "/run/appd/appd.sock", with: daemon.socket)
    }

    private func runOnce(_ command: String, expected: [String], follows: Bool) -> String? {
        let result: (code: Int32, output: String)
        do {
            result = try runTool(
                "/usr/bin/timeout",
                [
                    "-k", "2", follows ? "20" : "60", "/bin/sh", "-c",
                    "cd \"$0\" && \(command) 2>&1", folder,
                ],
                environment: environment)
        } catch {
            return "could not run it: \(error)"
        }
        let shown = "exit \(result.code), printed:\n\(result.output)"
        if result.code == 64 || result.output.contains("Usage: ") {
            return "a usage error: \(shown)"
        }
        if command.contains("ssh://") {
            // Another machine: only the command line itself can be checked here (RemoteTests runs
            // --host against a private sshd).
        } else if expected.first.map({ $0.hasPrefix("appd:") || $0.hasPrefix("appctl:") }) ?? false
        {
            if result.code == 0 { return "the page shows a refusal, but it succeeded: \(shown)" }
        } else if result.code != 0, !(follows && result.code == 124) {
            return "it failed: \(shown)"
        }
        let lines = result.output.split(separator: "\n").map(String.init)
        for line in expected where !line.contains("…") {
            let words = Self.stableWords(line)
            guard !words.isEmpty else { continue }
            if !lines.contains(where: { Self.contains($0, inOrder: words) }) {
                return "the page prints \"\(line)\", but it printed no line with \(words): \(shown)"
            }
        }
        return nil
    }

    /// The words of a printed line that do not vary between runs: those without a digit.
    static func stableWords(_ line: String) -> [String] {
        line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            .filter { !$0.contains(where: \.isNumber) }
    }

    static func contains(_ line: String, inOrder words: [String]) -> Bool {
        var rest = line[...]
        for word in words {
            guard let range = rest.range(of: word) else { return false }
            rest = rest[range.upperBound...]
        }
        return true
    }

    /// `appd keygen --name NAME` makes a key no signer trusts yet; the pages then trust it as an
    /// admin would (a `[Signer NAME]` section and a reload) when `trustsNewKeys`.
    static func keygenName(_ command: String) -> String? {
        let words = command.split(separator: " ").map(String.init)
        guard words.starts(with: ["appd", "keygen"]), let at = words.firstIndex(of: "--name"),
            at + 1 < words.count
        else { return nil }
        return words[at + 1]
    }

    private func addSigner(_ name: String) -> String? {
        do {
            let config = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
            try
                (config
                + "\n[Signer \(name)]\nKey=\(folder)/\(name).public-key\nBundleIDs=com.example.*\nEntitlements=*\n")
                .write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
            let reload = try runTool("appd", ["reload"], environment: environment)
            return reload.code == 0 ? nil : "appd reload after trusting \(name): \(reload.output)"
        } catch {
            return "trusting \(name): \(error)"
        }
    }
}
