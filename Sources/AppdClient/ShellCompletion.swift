import AppdAPI

/// Bundle ids (and instance ids) for shell completion in appd and appctl, from the daemon the
/// command line names; nothing when it does not answer within a second.
public enum ShellCompletion {
    public static func appIDs(_ words: [String], _: Int, _ prefix: String) -> [String] {
        let apps = (try? client(words).apps()) ?? []
        return apps.map(\.bundleId).filter { $0.hasPrefix(prefix) }
    }

    public static func targets(_ words: [String], _ index: Int, _ prefix: String) -> [String] {
        let instances = (try? client(words).instances()) ?? []
        return appIDs(words, index, prefix) + instances.map(\.id).filter { $0.hasPrefix(prefix) }
    }

    private static func client(_ words: [String]) -> AppdClient {
        func value(_ name: String) -> String? {
            for (index, word) in words.enumerated() {
                if word == name, index + 1 < words.count { return words[index + 1] }
                if word.hasPrefix(name + "=") { return String(word.dropFirst(name.count + 1)) }
            }
            return nil
        }
        var client = AppdClient(socket: value("--socket"), root: value("--root"))
        client.timeout = 1
        return client
    }
}
