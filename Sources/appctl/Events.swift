import AppdAPI
import AppdCLI
import AppdClient
import ArgumentParser
import PrintableText

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

struct Events: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract:
            "Print lifecycle events as they happen: installs, launches, state changes, messages, exits.",
        discussion: """
            One line per event until interrupted: time, kind, app, instance, and the new \
            state (inactive, active, background, suspended, terminating) with why, how it \
            exited, the version installed, a lifecycle message to (->) or from (<-) the app, or \
            what the sandbox refused it (denial). With --json each event is the \
            daemon's JSON object on one line, as received (NDJSON), for 'jq -c' and friends.

            --since replays what appd still holds (its last 4096 events) before following: \
            give the seq of the last event you saw (a reconnecting client) or a time. A 'gap' \
            line says when events asked for are no longer held, or were dropped because the \
            client read too slowly.

            Examples:
              appctl events
              appctl events --since 1200
              appctl events --since 10m
              appctl events --json | jq -c 'select(.kind == "message")'
              appctl events --json | jq -c 'select(.kind == "exited")'
            """)

    @OptionGroup var options: GlobalOptions

    @Option(
        help: ArgumentHelp(
            "Replay from here first: the seq of the last event seen, RFC 3339, or a time ago (10m, 2h).",
            valueName: "SEQ|TIME"))
    var since: String?

    func validate() throws {
        guard let since else { return }
        if Self.isSeq(since) {
            guard Int(since) != nil else {
                throw ValidationError("--since '\(since)' is too large for an event seq")
            }
        } else if SinceArgument(argument: since) == nil {
            throw ValidationError(
                "--since '\(since)' is neither an event seq nor a time (RFC 3339, or a time ago: 90s, 10m, 2h, 1d)"
            )
        }
    }

    static func isSeq(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { (48...57).contains($0) }
    }

    /// What the API takes: a seq as it is, a time as RFC 3339.
    var sinceQuery: String? {
        guard let since else { return nil }
        return Self.isSeq(since) ? since : SinceArgument(argument: since)?.rfc3339
    }

    func run() throws {
        try options.run {
            try options.client.events(since: sinceQuery) { line in
                guard !line.isEmpty else { return }
                if options.json {
                    try (line + [0x0A]).withUnsafeBytes { try Output.raw($0) }
                } else if let event = try? APICoding.decoder().decode(APIEvent.self, from: line) {
                    try Output.raw(Self.text(event) + "\n")
                } else {
                    Output.note(
                        "appctl: skipped an event it cannot read: \(Printable(bytes: line))"
                    )
                }
            }
        }
    }

    /// `2026-11-23T11:32:03Z  exited     com.example.notes  3f2a9c01d4e7  exited with code 0`
    static func text(_ event: APIEvent) -> String {
        let detail =
            switch event.kind {
            case .exited: event.exit?.description ?? "exited"
            case .installed: event.version.map { "version \($0)" } ?? ""
            case .launched, .state:
                (event.state?.rawValue ?? "") + (event.detail.map { " (\($0))" } ?? "")
            case .message: event.detail ?? ""
            case .denial:
                event.denial.map { "\($0.source.rawValue): \($0.summary)" } ?? event.detail ?? ""
            case .uninstalled: ""
            case .gap: event.detail ?? ""
            }
        let fields = [
            TextFormatting.iso8601(event.time),
            event.kind.rawValue.padded(toLength: 11),
            event.app.isEmpty ? "-" : event.app, event.instance ?? "-", detail,
        ]
        // By the one rule (`Printable`): a message's detail and a denial's path are the app's.
        return fields.joined(separator: "  ").trimmingWhitespace().printable
    }
}
