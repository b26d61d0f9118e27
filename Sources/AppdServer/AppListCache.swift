import AppContainers
import AppdAPI
import Foundation
import Glibc
import Synchronization

/// The encoded answer of `GET /v1/apps`, kept until the registry changes. Encoding 1,000 apps
/// costs ~25 ms of CPU (JSONEncoder and GRDB's row decoding, measured by scripts/bench-api);
/// the list changes only on install and uninstall. The key is the registry files' size and
/// modification time (the database and its WAL), so a change made outside the daemon
/// (`appd install --no-daemon`) is seen as well as the daemon's own.
final class AppListCache: Sendable {
    struct Key: Equatable {
        var stamps: [Int64]
    }

    private let cached = Mutex<(key: Key, data: Data)?>(nil)
    private let registryPath: String

    init(registryPath: String) { self.registryPath = registryPath }

    var currentKey: Key {
        var stamps: [Int64] = []
        for path in [registryPath, registryPath + "-wal"] {
            var info = stat()
            if stat(path, &info) == 0 {
                stamps += [
                    Int64(info.st_size), Int64(info.st_mtim.tv_sec), Int64(info.st_mtim.tv_nsec),
                    Int64(info.st_ino),
                ]
            } else {
                stamps += [-1]
            }
        }
        return Key(stamps: stamps)
    }

    /// The cached answer if the registry has not changed since; else `make()`'s, cached.
    func data(_ make: () throws -> Data) rethrows -> Data {
        let key = currentKey
        if let hit = cached.withLock({ $0 }), hit.key == key { return hit.data }
        let data = try make()
        // Keyed by the state before reading: a change during the read makes the next request
        // read again rather than keep a stale answer.
        cached.withLock { $0 = (key, data) }
        return data
    }

    func invalidate() { cached.withLock { $0 = nil } }
}
