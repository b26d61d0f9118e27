import AppdBase
import Foundation
import TestSupport
import Testing

@testable import AppContainers
@testable import AppdConfig

/// docs/man/*: hand-written, so these checks are what keeps them true — they render without a
/// warning, and name every subcommand the built tools have and every key appd.conf accepts.
@Suite("man pages")
struct ManPageTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("docs/man")
        .path
    static let pages = ["appd.8", "appctl.1", "appd.conf.5", "appd-oci.8"]

    static func render(_ page: String, device: String) throws -> (code: Int32, output: String) {
        try runTool(
            "/usr/bin/groff", ["-man", "-T\(device)", "-P-cbou", "-ww", "\(directory)/\(page)"])
    }

    /// groff's diagnostics alone (`-z`: the page itself is not written).
    static func warnings(_ page: String, device: String) throws -> (code: Int32, output: String) {
        try runTool("/usr/bin/groff", ["-man", "-T\(device)", "-ww", "-z", "\(directory)/\(page)"])
    }

    /// The rendered page's sections: a heading (a line without indent) and its lines.
    static func sections(_ text: String) -> [(heading: String, lines: [String])] {
        var result: [(heading: String, lines: [String])] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if let first = line.first, first != " " {
                result.append((line.trimmingCharacters(in: .whitespaces), []))
            } else if !result.isEmpty {
                result[result.count - 1].lines.append(line)
            }
        }
        return result
    }

    /// The subcommands `tool --help` lists.
    static func subcommands(_ tool: String) throws -> [String] {
        let help = try runTool(tool, ["--help"])
        #expect(help.code == 0, "\(help.output)")
        var names: [String] = []
        var inList = false
        for line in help.output.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("SUBCOMMANDS:") {
                inList = true
                continue
            }
            guard inList else { continue }
            guard line.hasPrefix("  "), !line.hasPrefix("   "),
                let word = line.split(separator: " ").first,
                !line.contains("See '")
            else {
                if line.isEmpty { inList = false }
                continue
            }
            // `version (default)`, `status`: the name is the first word.
            names.append(String(word.filter { $0 != "," }))
        }
        return names
    }

    @Test("each page renders with groff -man -ww without a warning")
    func rendersCleanly() throws {
        for page in Self.pages {
            for device in ["utf8", "ascii"] {
                let result = try Self.warnings(page, device: device)
                #expect(
                    result.code == 0 && result.output.isEmpty,
                    "\(page) (\(device)): \(result.output)")
            }
            #expect(plainText(page).contains("NAME"), "\(page) renders no NAME section")
        }
    }

    private func plainText(_ page: String) -> String {
        (try? Self.render(page, device: "ascii").output) ?? ""
    }

    @Test(
        "the EXIT STATUS table of appd(8) and appctl(1) lists 0, 1 (appd: 2) and 64, and the built tools return them"
    )
    func exitStatusTable() throws {
        let noDaemon = ["APPD_SOCKET": "/nonexistent/appd.sock", "PATH": "/usr/bin:/bin"]
        // A command that gets each code, without a daemon.
        let cases: [(tool: String, page: String, code: Int32, arguments: [String])] = [
            ("appd", "appd.8", 0, ["--version"]),
            ("appd", "appd.8", 1, ["verify", "/nonexistent/Hello.app"]),
            ("appd", "appd.8", 2, ["verify", "oci-archive:/nonexistent/image.tar"]),
            ("appd", "appd.8", 64, ["list", "--no-such-option"]),
            ("appctl", "appctl.1", 0, ["--version"]),
            ("appctl", "appctl.1", 1, ["ps"]),
            ("appctl", "appctl.1", 64, ["launch"]),
        ]
        for page in ["appd.8", "appctl.1"] {
            let text = try Self.render(page, device: "ascii").output
            let table = Self.sections(text).first { $0.heading == "EXIT STATUS" }?.lines ?? []
            // A row: the code alone at the start of a line, its meaning after it.
            let codes = Set(
                table.compactMap { line in
                    line.trimmingCharacters(in: .whitespaces).split(separator: " ").first.flatMap {
                        Int32($0)
                    }
                })
            // appd's verify of an image says "could not read it" apart from "refused".
            let expected: Set<Int32> = page == "appd.8" ? [0, 1, 2, 64] : [0, 1, 64]
            #expect(codes == expected, "\(page) lists \(codes.sorted())")
        }
        for item in cases {
            let result = try runTool(item.tool, item.arguments, environment: noDaemon)
            #expect(
                result.code == item.code,
                "\(item.tool) \(item.arguments.joined(separator: " ")) exited \(result.code), \(item.page) says \(item.code): \(result.output)"
            )
        }
    }

    @Test("appd(8) and appctl(1) describe every subcommand the built tools have")
    func everySubcommand() throws {
        for (tool, page) in [("appd", "appd.8"), ("appctl", "appctl.1")] {
            let names = try Self.subcommands(tool)
            #expect(names.count >= 10, "\(tool) --help lists \(names)")
            let text = try Self.render(page, device: "ascii").output
            let listed = Self.sections(text).first { $0.heading == "SUBCOMMANDS" }?.lines ?? []
            #expect(!listed.isEmpty, "\(page) has no SUBCOMMANDS section")
            for name in names {
                let described = listed.contains { line in
                    let words = line.trimmingCharacters(in: .whitespaces)
                        .split(whereSeparator: { $0 == " " || $0 == "," })
                    return words.first.map(String.init) == name
                }
                #expect(described, "\(page) does not describe '\(tool) \(name)'")
            }
        }
    }

    @Test("appd-oci(8) describes every command the built appd-oci accepts")
    func everyRuntimeCommand() throws {
        // appd-oci names its commands when given one it does not know (its parser's table).
        let refusal = try runTool(builtExecutable("appd-oci"), ["no-such-command"])
        #expect(refusal.code == 1, "\(refusal.output)")
        let list = refusal.output.components(separatedBy: "the commands are ").last ?? ""
        let names = list.split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(names.count >= 13, "appd-oci listed \(names)")
        let text = try Self.render("appd-oci.8", device: "ascii").output
        let listed = Self.sections(text).first { $0.heading == "COMMANDS" }?.lines ?? []
        for name in names {
            let described = listed.contains { line in
                line.trimmingCharacters(in: .whitespaces).split(
                    whereSeparator: { $0 == " " || $0 == "," }
                ).first.map(String.init) == name
            }
            #expect(described, "appd-oci(8) does not describe '\(name)'")
        }
    }

    @Test("appd.conf(5) documents every key of every section appd.conf accepts")
    func everyConfigKey() throws {
        let text = try Self.render("appd.conf.5", device: "ascii").output
        let sections = Self.sections(text)
        for (section, keys) in AppdConfiguration.documentedKeys {
            let body = sections.first {
                $0.heading == "[\(section)]" || $0.heading.hasPrefix("[\(section) ")
            }
            #expect(body != nil, "appd.conf(5) has no [\(section)] section")
            let joined = (body?.lines ?? []).joined(separator: "\n")
            for key in keys {
                #expect(
                    joined.contains("\(key)="),
                    "appd.conf(5) [\(section)] does not document \(key)=")
            }
        }
        // And the parser accepts what the page documents: a key only in the page is a lie too.
        for (section, keys) in AppdConfiguration.documentedKeys {
            let header =
                section == "Signer"
                ? "[Signer s]" : section == "App" ? "[App com.example.x]" : "[\(section)]"
            for key in keys {
                do {
                    _ = try AppdConfiguration.parse("\(header)\n\(key)=@@bad@@\n", file: "t.conf")
                } catch let error as AppdError {
                    #expect(
                        !error.message.contains("unknown key"),
                        "\(section) \(key): \(error.message)")
                }
            }
        }
    }
}
