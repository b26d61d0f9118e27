import Foundation
import Testing

/// Shell completion as bash runs it: the script `--generate-completion-script bash` prints,
/// sourced, its function called with the words typed so far.
@Suite("shell completion of installed app ids, as bash runs it", .serialized, rootOnly)
struct AppIDCompletionTests {
    static let idCommands = ["info", "profile", "uninstall", "run", "override"]

    /// What bash offers after `tool words...` (the last word is the one being completed).
    static func complete(_ tool: String, _ words: [String], root: String) throws -> [String] {
        let quoted = ([tool] + words).map { "'\($0)'" }.joined(separator: " ")
        let script = """
            source <(\(tool) --generate-completion-script bash)
            COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count)
            COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
            _\(tool)
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        let directory = (builtExecutable(tool) as NSString).deletingLastPathComponent
        let result = try runTool(
            "/bin/bash", ["-c", script],
            environment: ["PATH": "\(directory):/usr/bin:/bin", "APPD_ROOT": root])
        #expect(result.code == 0, "\(result.output)")
        return result.output.split(separator: "\n").map(String.init).filter { !$0.isEmpty }
    }

    @Test(
        "every appd subcommand that takes an id, and appctl's, complete installed ids; with the daemon stopped appd still does, from the registry"
    )
    func installedIDs() throws {
        let daemon = try TestDaemon()
        try daemon.installProbe("com.example.alpha")
        try daemon.installProbe("com.example.beta")
        for command in Self.idCommands {
            #expect(
                try Self.complete("appd", [command, "com.example.a"], root: daemon.root) == [
                    "com.example.alpha"
                ],
                "appd \(command)")
            #expect(
                try Self.complete("appd", [command, "com.ex"], root: daemon.root).sorted()
                    == ["com.example.alpha", "com.example.beta"], "appd \(command)")
        }
        for command in ["info", "launch", "terminate"] {
            #expect(
                try Self.complete("appctl", [command, "com.example.b"], root: daemon.root)
                    .contains("com.example.beta"), "appctl \(command)")
        }
        daemon.stop()
        #expect(
            try Self.complete("appd", ["override", "com.example.b"], root: daemon.root) == [
                "com.example.beta"
            ])
        #expect(try Self.complete("appctl", ["info", "com.example.b"], root: daemon.root).isEmpty)
    }

    @Test("a mistyped subcommand gets a 'did you mean', exit 64")
    func didYouMean() throws {
        let result = try runTool("appd", ["overide", "com.example.x"])
        #expect(
            result.code == 64 && result.output.contains("Did you mean 'override'?"),
            "\(result.output)")
        let profile = try runTool("appd", ["proflie", "com.example.x"])
        #expect(
            profile.code == 64 && profile.output.contains("Did you mean 'profile'?"),
            "\(profile.output)")
    }
}
