import AppdAPI
import AppdBase
import AppdCLI
import AppdClient
import ArgumentParser
import Foundation
import Glibc
import PrintableText

struct Restore: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replace an app's Documents and Library with a backup's.",
        discussion: """
            The daemon builds a new data container from the backup beside the app's own, its \
            files owned by the app's uid on this host and counted against its quota, checks \
            every file against the backup's SHA-256 listing, and swaps it in with one rename: \
            a restore that fails or is interrupted leaves the app's data as it was. Caches and \
            tmp start empty. Refused while the app runs (--terminate ends its instances first) \
            and when the backup comes from another signer than the installed app's \
            (--allow-signer-change). With --groups the application group containers the \
            backup holds are restored too (each swapped in the same way), and no app sharing \
            the app's groups may run; without it they are left as they are. A backup is untrusted input: what the bundle installer \
            refuses, a restore refuses (docs/backup.md).
            """
    )

    @OptionGroup var options: GlobalOptions

    @Flag(help: "Restore a backup taken from the app signed by another key.")
    var allowSignerChange = false

    @Flag(help: "Terminate the app's running instances first (and wait for them).")
    var terminate = false

    @Flag(help: "Restore the backup's application group containers too.")
    var groups = false

    @Argument(
        help: ArgumentHelp("The app's bundle id (case does not matter).", valueName: "id"),
        completion: .custom(InstalledAppIDs.complete))
    var id: String

    @Argument(help: ArgumentHelp("The backup ('-': stdin).", valueName: "file"))
    var file: String

    func run() throws {
        try options.run {
            let fd = file == "-" ? STDIN_FILENO : open(file, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw AppdError.system("open \(file)") }
            defer { if fd != STDIN_FILENO { close(fd) } }
            var size: Int64?
            var st = stat()
            if fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG { size = Int64(st.st_size) }
            let client = try options.daemonClient()
            var terminated: [String] = []
            if terminate {
                for instance in try client.instances(app: id) {
                    _ = try client.terminate(instance.id)
                    _ = try client.wait(instance.id)
                    terminated.append(instance.id)
                }
            }
            let progress = !options.json && isatty(STDERR_FILENO) == 1
            let display =
                progress ? UploadProgress(totals: size.map { (0, $0) }, verb: "sending") : nil
            let result: APIRestoreResult
            do {
                result = try client.restore(
                    id, allowSignerChange: allowSignerChange, groups: groups
                ) { write in
                    var buffer = [UInt8](repeating: 0, count: 256 << 10)
                    while true {
                        let count = buffer.withUnsafeMutableBytes { bytes in
                            retryingInterrupts { read(fd, bytes.baseAddress, bytes.count) }
                        }
                        guard count >= 0 else { throw AppdError.system("read \(file)") }
                        if count == 0 { break }
                        try buffer.withUnsafeBytes {
                            try write(UnsafeRawBufferPointer(rebasing: $0[..<count]))
                        }
                        display?.file(Int64(count))
                        display?.sent(count)
                    }
                }
            } catch let error as AppdError {
                display?.finish()
                // The daemon's errors about the archive are about this file.
                throw error.viewing(.archive, as: file == "-" ? "the backup archive" : file)
            } catch {
                display?.finish()
                throw error
            }
            display?.finish()
            if options.json {
                Output.json(result)
                return
            }
            if !terminated.isEmpty { print("Terminated \(terminated.joined(separator: ", "))") }
            print(
                "Restored \(result.bundleId.printable) from its backup of \(result.backupCreatedAt.printable) (version \((result.backupVersion ?? "unknown").printable)): \(result.files) files, \(Output.bytes(result.bytes))"
            )
            if let groups = result.groups {
                print(
                    "Restored the containers of its groups \(groups.map(\.printable).joined(separator: ", "))"
                )
            }
            if let left = result.groupsNotRestored {
                print(
                    "Left as they are: the containers of its groups \(left.map(\.printable).joined(separator: ", ")) in the backup (restore them with --groups)"
                )
            }
        }
    }
}
