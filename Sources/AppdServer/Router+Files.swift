import AppContainers
import AppdAPI
import AppdBase
import Dispatch
import Foundation
import Glibc

/// File sharing (`appctl files`): an app's Documents, for apps whose Info.plist has
/// `UIFileSharingEnabled` = YES. The file work is `SharedDocuments`' (AppContainers/
/// FileSharing.swift: openat2 beneath Documents, no link followed, no mount crossed); here it
/// runs on a queue of its own, never on the event loop or the cooperative pool, one chunk at a
/// time so that transfers interleave. The path is the `path=` query parameter, relative to
/// Documents.
extension Router {
    static let filesQueue = DispatchQueue(label: "appd.router.files")

    static func onFilesQueue<T: Sendable>(_ body: @escaping @Sendable () throws -> T)
        async throws -> T
    {
        try await withCheckedThrowingContinuation { continuation in
            filesQueue.async { continuation.resume(with: Result { try body() }) }
        }
    }

    func sharedDocuments(_ id: String) async throws -> SharedDocuments {
        let app = try store.app(id)
        let root = store.root
        return try await Self.onFilesQueue { try SharedDocuments(app: app, root: root) }
    }

    static func sharedPath(_ request: Request) throws -> SharedPath {
        guard let text = request.query["path"] else {
            throw AppdError(
                .badRequest,
                "a file needs its path in Documents: ?path=notes/a.txt")
        }
        return try SharedPath(text)
    }

    /// `GET /v1/apps/{id}/files`
    func listFiles(_ id: String) async throws -> Reply {
        let documents = try await sharedDocuments(id)
        let (files, complete) = try await Self.onFilesQueue { documents.list() }
        return try .json(
            APIFileList(
                app: documents.app.bundleID,
                files: files.map {
                    APIFileEntry(
                        path: $0.path, kind: $0.kind.rawValue, size: $0.size,
                        modified: $0.modified)
                }, complete: complete))
    }

    /// `GET /v1/apps/{id}/files/content?path=P`: the file's bytes, as many as it held when it
    /// was opened (errors before the first byte are answers of their own).
    func getFile(_ id: String, _ request: Request) async throws -> Reply {
        let path = try Self.sharedPath(request)
        let documents = try await sharedDocuments(id)
        let (handle, size) = try await Self.onFilesQueue {
            let (file, size) = try documents.openForReading(path)
            return (SendableFile(file), size)
        }
        return .stream(
            contentType: "application/octet-stream",
            headers: [("X-Appd-File-Size", "\(size)")]
        ) { writer in
            var left = size
            while left > 0 {
                let want = Int(min(left, 256 << 10))
                let chunk = try await Self.onFilesQueue { try handle.read(want) }
                guard !chunk.isEmpty else { break }  // shortened meanwhile
                try await writer.write(chunk)
                left -= Int64(chunk.count)
            }
        }
    }

    /// `POST /v1/apps/{id}/files/content?path=P`: the body becomes the file (all of it, or
    /// nothing: it is written under a temporary name and renamed when whole).
    func putFile(_ id: String, _ request: Request) async throws -> Reply {
        let path = try Self.sharedPath(request)
        let documents = try await sharedDocuments(id)
        let upload = try await Self.onFilesQueue { try documents.beginPut(path) }
        do {
            while let chunk = try await request.body.next() {
                try await Self.onFilesQueue {
                    try chunk.withUnsafeReadableBytes { try upload.write($0) }
                }
            }
            try await Self.onFilesQueue { try upload.commit() }
        } catch {
            await (try? Self.onFilesQueue { upload.abandon() })
            throw error
        }
        return try .json(
            APIFileChange(
                app: documents.app.bundleID, path: path.components.joined(separator: "/"),
                kind: "file", bytes: upload.written), status: 201)
    }

    /// `DELETE /v1/apps/{id}/files/content?path=P`
    func removeFile(_ id: String, _ request: Request) async throws -> Reply {
        let path = try Self.sharedPath(request)
        let documents = try await sharedDocuments(id)
        let kind = try await Self.onFilesQueue { try documents.remove(path) }
        return try .json(
            APIFileChange(
                app: documents.app.bundleID, path: path.components.joined(separator: "/"),
                kind: kind.rawValue))
    }
}

/// An open file read from the files queue only, one read at a time.
final class SendableFile: @unchecked Sendable {
    let file: FileDescriptor

    init(_ file: FileDescriptor) { self.file = file }

    func read(_ count: Int) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        let result = buffer.withUnsafeMutableBytes { bytes in
            valueOrErrno { Glibc.read(file.raw, bytes.baseAddress, count) }
        }
        switch result {
        case .success(let n): return Array(buffer.prefix(n))
        case .failure(let error): throw AppdError.system("read \(file.path)", errno: error.rawValue)
        }
    }
}
