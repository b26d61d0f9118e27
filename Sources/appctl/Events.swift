import AppdAPI
import AppdCLI
import AppdClient
import ArgumentParser
import Foundation

struct Events: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract:
            "Print lifecycle events as they happen: installs, launches, state changes, messages, exits.",
        discussion: """
            One line per event until interrupted: time, kind, app, instance, and the new \
            state (inactive, active, background, suspended, terminating) with why, how it \
            exited, the version installed, or a lifecycle message to (->) or from (<-) the app. With --json each event is the \
            daemon's JSON object on one line, as received (NDJSON), for 'jq -c' and friends.

            Examples:
              appctl events
              appctl events --json | jq -c 'select(.kind == "message")'
              appctl events --json | jq -c 'select(.kind == "exited")'
            """)

    @OptionGroup var options: GlobalOptions

    func run() throws {
        try options.run {
            let dates = ISO8601DateFormatter()
            try options.client.streamLines(AppdClient.path("events")) { line in
                guard !line.isEmpty else { return }
                if options.json {
                    try (line + [0x0A]).withUnsafeBytes { try Output.raw($0) }
                } else if let event = try? APICoding.decoder().decode(APIEvent.self, from: line) {
                    try Output.raw(Self.text(event, dates: dates) + "\n")
                } else {
                    Output.note(
                        "appctl: skipped an event it cannot read: \(String(decoding: line.prefix(200), as: UTF8.self))"
                    )
                }
            }
        }
    }

    /// `2026-11-23T11:32:03Z  exited     com.example.notes  3f2a9c01d4e7  exited with code 0`
    static func text(_ event: APIEvent, dates: ISO8601DateFormatter) -> String {
        let detail =
            switch event.kind {
            case .exited: event.exit?.description ?? "exited"
            case .installed: event.version.map { "version \($0)" } ?? ""
            case .launched, .state:
                (event.state?.rawValue ?? "") + (event.detail.map { " (\($0))" } ?? "")
            case .message: event.detail ?? ""
            case .uninstalled: ""
            }
        let fields = [
            dates.string(from: event.time),
            event.kind.rawValue.padding(toLength: 11, withPad: " ", startingAt: 0),
            event.app, event.instance ?? "-", detail,
        ]
        return fields.joined(separator: "  ").trimmingCharacters(in: .whitespaces)
    }
}
