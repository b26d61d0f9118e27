import Foundation
import TestSupport
import Testing

@testable import Supervisor

func isProtocolError(_ message: AppMessage) -> Bool {
    if case .protocolError = message { return true }
    return false
}

@Suite("the lifecycle message parser is total: any bytes are a message or a protocol error")
struct LifecycleParserTests {
    @Test("the shared generator is SplitMix64: its first outputs for seed 0 are the published ones")
    func generator() {
        var generator = SeededGenerator(seed: 0)
        #expect(generator.next() == 0xE220_A839_7B1D_CDAF)
        #expect(generator.next() == 0x6E78_9E6A_A1B9_65F4)
    }

    @Test("the messages of docs/lifecycle.md parse as documented")
    func valid() {
        #expect(
            AppMessage.parse(Array(#"{"type":"hello","version":1}"#.utf8)) == .hello(version: 1))
        #expect(AppMessage.parse(Array(#"{"type":"hello"}"#.utf8)) == .hello(version: 1))
        #expect(
            AppMessage.parse(Array(#" { "type" : "ready" , "extra" : [1, {"a": null}] } "#.utf8))
                == .ready)
        #expect(
            AppMessage.parse(
                Array(#"{"type":"beginBackgroundTask","name":"save","ref":7,"seconds":120}"#.utf8))
                == .beginBackgroundTask(name: "save", ref: 7, seconds: 120))
        #expect(
            AppMessage.parse(
                Array(#"{"type":"beginBackgroundTask","name":"s\u00e9\ud83d\ude00\n"}"#.utf8))
                == .beginBackgroundTask(name: "sé😀\n", ref: nil, seconds: nil))
        #expect(
            AppMessage.parse(Array(#"{"type":"endBackgroundTask","task":3}"#.utf8))
                == .endBackgroundTask(task: 3))
        // A whole number written as a float is that number.
        #expect(
            AppMessage.parse(Array(#"{"type":"endBackgroundTask","task":3.0e0}"#.utf8))
                == .endBackgroundTask(task: 3))
        #expect(
            AppMessage.parse(Array(#"{"type":"somethingNew","x":1}"#.utf8))
                == .unknown(type: "somethingNew"))
    }

    /// Each of these crashed the daemon (`Int(Double)` traps), hung it, or was half-obeyed.
    static let hostile: [String] = [
        #"{"type":"hello","version":1e19}"#,
        #"{"type":"hello","version":-1e19}"#,
        #"{"type":"hello","version":0}"#,
        #"{"type":"hello","version":1.5}"#,
        #"{"type":"hello","version":"1"}"#,
        #"{"type":"beginBackgroundTask","ref":1e300}"#,
        #"{"type":"beginBackgroundTask","ref":-1e300}"#,
        #"{"type":"beginBackgroundTask","ref":9007199254740993}"#,
        #"{"type":"beginBackgroundTask","seconds":1e400}"#,
        #"{"type":"beginBackgroundTask","seconds":-1}"#,
        #"{"type":"beginBackgroundTask","seconds":"10"}"#,
        #"{"type":"beginBackgroundTask","name":7}"#,
        #"{"type":"endBackgroundTask","task":1e300}"#,
        #"{"type":"endBackgroundTask","task":9223372036854775808}"#,
        #"{"type":"endBackgroundTask","task":-1}"#,
        #"{"type":"endBackgroundTask","task":2.5}"#,
        #"{"type":"endBackgroundTask","task":true}"#,
        #"{"type":"endBackgroundTask"}"#,
        #"{"type":"endBackgroundTask","task":NaN}"#,
        #"{"type":"endBackgroundTask","task":Infinity}"#,
        #"{"type":"endBackgroundTask","task":0x10}"#,
        #"{"type":"endBackgroundTask","task":01}"#,
        #"{"type":"endBackgroundTask","task":1.}"#,
        #"{"type":"endBackgroundTask","task":-}"#,
        #"{"type":"hello","type":"ready"}"#,
        #"{"type":"ready","x":1,"x":2}"#,
        #"{"type":7}"#,
        #"{"type":null}"#,
        #"{"type":["ready"]}"#,
        #"{}"#,
        #"[{"type":"ready"}]"#,
        #""ready""#,
        #"{"type":"ready"} {"type":"ready"}"#,
        #"{"type":"ready",}"#,
        #"{"type":"ready""#,
        #"{"type":"re\ud800ady"}"#,
        #"{"type":"re\udc00ady"}"#,
        #"{"type":"re\x"}"#,
        "{\"type\":\"re\u{01}ady\"}",
        "",
        " ",
        "\u{FEFF}{\"type\":\"ready\"}",
    ]

    @Test(
        "out-of-range, non-integral, wrong-typed, duplicate, malformed: each a protocol error naming the problem",
        arguments: hostile)
    func hostileMessages(_ text: String) {
        let message = AppMessage.parse(Array(text.utf8))
        #expect(isProtocolError(message), "\(text) parsed as \(message)")
    }

    @Test(
        "bytes no JSON text holds: not UTF-8, NUL, nesting past the bound, numbers past the bound")
    func hostileBytes() {
        let cases: [[UInt8]] = [
            Array(#"{"type":"ready","name":""#.utf8) + [0xFF, 0xFE] + Array(#""}"#.utf8),
            Array(#"{"type":"ready"}"#.utf8) + [0xC0, 0xAF],
            Array(#"{"type":"ready"}"#.utf8) + [0] + Array(#"{"type":"ready"}"#.utf8),
            Array(#"{"type":"ready","x":"#.utf8)
                + Array(repeating: UInt8(ascii: "["), count: 100_000)
                + Array(repeating: UInt8(ascii: "]"), count: 100_000) + [UInt8(ascii: "}")],
            Array(#"{"type":"ready","x":"#.utf8)
                + Array(repeating: UInt8(ascii: "["), count: LifecycleJSON.maxDepth + 1)
                + Array(repeating: UInt8(ascii: "]"), count: LifecycleJSON.maxDepth + 1) + [
                    UInt8(ascii: "}")
                ],
            Array(#"{"type":"endBackgroundTask","task":"#.utf8)
                + Array(repeating: UInt8(ascii: "9"), count: 5000) + [UInt8(ascii: "}")],
            Array(#"{"type":"ready","#.utf8)
                + (0...LifecycleJSON.maxFields).flatMap { Array("\"k\($0)\":0,".utf8) }
                + Array(#""z":0}"#.utf8),
        ]
        for bytes in cases {
            let message = AppMessage.parse(bytes)
            #expect(isProtocolError(message), "\(bytes.prefix(60)) parsed as \(message)")
        }
        // At the bound itself: still a message.
        let deepest =
            Array(#"{"type":"ready","x":"#.utf8)
            + Array(repeating: UInt8(ascii: "["), count: LifecycleJSON.maxDepth)
            + Array(repeating: UInt8(ascii: "]"), count: LifecycleJSON.maxDepth) + [
                UInt8(ascii: "}")
            ]
        #expect(AppMessage.parse(deepest) == .ready)
    }

    // MARK: Fuzzing

    static let seeds: [UInt64] = [1, 2, 3, 0xC0FFEE, 0x5EED_0F_A9_9D]

    static let corpus: [String] = [
        #"{"type":"hello","version":1}"#, #"{"type":"ready"}"#,
        #"{"type":"beginBackgroundTask","name":"save","ref":7,"seconds":1.5}"#,
        #"{"type":"endBackgroundTask","task":3}"#,
        #"{"type":"setMinimumBackgroundFetchInterval","interval":900}"#,
        #"{"type":"setMinimumBackgroundFetchInterval","interval":"never"}"#,
        #"{"type":"fetchCompleted","fetch":2,"result":"noData"}"#,
        #"{"type":"x","a":[1,{"b":[true,false,null]}],"c":"\u00e9"}"#,
    ]
    static let fragments: [String] = [
        "{", "}", "[", "]", ",", ":", "\"", "\\", "\\u", "d800", "1e19", "-1e19", "1e300", "1e400",
        "-0", "0.5", "9007199254740993",
        "NaN", "true", "null", "\"type\"", "\"task\"", "\"ref\"", "\"version\"", "\"hello\"",
        "\"endBackgroundTask\"", "\"fetchCompleted\"", "\"result\"", "\"newData\"", "\"never\"",
        "\u{FF}", " ", "\n", "\0",
    ]

    /// A valid message cut, spliced, flipped or with fragments inserted.
    static func mutate(_ base: [UInt8], using generator: inout SeededGenerator) -> [UInt8] {
        var bytes = base
        for _ in 0..<Int.random(in: 1...4, using: &generator) {
            let at = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &generator)
            switch Int.random(in: 0..<6, using: &generator) {
            case 0 where !bytes.isEmpty:
                bytes[at] ^= UInt8(1 << Int.random(in: 0..<8, using: &generator))
            case 1 where !bytes.isEmpty: bytes.remove(at: at)
            case 2:
                bytes.insert(
                    contentsOf: Array(fragments.randomElement(using: &generator)!.utf8), at: at)
            case 3: bytes = Array(bytes[..<at])
            case 4 where !bytes.isEmpty: bytes[at] = UInt8.random(in: 0...255, using: &generator)
            default:
                let other = Array(corpus.randomElement(using: &generator)!.utf8)
                bytes =
                    Array(bytes[..<at])
                    + other[Int.random(in: 0..<other.count, using: &generator)...]
            }
        }
        return bytes
    }

    /// Only `JSONSerialization`'s opinion on whether `bytes` is a JSON object.
    static func foundationObject(_ bytes: [UInt8]) -> [String: Any]? {
        try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
    }

    /// The properties every input must have: parsing is deterministic; whatever `JSONSerialization`
    /// refuses as an object is a protocol error here too (stricter, never laxer); a message
    /// that parses has the type Foundation reads, and comes back the same when written again.
    static func check(_ bytes: [UInt8], seed: UInt64) {
        let message = AppMessage.parse(bytes)
        #expect(AppMessage.parse(bytes) == message, "seed \(seed): not deterministic on \(bytes)")
        guard !isProtocolError(message) else { return }
        guard let object = foundationObject(bytes) else {
            Issue.record(
                "seed \(seed): \(message) from bytes Foundation refuses: \(String(decoding: bytes, as: UTF8.self))"
            )
            return
        }
        if case .unknown(let type) = message {
            #expect(type == String(((object["type"] as? String) ?? "").prefix(100)), "seed \(seed)")
        } else {
            #expect(object["type"] as? String == message.name, "seed \(seed)")
        }
        if let again = reencode(message) {
            #expect(AppMessage.parse(Array(again.utf8)) == message, "seed \(seed): \(again)")
        }
    }

    static func reencode(_ message: AppMessage) -> String? {
        switch message {
        case .hello(let version): #"{"type":"hello","version":\#(version)}"#
        case .ready: #"{"type":"ready"}"#
        case .endBackgroundTask(let task): #"{"type":"endBackgroundTask","task":\#(task)}"#
        case .fetchCompleted(let fetch, let result):
            #"{"type":"fetchCompleted","fetch":\#(fetch),"result":"\#(result.rawValue)"}"#
        case .setFetchInterval(nil):
            #"{"type":"setMinimumBackgroundFetchInterval","interval":"never"}"#
        default: nil
        }
    }

    @Test("mutated messages: never a trap, always classified consistently", arguments: seeds)
    func mutated(seed: UInt64) {
        var generator = SeededGenerator(seed: seed)
        for _ in 0..<20_000 {
            let base = Array(Self.corpus.randomElement(using: &generator)!.utf8)
            Self.check(Self.mutate(base, using: &generator), seed: seed)
        }
    }

    @Test(
        "random bytes and random token soups: never a trap, always classified consistently",
        arguments: seeds)
    func random(seed: UInt64) {
        var generator = SeededGenerator(seed: seed)
        for round in 0..<20_000 {
            var bytes: [UInt8] = []
            if round % 2 == 0 {
                bytes = (0..<Int.random(in: 0...64, using: &generator)).map { _ in
                    UInt8.random(in: 0...255, using: &generator)
                }
            } else {
                bytes = Array("{".utf8)
                for _ in 0..<Int.random(in: 0...12, using: &generator) {
                    bytes += Array(Self.fragments.randomElement(using: &generator)!.utf8)
                }
            }
            Self.check(bytes, seed: seed)
        }
    }

    /// Why a parser of our own, with figures: it must not be slower than the one it replaces
    /// on the messages apps really send.
    @Test("the strict parser against JSONSerialization on real messages (printed)")
    func cost() {
        let messages = Self.corpus.map { Array($0.utf8) }
        let rounds = 40_000
        let clock = ContinuousClock()
        var kept = 0
        let ours = clock.measure {
            for i in 0..<rounds
            where !isProtocolError(AppMessage.parse(messages[i % messages.count])) { kept += 1 }
        }
        let foundation = clock.measure {
            for i in 0..<rounds where Self.foundationObject(messages[i % messages.count]) != nil {
                kept += 1
            }
        }
        print(
            "lifecycle parser: \(rounds) messages: strict \(ours), JSONSerialization \(foundation) (objects only)"
        )
        #expect(kept == 2 * rounds)
    }
}
