/// Finds a key written twice in one `<dict>` of an XML property list, by scanning the XML
/// itself: Foundation's reader keeps one of the two silently, and a reviewer must see what
/// appd sees. Not through Foundation's `XMLParser`: that is libxml2, which appd would otherwise
/// load only to feed it every untrusted bundle's plists (and which pulls in the system's ICU).
///
/// It follows what a property list may hold: elements (`<dict>`, `<key>`, ... with or without
/// attributes, self-closed or not), text with the five predefined entities and character
/// references, CDATA sections, comments, processing instructions and a DOCTYPE. A DOCTYPE with
/// an internal subset is refused (entity declarations are refused before this runs). It does
/// not validate: the plist reader runs after it and refuses what is not well-formed.
enum PlistKeyScanner {
    enum Outcome: Equatable {
        case noDuplicate
        case duplicate(String)
        case refused(String)
    }

    static func scan(_ xml: [UInt8]) -> Outcome {
        var open: [Set<String>] = []
        var key: [UInt8]?
        var i = 0
        let n = xml.count

        func starts(_ text: String, at index: Int) -> Bool {
            let count = text.utf8.count
            return index + count <= n && xml[index..<index + count].elementsEqual(text.utf8)
        }
        func find(_ text: String, from index: Int) -> Int? {
            var at = index
            while at < n {
                if starts(text, at: at) { return at }
                at += 1
            }
            return nil
        }
        /// Where the markup from `index` ends: its '>' outside quoted values (or the end), and
        /// whether a '[' came first (a DOCTYPE's internal subset).
        func markupEnd(from index: Int) -> (end: Int, bracket: Bool) {
            var at = index
            var quote: UInt8?
            while at < n {
                let c = xml[at]
                if let q = quote {
                    if c == q { quote = nil }
                } else if c == UInt8(ascii: "\"") || c == UInt8(ascii: "'") {
                    quote = c
                } else if c == UInt8(ascii: "[") {
                    return (at, true)
                } else if c == UInt8(ascii: ">") {
                    break
                }
                at += 1
            }
            return (at, false)
        }

        while i < n {
            let byte = xml[i]
            if byte == UInt8(ascii: "<") {
                if starts("<!--", at: i) {
                    guard let end = find("-->", from: i + 4) else { return .noDuplicate }
                    i = end + 3
                } else if starts("<![CDATA[", at: i) {
                    guard let end = find("]]>", from: i + 9) else { return .noDuplicate }
                    if key != nil { key! += xml[(i + 9)..<end] }
                    i = end + 3
                } else if starts("<?", at: i) {
                    guard let end = find("?>", from: i + 2) else { return .noDuplicate }
                    i = end + 2
                } else if starts("<!", at: i) {
                    // A DOCTYPE: up to its '>', refusing an internal subset ('[' before it).
                    let (end, bracket) = markupEnd(from: i + 2)
                    if bracket {
                        return .refused(
                            "has a DOCTYPE with an internal subset, which is not accepted in a property list"
                        )
                    }
                    i = end + 1
                } else {
                    // A start or end tag, up to its '>' (outside quoted attribute values).
                    let closing = i + 1 < n && xml[i + 1] == UInt8(ascii: "/")
                    var at = i + (closing ? 2 : 1)
                    let nameStart = at
                    while at < n, !Self.endsName(xml[at]) { at += 1 }
                    let name = String(decoding: xml[nameStart..<at], as: UTF8.self)
                    // A '[' in a tag means nothing: look on to its '>'.
                    var (end, bracket) = markupEnd(from: at)
                    while bracket { (end, bracket) = markupEnd(from: end + 1) }
                    at = end
                    let selfClosed = at > i && xml[at - 1] == UInt8(ascii: "/")
                    i = at + 1
                    switch (name, closing, selfClosed) {
                    case ("dict", false, false): open.append([])
                    case ("dict", true, _): if !open.isEmpty { open.removeLast() }
                    case ("key", false, false): key = []
                    case ("key", false, true), ("key", true, _):
                        let text = String(decoding: key ?? [], as: UTF8.self)
                        key = nil
                        if !open.isEmpty, !open[open.count - 1].insert(text).inserted {
                            return .duplicate(text)
                        }
                    default: break
                    }
                }
            } else if byte == UInt8(ascii: "&"), key != nil {
                guard let end = find(";", from: i + 1), end - i <= 12,
                    let decoded = Self.entity(xml[(i + 1)..<end])
                else { return .refused("has an unknown or malformed entity reference in a key") }
                key! += decoded
                i = end + 1
            } else {
                if key != nil { key!.append(byte) }
                i += 1
            }
        }
        return .noDuplicate
    }

    private static func endsName(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: ">") || byte == UInt8(ascii: "/") || byte == 0x20 || byte == 0x09
            || byte == 0x0A || byte == 0x0D
    }

    /// The UTF-8 bytes of a predefined entity or a character reference (`name` without & and ;).
    private static func entity(_ name: ArraySlice<UInt8>) -> [UInt8]? {
        switch String(decoding: name, as: UTF8.self) {
        case "lt": return [UInt8(ascii: "<")]
        case "gt": return [UInt8(ascii: ">")]
        case "amp": return [UInt8(ascii: "&")]
        case "apos": return [UInt8(ascii: "'")]
        case "quot": return [UInt8(ascii: "\"")]
        case let text where text.hasPrefix("#x") || text.hasPrefix("#X"):
            return UInt32(text.dropFirst(2), radix: 16).flatMap(Unicode.Scalar.init).map {
                Array(String($0).utf8)
            }
        case let text where text.hasPrefix("#"):
            return UInt32(text.dropFirst(1), radix: 10).flatMap(Unicode.Scalar.init).map {
                Array(String($0).utf8)
            }
        default: return nil
        }
    }
}
