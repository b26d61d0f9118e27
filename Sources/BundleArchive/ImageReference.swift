import AppdBase

/// An image name and tag as the engines read them (`[HOST[:PORT]/]PATH[:TAG]`, the grammar of
/// distribution/reference that docker, podman and containerd share), checked before anything is
/// written: an archive whose `RepoTags` an engine cannot parse loads as an untagged image, or
/// not at all, far from the command that wrote it.
public struct ImageReference: Sendable, Equatable, CustomStringConvertible {
    public let name: String
    public let tag: String

    /// What the grammar allows a whole name (host and path) to be, and a tag.
    public static let maxNameBytes = 255
    public static let maxTagBytes = 128

    public var description: String { "\(name):\(tag)" }

    /// `appd/<bundle id in lower case>:<version>`, `appd image`'s default.
    public static func defaultReference(bundleID: String, version: String) throws -> ImageReference
    {
        do {
            return try ImageReference(parsing: "appd/\(bundleID.lowercased()):\(version)")
        } catch let error as AppdError {
            throw AppdError(
                .badRequest, error.message,
                hint: "name the image yourself with --tag NAME:TAG")
        }
    }

    /// Parses `NAME[:TAG]`; a missing tag is `latest`, as docker reads it. Digests (`@sha256:`)
    /// are refused: an archive carries a tag, its digest is the engine's to compute.
    public init(parsing text: String) throws {
        func bad(_ problem: String) -> AppdError {
            AppdError(.badRequest, "image reference '\(Tar.shown(text.utf8))': \(problem)")
        }
        guard !text.contains("@") else {
            throw bad("a digest (@...) cannot be written into an archive; give NAME:TAG")
        }
        // The tag follows the last ':' after the last '/' (a ':' before it is a host's port).
        var name = Substring(text)
        var tag = "latest"
        if let colon = text.lastIndex(of: ":"),
            !text[colon...].contains("/")
        {
            name = text[..<colon]
            tag = String(text[text.index(after: colon)...])
        }
        guard !tag.isEmpty, tag.utf8.count <= Self.maxTagBytes,
            let first = tag.utf8.first, Self.isWord(first),
            tag.utf8.allSatisfy({
                Self.isWord($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-")
            })
        else {
            throw bad(
                "the tag '\(Tar.shown(tag.utf8))' must be 1-128 of [A-Za-z0-9_.-], not starting with '.' or '-'"
            )
        }
        guard !name.isEmpty, name.utf8.count <= Self.maxNameBytes else {
            throw bad("the name must be 1-\(Self.maxNameBytes) bytes")
        }
        var components = name.split(separator: "/", omittingEmptySubsequences: false)
        // As docker decides: the first of several components is a host if it has a '.' or a
        // ':', or is `localhost`.
        if components.count > 1,
            components[0].contains(".") || components[0].contains(":")
                || components[0] == "localhost"
        {
            let host = components.removeFirst()
            guard Self.isHost(host) else {
                throw bad("'\(Tar.shown(host.utf8))' is not a registry host[:port]")
            }
        }
        for component in components where !Self.isPathComponent(component) {
            throw bad(
                "the name component '\(Tar.shown(component.utf8))' must be lower-case letters and digits, separated by '.', '_', '__' or '-'"
            )
        }
        self.name = String(name)
        self.tag = tag
    }

    static func isWord(_ byte: UInt8) -> Bool {
        isLowerOrDigit(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || byte == UInt8(ascii: "_")
    }

    static func isLowerOrDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    /// `[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*`
    static func isPathComponent(_ text: Substring) -> Bool {
        let bytes = Array(text.utf8)
        guard let first = bytes.first, let last = bytes.last, isLowerOrDigit(first),
            isLowerOrDigit(last)
        else { return false }
        var index = 0
        while index < bytes.count {
            if isLowerOrDigit(bytes[index]) {
                index += 1
                continue
            }
            // A separator run: '.', '_', '__', or any number of '-'.
            var end = index
            while end < bytes.count, !isLowerOrDigit(bytes[end]) { end += 1 }
            let run = bytes[index..<end]
            let ok =
                run.elementsEqual([UInt8(ascii: ".")]) || run.elementsEqual([UInt8(ascii: "_")])
                || run.elementsEqual([UInt8(ascii: "_"), UInt8(ascii: "_")])
                || run.allSatisfy { $0 == UInt8(ascii: "-") }
            guard ok else { return false }
            index = end
        }
        return true
    }

    /// `label(.label)*(:port)?`, each label `[A-Za-z0-9-]+` not starting or ending with '-'.
    static func isHost(_ text: Substring) -> Bool {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count <= 2 else { return false }
        if parts.count == 2 {
            guard !parts[1].isEmpty, parts[1].count <= 5,
                parts[1].utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
            else { return false }
        }
        return parts[0].split(separator: ".", omittingEmptySubsequences: false).allSatisfy {
            label in
            !label.isEmpty && label.first != "-" && label.last != "-"
                && label.utf8.allSatisfy {
                    isLowerOrDigit($0) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0)
                        || $0 == UInt8(ascii: "-")
                }
        }
    }
}
