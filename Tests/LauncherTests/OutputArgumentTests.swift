import Foundation
import Testing

/// The output relay's arguments (docs/launcher-protocol.md, docs/app-output.md): incomplete or
/// malformed ones are refused before anything runs, each with a line naming the problem.
@Suite("appd-exec: the output relay's arguments")
struct OutputArgumentTests {
    func expectRefused(
        _ extra: String, mentioning text: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        try expectArgumentsRefused(extra, mentioning: text, sourceLocation: sourceLocation)
    }

    @Test("--output-fd without the log folder, name and bound is refused")
    func incomplete() throws {
        try expectRefused(
            "--output-fd 6 6</dev/null",
            mentioning: "--output-fd needs --log-dir-fd, --log-name and --log-max-bytes")
        try expectRefused(
            "--output-fd 6 --log-dir-fd 7 --log-name x.log 6</dev/null 7</tmp",
            mentioning: "--output-fd needs --log-dir-fd, --log-name and --log-max-bytes")
    }

    @Test("log and journal options without --output-fd are refused")
    func withoutOutput() throws {
        try expectRefused(
            "--log-dir-fd 7 7</tmp", mentioning: "the log and journal options need --output-fd")
        try expectRefused(
            "--journal-field APPD_APP=x", mentioning: "the log and journal options need --output-fd"
        )
    }

    @Test("a log name with a slash, a bound of 0 and a bad journal field are refused, each by name")
    func malformed() throws {
        let base = "--output-fd 6 --log-dir-fd 7 6</dev/null 7</tmp"
        try expectRefused(
            "--log-name ../x --log-max-bytes 10 " + base,
            mentioning: "--log-name '../x' must be a file name without '/'")
        try expectRefused(
            "--log-name x.log --log-max-bytes 0 " + base,
            mentioning: "--log-max-bytes '0' must be 1 to 2147483647")
        try expectRefused(
            "--log-name x.log --log-max-bytes 10 --journal-field app=x " + base,
            mentioning: "--journal-field 'app=x' must be KEY=VALUE")
        try expectRefused(
            "--log-name x.log --log-max-bytes 10 --journal-field _PID=1 " + base,
            mentioning: "--journal-field '_PID=1' must be KEY=VALUE")
        try expectRefused(
            "--output-fd 6 --output-fd 6 6</dev/null", mentioning: "--output-fd given twice")
        try expectRefused("--output-fd 9 ", mentioning: "fd 9 is not open")
    }
}
