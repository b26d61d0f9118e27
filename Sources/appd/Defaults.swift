import AppBundle
import AppContainers
import AppdAPI
import AppdBase
import AppdCLI
import ArgumentParser
import Foundation

struct Defaults: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Read and write an app's preferences, as macOS's defaults(1) does.",
        discussion: """
            The app's own domain, Library/Preferences/ID.plist in its data container, read \
            and written by the daemon: atomically, as the app's uid, never through a link \
            the app made, at most 1 MiB. Each running instance that speaks the lifecycle \
            channel is told (defaultsDidChange) and reads its preferences again; a suspended \
            one when it is thawed. Needs the admin right.

            Actions: 'read [KEY]' prints the domain as an XML property list, or one value. \
            'write KEY VALUE...' sets KEY; --type is string (the default), int, float, bool, \
            date (ISO 8601), data (hex), array (each VALUE a string) or dict (KEY VALUE pairs \
            of strings). 'delete KEY' removes KEY. 'import FILE' replaces the domain with an \
            XML or binary plist (- for stdin). 'export' prints the domain as an XML property \
            list on stdout.

            Examples:
              appd defaults com.example.notes read
              appd defaults com.example.notes write Greeting 'hello there'
              appd defaults com.example.notes write LaunchCount 3 --type int
              appd defaults com.example.notes export > notes.plist
            """)

    enum ValueType: String, ExpressibleByArgument, CaseIterable {
        case string, int, float, bool, date, data, array, dict
    }

    @OptionGroup var options: GlobalOptions

    @Argument(help: ArgumentHelp("The app's bundle id (case does not matter).", valueName: "id"))
    var id: String

    @Argument(help: ArgumentHelp("read, write, delete, import or export.", valueName: "verb"))
    var verb: String

    @Argument(help: ArgumentHelp("The key, value(s) or file the verb takes.", valueName: "args"))
    var arguments: [String] = []

    @Option(help: ArgumentHelp("The type of a written value.", valueName: "type"))
    var type: ValueType = .string

    func run() throws {
        try options.run {
            let client = options.client
            switch verb {
            case "read":
                let domain = try client.defaults(id)
                if options.json { return Output.json(domain) }
                let values = try domain.values.mapValues { try $0.plistValue() }
                guard let key = arguments.first else { return try printPlist(values) }
                guard let value = values[key] else {
                    throw AppdError(.notFound, "\(domain.app) has no preference '\(key)'")
                }
                try printValue(key, value)
            case "write":
                guard arguments.count >= 2 else {
                    throw AppdError(.badRequest, "write takes KEY VALUE (see --help)")
                }
                let value = try Self.value(Array(arguments.dropFirst()), as: type)
                let result = try client.changeDefaults(
                    id, APIDefaultsChange(set: [arguments[0]: APIPlistValue(value)]))
                report(result)
            case "delete":
                guard arguments.count == 1 else {
                    throw AppdError(.badRequest, "delete takes one KEY")
                }
                report(try client.changeDefaults(id, APIDefaultsChange(delete: arguments)))
            case "import":
                guard arguments.count == 1 else {
                    throw AppdError(.badRequest, "import takes one FILE (- for stdin)")
                }
                let file = arguments[0]
                let data =
                    file == "-"
                    ? FileHandle.standardInput.readDataToEndOfFile()
                    : try Data(contentsOf: URL(fileURLWithPath: file))
                let values = try PlistValue.dictionary(
                    plist: data, maxBytes: AppPreferences.maxBytes, what: file)
                report(
                    try client.changeDefaults(
                        id,
                        APIDefaultsChange(set: values.mapValues(APIPlistValue.init), replace: true)
                    ))
            case "export":
                let domain = try client.defaults(id)
                try printPlist(try domain.values.mapValues { try $0.plistValue() })
            default:
                throw AppdError(
                    .badRequest, "'\(verb)' is not a verb of appd defaults",
                    hint: "read, write, delete, import or export")
            }
        }
    }

    private func report(_ result: APIDefaultsResult) {
        if options.json { return Output.json(result) }
        Output.line(
            "\(result.app): \(result.values.count) preference\(result.values.count == 1 ? "" : "s")"
                + (result.told.isEmpty
                    ? "" : "; told \(result.told.joined(separator: ", ")) (defaultsDidChange)"))
    }

    private func printPlist(_ values: [String: PlistValue]) throws {
        try Output.raw(String(decoding: try PlistValue.plistData(values, xml: true), as: UTF8.self))
    }

    /// A scalar as defaults(1) prints it; an array or dictionary as a plist of the one key.
    private func printValue(_ key: String, _ value: PlistValue) throws {
        switch value {
        case .string(let text): Output.line(text)
        case .integer(let number): Output.line(String(number))
        case .real(let number): Output.line(String(number))
        case .bool(let flag): Output.line(flag ? "1" : "0")
        case .date(let date): Output.line(date.formatted(.iso8601))
        case .data(let data): Output.line(data.map { String(format: "%02x", $0) }.joined())
        case .array, .dictionary: try printPlist([key: value])
        }
    }

    /// The value `words` spell as `type`; the error names the word and the type.
    static func value(_ words: [String], as type: ValueType) throws -> PlistValue {
        func bad(_ word: String) -> AppdError {
            AppdError(.badRequest, "'\(word)' is not a \(type.rawValue) value")
        }
        func one() throws -> String {
            guard words.count == 1 else {
                throw AppdError(
                    .badRequest,
                    "--type \(type.rawValue) takes one value (quote one with spaces)")
            }
            return words[0]
        }
        switch type {
        case .string: return .string(try one())
        case .int:
            let word = try one()
            guard let number = Int64(word) else { throw bad(word) }
            return .integer(number)
        case .float:
            let word = try one()
            guard let number = Double(word), number.isFinite else { throw bad(word) }
            return .real(number)
        case .bool:
            let word = try one()
            switch word.lowercased() {
            case "yes", "true", "1": return .bool(true)
            case "no", "false", "0": return .bool(false)
            default: throw bad(word)
            }
        case .date:
            let word = try one()
            guard let date = try? Date.ISO8601FormatStyle().parse(word) else { throw bad(word) }
            return .date(date)
        case .data:
            let word = try one()
            let digits = Array(word.utf8)
            guard digits.count % 2 == 0 else { throw bad(word) }
            var bytes: [UInt8] = []
            for index in stride(from: 0, to: digits.count, by: 2) {
                guard
                    let byte = UInt8(
                        String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16)
                else { throw bad(word) }
                bytes.append(byte)
            }
            return .data(Data(bytes))
        case .array: return .array(words.map(PlistValue.string))
        case .dict:
            guard words.count % 2 == 0 else {
                throw AppdError(.badRequest, "--type dict takes KEY VALUE pairs")
            }
            var dict: [String: PlistValue] = [:]
            for index in stride(from: 0, to: words.count, by: 2) {
                dict[words[index]] = .string(words[index + 1])
            }
            return .dictionary(dict)
        }
    }
}
