import AppdBase
import AppdCLI
import AppdClient
import ArgumentParser
import BundleArchive
import Foundation
import Glibc
import PrintableText

struct Backup: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write an app's Documents and Library (never Caches or tmp) as a backup.",
        discussion: """
            The daemon reads the app's data container and streams it as a tar archive with a \
            manifest (the app, its version and signer, each file's size and SHA-256) and no \
            host uids: 'appd restore' on this host or another gives the files to the app there. \
            The app's running instances are frozen while the data is read and thawed after; \
            --live takes it without freezing them. With --groups the containers of the \
            app's application groups come too (as AppGroups/<group id>/), and the apps sharing \
            them are frozen with it. Links are stored as links, FIFOs, sockets \
            and devices are skipped and reported, as is a file that changed while read. With \
            -o FILE the backup is written beside FILE and renamed into place when complete \
            (docs/backup.md).
            """
    )

    @OptionGroup var options: GlobalOptions

    @Option(
        name: .shortAndLong,
        help: ArgumentHelp("Where to write the backup ('-': stdout).", valueName: "file"))
    var output: String = "-"

    @Flag(help: "Do not freeze the app's running instances (the backup may be inconsistent).")
    var live = false

    @Flag(help: "Take the containers of the app's application groups too.")
    var groups = false

    @Argument(
        help: ArgumentHelp("The app's bundle id (case does not matter).", valueName: "id"),
        completion: .custom(InstalledAppIDs.complete))
    var id: String

    func run() throws {
        try options.run {
            let toStdout = output == "-"
            if toStdout && isatty(STDOUT_FILENO) == 1 {
                throw AppdError(
                    .badRequest, "a backup is a tar stream; it is not written to a terminal",
                    hint: "give a file: appd backup \(id) -o \(id).tar")
            }
            let client = try options.daemonClient()
            let progress = !options.json && isatty(STDERR_FILENO) == 1
            let display = progress ? UploadProgress(totals: nil, verb: "receiving") : nil
            let file = try BackupOutputFile(toStdout ? nil : output)
            var tail = BackupTail()
            do {
                try client.backup(id, live: live, groups: groups) { bytes in
                    try file.write(bytes)
                    tail.append(bytes)
                    display?.sent(bytes.count)
                }
            } catch {
                display?.finish()
                throw error
            }
            display?.finish()
            guard let summary = BackupFormat.summary(fromTail: tail.bytes) else {
                throw AppdError(
                    .io, "the backup of \(id) ended without its summary; it is incomplete",
                    hint: "see the daemon's log (journalctl -u appd) for why")
            }
            try file.complete()
            if options.json {
                Output.json(summary)
                return
            }
            Output.note(Self.describe(summary, to: toStdout ? "stdout" : output))
        }
    }

    static func describe(_ summary: BackupSummary, to place: String) -> String {
        var text =
            "Backed up \(summary.bundleID.printable)\(summary.groups.map { " and its groups \($0.map(\.printable).joined(separator: ", "))" } ?? ""): \(summary.files) files, \(summary.directories) folders, \(summary.links) links, \(Output.bytes(summary.bytes)) to \(place)"
        if summary.live {
            text += "\nTaken live: the app's instances were not frozen"
        } else if let held = summary.heldSeconds {
            text +=
                "\nThe app was held (frozen) for \(String(format: "%.3f", held)) s: \(summary.frozenInstances.joined(separator: ", "))"
        } else {
            text += "\nNo instance was running"
        }
        if summary.skippedCount > 0 {
            text += "\nNot taken, or taken as they changed (\(summary.skippedCount)):"
            for skip in summary.skipped { text += "\n  \(skip.path.printable) \(skip.reason)" }
            if summary.skippedCount > summary.skipped.count {
                text += "\n  and \(summary.skippedCount - summary.skipped.count) more"
            }
        }
        return text
    }
}

/// The last bytes of the stream, block-aligned with its start, where the summary is.
struct BackupTail {
    private(set) var bytes: [UInt8] = []
    private var dropped = 0
    static let keep = 256 << 10

    mutating func append(_ chunk: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: chunk)
        guard bytes.count > 2 * Self.keep else { return }
        // Drop whole blocks only, so the tail stays aligned with the stream.
        let excess = (bytes.count - Self.keep) / 512 * 512
        bytes.removeFirst(excess)
        dropped += excess
    }
}

/// Where the backup goes: stdout, or `FILE.partial-<pid>` renamed to FILE once complete, so a
/// backup cut short never stands under the name of a good one.
final class BackupOutputFile {
    let fd: Int32
    let final: String?
    let partial: String?
    private var done = false

    init(_ path: String?) throws {
        guard let path else {
            fd = STDOUT_FILENO
            final = nil
            partial = nil
            return
        }
        let partial = "\(path).partial-\(getpid())"
        fd = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw AppdError.system("create \(partial)") }
        final = path
        self.partial = partial
    }

    deinit {
        guard let partial else { return }
        close(fd)
        if !done { unlink(partial) }
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        if case .failure(let error) = writeAll(fd, bytes) {
            throw AppdError.system("write \(final ?? "stdout")", errno: error.rawValue)
        }
    }

    func complete() throws {
        guard let partial, let final else { return }
        guard fsync(fd) == 0 else { throw AppdError.system("fsync \(partial)") }
        guard rename(partial, final) == 0 else {
            throw AppdError.system("rename \(partial) to \(final)")
        }
        done = true
    }
}
