import AppdBase
import Foundation
import Glibc

/// `signers.d/`: `[Signer NAME]` sections as drop-in files beside appd.conf
/// (`/etc/appd/signers.d/*.conf`), so a fleet ships its trust as files — a ConfigMap mounted
/// there, a config-management template — without editing each node's appd.conf (issue 37).
/// Only signer sections belong there: a drop-in cannot change `[Signing]` (AllowUnsigned), the
/// sandbox or anything else, and a file holding another section is refused, naming it. Read in
/// name order, regular files only, at most `maxFiles` of at most `maxFileBytes` each; a
/// signer's name must be unique across appd.conf and every drop-in; a relative `Key=` is read
/// from the drop-in's folder.
extension AppdConfiguration {
    public static let signersDirectoryName = "signers.d"
    static let maxSignerFiles = 256
    static let maxSignerFileBytes = 1 << 20

    /// The drop-ins of `directory` (if it is one), added to `config`'s signers.
    static func addSignerDropIns(to config: inout AppdConfiguration, in directory: String) throws {
        var info = stat()
        guard stat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { return }
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
            .filter { $0.hasSuffix(".conf") && !$0.hasPrefix(".") }.sorted()
        guard names.count <= maxSignerFiles else {
            throw AppdError(
                .invalidConfig,
                "\(directory) holds \(names.count) .conf files; at most \(maxSignerFiles) are read")
        }
        for name in names {
            let file = "\(directory)/\(name)"
            let text = try readDropIn(file)
            for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false)
                .enumerated()
            {
                let line = raw.trimmingWhitespace()
                guard line.hasPrefix("["), !(line == "[Signer]" || line.hasPrefix("[Signer "))
                else { continue }
                throw AppdError(
                    .invalidConfig,
                    "\(file):\(index + 1): \(line) does not belong in \(signersDirectoryName): only [Signer NAME] sections do",
                    hint: "put other settings in appd.conf")
            }
            let dropIn = try parse(text, file: file)
            for signer in dropIn.signing.signers {
                guard !config.signing.signers.contains(where: { $0.name == signer.name }) else {
                    throw AppdError(
                        .invalidConfig,
                        "\(file): [Signer \(signer.name)] is also in appd.conf or an earlier drop-in"
                    )
                }
                config.signing.signers.append(signer)
            }
        }
    }

    /// A drop-in's text: a regular file (not followed through a link), bounded, UTF-8.
    private static func readDropIn(_ file: String) throws -> String {
        let fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { throw AppdError.system("cannot open \(file)") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw AppdError(.invalidConfig, "\(file) is not a regular file")
        }
        guard info.st_size <= maxSignerFileBytes else {
            throw AppdError(
                .invalidConfig, "\(file) is larger than \(maxSignerFileBytes) bytes")
        }
        let data = FileHandle(fileDescriptor: fd, closeOnDealloc: false).readDataToEndOfFile()
        guard data.count <= maxSignerFileBytes, let text = String(data: data, encoding: .utf8)
        else { throw AppdError(.invalidConfig, "\(file) is too large or not UTF-8") }
        return text
    }
}
