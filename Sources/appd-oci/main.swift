import AppdBase
import Foundation
import Glibc
import PrintableText

// appd-oci: an OCI runtime (docs/oci-runtime.md). containerd's runc shim, conmon (podman) and
// dockerd call it once per operation, as they call runc; it keeps each container's state in
// `--root` and lets the launcher appd-exec, which it spawns, outlive it: the engine's
// subreaper adopts the launcher and reads its exit status as the container's.

/// Where errors go: a line on stderr, and with `--log` a JSON line in that file (`--log-format
/// json`: `{"level","msg","time"}`, which the shim and conmon read back when a command fails).
struct OCILog {
    var path: String?
    var json: Bool

    /// Every line, errors and warnings alike, shows the control and bidi characters the image
    /// or the config chose as `\u{..}` (Printable), as the rest of appd prints them.
    func write(_ level: String, _ message: String) {
        guard let path else { return }
        let message = Printable(message, limit: nil).description
        let line: String
        if json {
            let object = ["level": level, "msg": message, "time": timestamp()]
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
            line = String(decoding: data ?? Data(), as: UTF8.self) + "\n"
        } else {
            line = "\(timestamp()) \(level): \(message)\n"
        }
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        _ = Array(line.utf8).withUnsafeBytes { writeAll(fd, $0) }
        close(fd)
    }

    func error(_ message: String) {
        write("error", message)
        let text = Array("appd-oci: \(Printable(message, limit: nil))\n".utf8)
        _ = text.withUnsafeBytes { writeAll(2, $0) }
    }

    func warning(_ message: String) { write("warning", message) }
}

/// Now, as RFC 3339 in UTC (`2026-11-27T01:30:00Z`).
func timestamp() -> String {
    UTCTime(secondsSince1970: Int64(time(nil))).description
}

func runtimeMain() -> Int32 {
    signal(SIGPIPE, SIG_IGN)
    let arguments = Array(CommandLine.arguments.dropFirst())
    var log = OCILog(path: nil, json: false)
    do {
        let line = try OCICommandLine.parse(arguments)
        log = OCILog(path: line.log, json: line.logFormat == "json")
        let runtime = OCIRuntime(line: line, log: log)
        return try runtime.run()
    } catch let error as AppdError {
        // The image and the config chose some of these words: their control and bidi
        // characters are shown as \u{..}, never sent to the admin's terminal.
        log.error(Printable(error.oneLine, limit: nil).description)
        return 1
    } catch {
        log.error(Printable("\(error)", limit: nil).description)
        return 1
    }
}

exit(runtimeMain())
