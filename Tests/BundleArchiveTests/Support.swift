import AppBundle
import BundleArchive
import Foundation
@_exported import TestSupport
import Testing

/// A scratch directory removed when the value goes away, even if the test failed.
final class Scratch {
    let path: String

    init(_ label: String = "archive-test") {
        var template = Array("\(NSTemporaryDirectory())/\(label).XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress.flatMap { mkdtemp($0) }
        }
        precondition(made != nil, "mkdtemp failed")
        path = String(decoding: template.prefix(while: { $0 != 0 }).map(UInt8.init), as: UTF8.self)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func sub(_ name: String) -> String { "\(path)/\(name)" }

    /// Makes a directory below the scratch directory and returns its path.
    func directory(_ name: String) -> String {
        mkdir(sub(name), 0o755)
        return sub(name)
    }
}

/// One thing in a tree, as a test compares it.
enum Node: Equatable, CustomStringConvertible {
    case directory(mode: mode_t)
    case file(mode: mode_t, contents: [UInt8])
    case symlink(target: String)
    case other(mode: mode_t)

    var description: String {
        switch self {
        case .directory(let mode): "dir \(String(mode, radix: 8))"
        case .file(let mode, let contents): "file \(String(mode, radix: 8)) \(contents.count) bytes"
        case .symlink(let target): "-> \(target)"
        case .other(let mode): "other \(String(mode, radix: 8))"
        }
    }
}

/// Everything below `root` by relative path, never following a symlink.
func snapshot(_ root: String) -> [String: Node] {
    var nodes: [String: Node] = [:]
    func visit(_ relative: String) {
        let names =
            (try? FileManager.default.contentsOfDirectory(atPath: root + "/" + relative)) ?? []
        for name in names {
            let path = relative.isEmpty ? name : relative + "/" + name
            let full = root + "/" + path
            var info = stat()
            guard lstat(full, &info) == 0 else { continue }
            let mode = info.st_mode & 0o7777
            switch info.st_mode & S_IFMT {
            case S_IFDIR:
                nodes[path] = .directory(mode: mode)
                visit(path)
            case S_IFREG:
                let data = FileManager.default.contents(atPath: full) ?? Data()
                nodes[path] = .file(mode: mode, contents: Array(data))
            case S_IFLNK:
                nodes[path] = .symlink(
                    target: (try? FileManager.default.destinationOfSymbolicLink(atPath: full))
                        ?? "?")
            default:
                nodes[path] = .other(mode: info.st_mode)
            }
        }
    }
    visit("")
    return nodes
}

/// The names directly in `path`, sorted.
func listing(_ path: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
}

func writeFile(_ path: String, _ contents: [UInt8] = [], mode: mode_t = 0o644) throws {
    try FileManager.default.createDirectory(
        atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    try Data(contents).write(to: URL(fileURLWithPath: path))
    chmod(path, mode)
}

/// The writer's whole output for `directory`.
func archive(of directory: String) throws -> [UInt8] {
    var bytes: [UInt8] = []
    try BundleArchiveWriter.write(bundleAt: directory) { bytes.append(contentsOf: $0) }
    return bytes
}

/// Feeds `bytes` to a new extractor in pieces of the given sizes (repeated in turn), then
/// finishes it.
func extract(
    _ bytes: [UInt8], into directory: String, limits: BundleLimits = .init(),
    chunks: [Int] = [1 << 20]
) throws {
    var extractor = try BundleArchiveExtractor(into: directory, limits: limits)
    try bytes.withUnsafeBytes { all in
        var offset = 0
        var turn = 0
        while offset < all.count {
            let count = min(max(chunks[turn % chunks.count], 1), all.count - offset)
            try extractor.consume(UnsafeRawBufferPointer(rebasing: all[offset..<(offset + count)]))
            offset += count
            turn += 1
        }
    }
    try extractor.finish()
}

/// Runs a program and returns its exit status and output.
@discardableResult
func run(_ executable: String, _ arguments: [String]) throws -> (
    status: Int32, output: String, errors: String
) {
    let result = try ChildProcess(executable, arguments, stderr: .capture).finish()
    return (result.code, result.stdout, result.stderr)
}
