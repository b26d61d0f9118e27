import AppdAPI
import AppdBase
import PrintableText

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// How appd and appctl print: text for people on stdout, JSON with `--json`, errors on stderr
/// (or as a JSON `{"error": ...}` object on stdout with `--json`, so scripts read one stream).
public enum Output {
    /// The name errors start with (`appd: ...`, `appctl: ...`); set once at the top of `main`.
    nonisolated(unsafe) public static var program = "appd"

    public static func json(_ value: some Encodable) {
        do {
            var data = try APICoding.encoder(pretty: true).encode(value)
            data.append(0x0A)
            // Errors writing to stdout are as FileHandle left them: not reported (a closed pipe
            // has already ended the process with SIGPIPE).
            try? data.withUnsafeBytes { try raw($0) }
        } catch {
            note("\(program): cannot encode output: \(error)")
        }
    }

    /// As `AppdError` has always printed: the message, each problem indented, then the hint.
    public static func fail(_ error: AppdError, json useJSON: Bool) {
        if useJSON {
            json(APIErrorBody(error))
        } else {
            note("\(program): \(text(of: error))")
        }
    }

    /// The subject as this side sees it and the message, the problems, the cause and the
    /// hint; not the errno, which every message of appd that has one already spells out
    /// (`open ...: EACCES (Permission denied)`).
    public static func text(of error: AppdError) -> String {
        // Each part by the one rule: a message may quote what an app or an archive chose.
        var text = error.headline.printable
        for problem in error.problems { text += "\n  \(problem.description.printable)" }
        var cause = error.cause
        while let reason = cause {
            text += "\n  because: \(reason.headline.printable)"
            cause = reason.cause
        }
        if let hint = error.hint { text += "\nhint: \(hint.printable)" }
        return text
    }

    /// One line of text output that may hold values someone else chose (an app's name and
    /// version, an entitlement, a path an app made): printed by the one rule, `Printable`, so
    /// none of it reaches a terminal as a control (a newline in a value is shown as `\u{a}`,
    /// never as a line of its own). `--json` prints values exactly; `appctl logs` the app's
    /// own bytes.
    public static func line(_ text: String) {
        Swift.print(text.printable)
    }

    public static func note(_ text: String) {
        // Nothing to do about a stderr that cannot be written.
        _ = Array("\(text)\n".utf8).withUnsafeBytes { writeAll(STDERR_FILENO, $0) }
    }

    /// Straight to fd 1, not through stdio's buffer: streamed output (a followed log, events
    /// into a pipe) must show as it comes.
    public static func raw(_ bytes: UnsafeRawBufferPointer) throws {
        if case .failure(let error) = writeAll(STDOUT_FILENO, bytes) {
            throw AppdError(
                .io, "cannot write to stdout: \(String(cString: strerror(error.rawValue)))",
                errno: error.rawValue)
        }
    }

    public static func raw(_ text: String) throws {
        try Array(text.utf8).withUnsafeBytes { try raw($0) }
    }

    public static func bytes(_ count: Int64) -> String {
        TextFormatting.byteCount(count)
    }
}
