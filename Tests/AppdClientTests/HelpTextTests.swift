import ArgumentParser
import Testing

@testable import appctl
@testable import appd

/// Every command of `root`, with its path (`appctl launch`).
private func commands(_ root: ParsableCommand.Type, path: String) -> [(
    String, ParsableCommand.Type
)] {
    var found = [(path, root)]
    for sub in root.configuration.subcommands {
        found += commands(sub, path: path + " " + (sub.configuration.commandName ?? "\(sub)"))
    }
    return found
}

/// Where ArgumentParser starts the help of an option, argument or subcommand row: the name
/// column before it is padded with spaces up to here.
let helpColumn = 26

/// The lines of `help` with a run of three or more spaces inside their text: a `\` missing at the
/// end of a line of a `"""` discussion leaves the next line's indentation in the sentence.
/// A row of the OPTIONS, ARGUMENTS or SUBCOMMANDS table is allowed its padding up to `helpColumn`.
func linesWithSpaceRuns(_ help: String) -> [String] {
    help.split(separator: "\n", omittingEmptySubsequences: false).compactMap { line in
        var text = Substring(line)
        let characters = Array(line)
        if characters.count > helpColumn, characters[helpColumn] != " ",
            characters[helpColumn - 2] == " ", characters[helpColumn - 1] == " "
        {
            text = text.dropFirst(helpColumn)
        }
        return text.drop { $0 == " " }.contains("   ") ? String(line) : nil
    }
}

@Suite("--help text")
struct HelpTextTests {
    @Test("the check finds a run of spaces in a sentence, not the option column")
    func check() {
        #expect(
            linesWithSpaceRuns(
                "  --json                  Print JSON.\n  launch                  Launch."
            )
            .isEmpty)
        #expect(linesWithSpaceRuns("  <id>   The app.") == ["  <id>   The app."])
        #expect(
            linesWithSpaceRuns("  the active app (with the             active one") == [
                "  the active app (with the             active one"
            ])
    }

    @Test("no appctl or appd --help has a run of three spaces mid-line")
    func noSpaceRuns() {
        let all =
            commands(AppctlCommand.self, path: "appctl").map {
                ($0, AppctlCommand.self as ParsableCommand.Type, $1)
            }
            + commands(AppdCommand.self, path: "appd").map {
                ($0, AppdCommand.self as ParsableCommand.Type, $1)
            }
        #expect(all.count > 30)
        for (path, root, command) in all {
            for columns in [80, 200] {
                let help = root.helpMessage(for: command, includeHidden: true, columns: columns)
                let bad = linesWithSpaceRuns(help)
                #expect(bad.isEmpty, "\(path) --help (\(columns) columns): \(bad)")
            }
        }
    }
}
