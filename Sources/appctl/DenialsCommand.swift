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

struct Denials: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "denials",
        abstract:
            "Show what the sandbox and appd refused apps: files, system calls, ports, launches.",
        discussion: """
            One line per denial, oldest first: time, app, instance, who refused (landlock, \
            seccomp, bind-filter, loopback-filter, appd), and what: Landlock's right and the path \
            (fs.read_dir /), the system call seccomp refused (mount, ptrace), a port the bind \
            filter of a network.client app refused (bind: UDP port 5353), a host loopback port \
            an app on the host's network was refused (connect: TCP IPv4 loopback port 5432), or \
            appd's reason (a launch it \
            refused, an entitlement [App ID] RevokeEntitlements= took away). A denial repeated \
            in a row shows once with xN. Each instance keeps its most recent 128; past 20 at once \
            an instance gets 5 more a second and the rest are only counted (dropped). With -f \
            new denials keep coming until interrupted; with --json each is the daemon's JSON \
            object (with -f, one per line). Where the kernel cannot report its denials (no \
            audit, Landlock ABI < 7) this says so; 'appd doctor' says why. See docs/denials.md.

            Examples:
              appctl denials
              appctl denials com.example.notes
              appctl denials -f 3f2a9c01d4e7
              appctl denials --json | jq '.denials[] | select(.source == "seccomp")'
            """)

    @OptionGroup var options: GlobalOptions

    @Flag(name: [.short, .long], help: "Keep printing new denials as they happen.")
    var follow = false

    @Argument(
        help: ArgumentHelp(
            "Only this app's denials (or only this instance's).", valueName: "id|instance"),
        completion: .custom(ShellCompletion.targets))
    var target: Target?

    var scope: AppdClient.DenialScope {
        switch target {
        case .instance(let id)?: .instance(id)
        case .app(let id)?: .app(id)
        case nil: .all
        }
    }

    func run() throws {
        try options.run {
            if follow {
                try options.client.followDenials(scope) { line in
                    guard !line.isEmpty else { return }
                    if options.json {
                        try (line + [0x0A]).withUnsafeBytes { try Output.raw($0) }
                    } else if let denial = try? APICoding.decoder().decode(
                        APIDenial.self, from: line)
                    {
                        try Output.raw(Self.text(denial) + "\n")
                    }
                }
                return
            }
            let answer = try options.client.denials(scope)
            if options.json {
                Output.json(answer)
                return
            }
            if !answer.kernelReports, let reason = answer.reason {
                Output.note("appctl: the kernel's denials are not all reported: \(reason)")
            }
            if answer.denials.isEmpty {
                print("No denials.")
            } else {
                for denial in answer.denials { print(Self.text(denial)) }
            }
            if answer.dropped > 0 {
                print("(\(answer.dropped) more over the rate limit, counted but not kept)")
            }
        }
    }

    /// `2026-11-23T11:32:03Z  com.example.notes  3f2a9c01d4e7  landlock  fs.read_dir / (openat)`,
    /// by the one rule (`Printable`): the summary names paths the app chose.
    static func text(_ denial: APIDenial) -> String {
        [
            TextFormatting.iso8601(denial.time), denial.app, denial.instance ?? "-",
            // Padded to the common sources' width, never cut (bind-filter, loopback-filter).
            denial.source.rawValue.utf8.count >= 8
                ? denial.source.rawValue : denial.source.rawValue.padded(toLength: 8),
            denial.summary,
        ].joined(separator: "  ").printable
    }
}
