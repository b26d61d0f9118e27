import AppdAPI
import AppdBase
import AppdCLI
import AppdClient
import ArgumentParser

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// `appctl files ...`: iOS's file sharing, for apps whose Info.plist has `UIFileSharingEnabled`.
struct Files: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "files",
        abstract: "List, copy in, copy out and delete an app's Documents (file sharing).",
        discussion: """
            Only for apps whose Info.plist has UIFileSharingEnabled = YES, as iOS shares only \
            those apps' Documents with a computer; other apps are refused. Paths are relative \
            to the app's Documents. The daemon does the work beneath Documents and follows no \
            link the app made: a path through a link is refused. Needs the control right.

            Examples:
              appctl files com.example.notes
              appctl files get com.example.notes notes/today.txt -o today.txt
              appctl files put com.example.notes ./report.pdf inbox/report.pdf
              appctl files rm com.example.notes inbox/report.pdf
            """,
        subcommands: [ListFiles.self, Get.self, Put.self, Remove.self],
        defaultSubcommand: ListFiles.self)

    static let idHelp = ArgumentHelp("The app's bundle id (case does not matter).", valueName: "id")

    struct ListFiles: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "List what the app's Documents holds (the default).")

        @OptionGroup var options: GlobalOptions

        @Argument(help: Files.idHelp, completion: .custom(ShellCompletion.appIDs))
        var id: String

        func run() throws {
            try options.run {
                let list = try options.client.files(id)
                if options.json { return Output.json(list) }
                Table.print(
                    [["KIND", "SIZE", "PATH"]]
                        + list.files.map {
                            [$0.kind, $0.kind == "file" ? Output.bytes($0.size) : "-", $0.path]
                        })
                if !list.complete {
                    Output.note(
                        "(more entries than one listing shows: the first \(list.files.count))")
                }
            }
        }
    }

    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "get",
            abstract: "Copy a file out of the app's Documents (to stdout without -o).")

        @OptionGroup var options: GlobalOptions

        @Argument(help: Files.idHelp, completion: .custom(ShellCompletion.appIDs))
        var id: String

        @Argument(help: ArgumentHelp("The file, relative to Documents.", valueName: "path"))
        var path: String

        @Option(
            name: .shortAndLong,
            help: ArgumentHelp(
                "Where to write it (a file; written whole or not at all).", valueName: "local"))
        var output: String?

        func run() throws {
            try options.run {
                let client = options.client
                guard let output, output != "-" else {
                    return try client.downloadFile(id, path: path) { try Output.raw($0) }
                }
                let file = try LocalFile(creatingBeside: output)
                do {
                    try client.downloadFile(id, path: path) { try file.write($0) }
                    try file.commit()
                } catch {
                    file.abandon()
                    throw error
                }
            }
        }
    }

    struct Put: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "put",
            abstract: "Copy a file into the app's Documents, replacing one of that name.")

        @OptionGroup var options: GlobalOptions

        @Argument(help: Files.idHelp, completion: .custom(ShellCompletion.appIDs))
        var id: String

        @Argument(
            help: ArgumentHelp("The file to copy ('-': stdin).", valueName: "local"),
            completion: .file())
        var local: String

        @Argument(
            help: ArgumentHelp(
                "Where in Documents (default: the local file's name).", valueName: "path"))
        var path: String?

        func validate() throws {
            if local == "-" && path == nil {
                throw ValidationError("from stdin ('-') the path in Documents must be given")
            }
        }

        func run() throws {
            try options.run {
                let target = path ?? String(local.split(separator: "/").last ?? Substring(local))
                let fd = local == "-" ? STDIN_FILENO : open(local, O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else {
                    throw AppdError(
                        .io, "cannot open \(local): \(String(cString: strerror(errno)))",
                        errno: errno)
                }
                defer { if fd != STDIN_FILENO { close(fd) } }
                let change = try options.client.uploadFile(id, path: target) { write in
                    var buffer = [UInt8](repeating: 0, count: 256 << 10)
                    while true {
                        let n = buffer.withUnsafeMutableBytes { bytes in
                            valueOrErrno { read(fd, bytes.baseAddress, bytes.count) }
                        }
                        switch n {
                        case .success(0): return
                        case .success(let count):
                            try buffer.withUnsafeBytes {
                                try write(UnsafeRawBufferPointer(rebasing: $0.prefix(count)))
                            }
                        case .failure(let error):
                            throw AppdError(
                                .io, "cannot read \(local): \(error)",
                                errno: error.rawValue)
                        }
                    }
                }
                if options.json { return Output.json(change) }
                Output.line(
                    "\(change.app): Documents/\(change.path) written (\(Output.bytes(change.bytes ?? 0)))"
                )
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm",
            abstract: "Delete a file or a folder (with what it holds) from the app's Documents.")

        @OptionGroup var options: GlobalOptions

        @Argument(help: Files.idHelp, completion: .custom(ShellCompletion.appIDs))
        var id: String

        @Argument(help: ArgumentHelp("What to delete, relative to Documents.", valueName: "path"))
        var path: String

        func run() throws {
            try options.run {
                let change = try options.client.removeFile(id, path: path)
                if options.json { return Output.json(change) }
                Output.line("\(change.app): Documents/\(change.path) removed (\(change.kind))")
            }
        }
    }
}

/// A file written under a temporary name beside its place and renamed over it when whole.
final class LocalFile {
    let path: String
    let temporary: String
    let fd: Int32
    private var done = false

    init(creatingBeside path: String) throws {
        self.path = path
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { String(path[...$0]) } ?? ""
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        temporary = "\(folder).\(name).appctl-\(getpid())"
        fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw AppdError(
                .io, "cannot create \(temporary): \(String(cString: strerror(errno)))",
                errno: errno)
        }
    }

    deinit {
        abandon()
        close(fd)
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        if case .failure(let error) = writeAll(fd, bytes) {
            throw AppdError(.io, "cannot write \(temporary): \(error)", errno: error.rawValue)
        }
    }

    func commit() throws {
        guard rename(temporary, path) == 0 else {
            throw AppdError(
                .io, "cannot rename \(temporary) to \(path): \(String(cString: strerror(errno)))",
                errno: errno)
        }
        done = true
    }

    func abandon() {
        guard !done else { return }
        done = true
        unlink(temporary)
    }
}
