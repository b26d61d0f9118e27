import AppdBase
import Foundation
import Testing

@testable import AppdConfig

/// The key table (`ConfigKey.all`) against everything that lists keys: the parser, `appd
/// override`'s editing, appd.conf(5) and the shipped config/appd.conf. A key added to the table
/// without a sample here, a page line or a sample line fails one of these.
@Suite("appd.conf keys")
struct ConfigKeyTests {
    /// A value other than the default, and one the key refuses (nil: it takes any text), for
    /// every declared key, by `Section.Key`.
    static let samples: [String: (good: String, bad: String?)] = [
        "Bundle.MaxFiles": ("10", "-3"), "Bundle.MaxTotalBytes": ("300M", "lots"),
        "Bundle.MaxDepth": ("5", "0"), "Bundle.MaxPathLength": ("200", "x"),
        "Bundle.MaxInfoPlistBytes": ("64K", "64Q"), "Bundle.MaxEntitlementsBytes": ("64K", "-1"),
        "Users.UIDRange": ("50000-50009", "9-5"), "Users.GroupRange": ("60000-60009", "0-5000"),
        "Users.MaxGroupsPerApp": ("4", "0"), "Users.MaxGroupsPerSigner": ("8", "many"),
        "Sandbox.SystemPaths": ("/usr /opt", "usr"), "Sandbox.EtcFiles": ("hosts", "/etc/shadow"),
        "Sandbox.AllowedReadOnlyPaths": ("/srv", "/srv/../etc"),
        "Sandbox.AllowedReadWritePaths": ("/srv/rw", "srv"),
        "Sandbox.RequireAppSandboxEntitlement": ("no", "maybe"),
        "Sandbox.MemoryMax": ("64M", "1M"), "Sandbox.TasksMax": ("40", "3"),
        "Sandbox.OpenFilesMax": ("128", "10"), "Sandbox.Path": ("/usr/bin", "bin"),
        "Sandbox.WeakerModes": ("no-seccomp", "no-everything"),
        "Sandbox.Launcher": ("/usr/libexec/x", "x"), "Sandbox.DataQuota": ("2G", "1K"),
        "Sandbox.LoopbackPorts": ("53 8080", "0"),
        "API.Socket": ("/run/x.sock", "x.sock"), "API.SocketMode": ("0600", "999"),
        "API.SocketGroup": ("staff", nil), "API.ReadAllowed": ("@staff", "@"),
        "API.ControlAllowed": ("alice", "@"), "API.AdminAllowed": ("root", "@"),
        "API.MaxRequestBytes": ("2M", "lots"), "API.MaxConnections": ("100", "0"),
        "API.ReservedConnections": ("10", "-1"), "API.MaxConnectionsPerUser": ("5", "0"),
        "API.MaxStreamsPerUser": ("3", "0"), "API.RequestTimeout": ("30s", "0"),
        "Supervisor.TerminateGracePeriod": ("1.5s", "-1"), "Supervisor.LogMaxBytes": ("4M", "0"),
        "Supervisor.KeepExited": ("5", "0"), "Supervisor.CgroupParent": ("/x", nil),
        "Supervisor.DenialLog": ("off", "maybe"), "Supervisor.MaxInstances": ("50", "0"),
        "Supervisor.MaxInstancesPerUser": ("10", "0"), "Supervisor.MaxInstancesPerApp": ("10", "0"),
        "Lifecycle.ActivePolicy": ("all", "some"), "Lifecycle.BackgroundGracePeriod": ("2", "-1"),
        "Lifecycle.BackgroundTaskTime": ("10s", "0"),
        "Lifecycle.BackgroundTaskMaxTime": ("60", "0"),
        "Lifecycle.BackgroundTaskExpirationGrace": ("1", "601"),
        "Lifecycle.ExpiredBackgroundTask": ("suspend", "ignore"),
        "Lifecycle.MaxBackgroundTasks": ("4", "0"), "Lifecycle.LaunchWatchdog": ("3", "forever"),
        "Lifecycle.AllowedBackgroundModes": ("fetch", "music"),
        "Lifecycle.MemoryBudget": ("2G", "lots"), "Lifecycle.ActiveMemoryLimit": ("1G", "0"),
        "Lifecycle.MemoryPressureWarning": ("20%", "120"),
        "Lifecycle.MemoryPressureCritical": ("50", "-1"),
        "Lifecycle.SuspendedMemory": ("8M", "lots"), "Lifecycle.MemoryCheckInterval": ("0.5", "0"),
        "Lifecycle.KeepAliveDelay": ("2", "0"),
        "Lifecycle.KeepAliveLimit": ("3", "0"), "Lifecycle.KeepAliveStableTime": ("10", "-1"),
        "Lifecycle.FetchDeadline": ("10", "0"), "Lifecycle.MinimumFetchInterval": ("600", "-1"),
        "Storage.ReclaimCachesBelow": ("10%", "100%"), "Storage.BackupMaxBytes": ("1G", "0"),
        "OCI.Hooks": ("/usr/bin/hook", "hook"), "OCI.MemoryMax": ("1G", "lots"),
        "OCI.TasksMax": ("100", "0"),
        "Signing.AllowUnsigned": ("yes", "maybe"),
        "Signing.UnsignedEntitlements": ("com.apple.security.network.client", "a*b"),
        "Signing.UnsignedGroups": ("group.x.*", "*x*"),
        "Signing.UnsignedHostExecutables": ("/usr/bin/python3", "python3"),
        "Signing.UnsignedURLSchemes": ("x-dev-*", "a*b"),
        "Signing.UnsignedDocumentTypes": ("text/plain .txt", "*a*"),
        "Signer.URLSchemes": ("notes", "n*s"), "Signer.DocumentTypes": (".txt", "t*t"),
        "Handlers.URLSchemes": ("notes=com.example.notes", "notes"),
        "Handlers.DocumentTypes": (".txt=com.example.notes text/plain=com.example.notes", "txt=x"),
        "Signing.LaunchCheckMaxBytes": ("0", "-1"),
        "Signer.Key": (otherKey, "/nonexistent/example.key"),
        "Signer.BundleIDs": ("com.example.*", "a*b"),
        "Signer.Entitlements": ("*", "a*b"), "Signer.Groups": ("group.*", "*a*"),
        "Signer.HostExecutables": ("/usr/bin/*", "bin/*"),
        "App.CPUWeight": ("50", "0"), "App.BackgroundModes": ("audio", "music"),
        "App.RevokeEntitlements": ("com.apple.security.network.*", "a*b"),
        "App.RunAtLoad": ("yes", "maybe"), "App.KeepAlive": ("on-failure", "sometimes"),
        "App.Arguments": ("serve 'two words'", "'open"), "App.Environment": ("A=1", "LD_PRELOAD=x"),
        "App.MinimumFetchInterval": ("1800", "often"),
        "App.StartInterval": ("3600", "0"),
        "App.StartCalendarInterval": ("Mon..Fri 09:00", "Fry 9"),
    ]
    /// A public key written inline (32 bytes, base64).
    static let key = "ed25519:" + Data(repeating: 7, count: 32).base64EncodedString()
    static let otherKey = "ed25519:" + Data(repeating: 8, count: 32).base64EncodedString()

    /// The header a key's sample is written under, and what comes before the key in it.
    static func header(_ section: ConfigKey.Section) -> String {
        switch section {
        case .signer: "[Signer s]\nKey=\(key)"
        case .app: "[App com.example.x]"
        default: "[\(section.rawValue)]"
        }
    }

    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    @Test("every declared key has a sample, and names are unique within their section")
    func everyKeySampled() {
        for section in ConfigKey.Section.allCases {
            let names = ConfigKey.keys(of: section).map(\.name)
            #expect(Set(names).count == names.count, "\(section) declares a key twice")
            for key in ConfigKey.keys(of: section) where section != .app || key.section == .app {
                #expect(Self.samples["\(section.rawValue).\(key.name)"] != nil, "\(key.name)")
                #expect(!key.summary.isEmpty && !key.summary.contains("\n"), "\(key.name)")
            }
        }
        #expect(Self.samples.count == ConfigKey.all.count)
    }

    @Test("every declared key reads its sample into the settings, in its section")
    func everyKeyParses() throws {
        for key in ConfigKey.all {
            let sample = try #require(Self.samples["\(key.section.rawValue).\(key.name)"]).good
            let base = try AppdConfiguration.parse(Self.header(key.section) + "\n", file: "t.conf")
            let read = try AppdConfiguration.parse(
                Self.header(key.section) + "\n\(key.name)=\(sample)\n", file: "t.conf")
            #expect(read != base, "\(key.section.rawValue) \(key.name)=\(sample) changed nothing")
        }
    }

    @Test("every key an [App ID] section may set is written by appd override and read back")
    func everyAppKeyRoundTrips() throws {
        let appKeys = ConfigKey.keys(of: .app)
        #expect(appKeys.map(\.name) == AppOverride.keys)
        for key in appKeys {
            let sample = try #require(Self.samples["\(key.section.rawValue).\(key.name)"]).good
            var edit = AppOverrideEdit()
            edit.values = [(key.name, "--option", sample)]
            let edited = try edit.applied(to: AppOverride()).override
            #expect(edited != AppOverride(), "\(key.name)=\(sample) changed nothing")
            #expect(edited.lines.map(\.key) == [key.name])
            // Written into a file as appd override writes it, read back as the same section.
            let text = AppdConfiguration.replacingApp("com.example.x", with: edited.lines, in: "")
            let read = try AppdConfiguration.parse(text, file: "t.conf")
            #expect(read.override(for: "com.example.x") == edited, "\(text)")
            // `default` takes it away again.
            edit.values = [(key.name, "--option", "default")]
            #expect(try edit.applied(to: edited).override == AppOverride(), "\(key.name)")
        }
    }

    @Test("a bad value is refused naming file, line, section and key, in one line")
    func everyBadValue() throws {
        for key in ConfigKey.all {
            guard let bad = Self.samples["\(key.section.rawValue).\(key.name)"]?.bad else {
                continue
            }
            let header = Self.header(key.section)
            let line = header.split(separator: "\n").count + 1
            let error = try #require(throws: AppdError.self, "\(key.name)=\(bad)") {
                try AppdConfiguration.parse("\(header)\n\(key.name)=\(bad)\n", file: "t.conf")
            }
            #expect(error.code == .invalidConfig)
            #expect(error.message.hasPrefix("t.conf:\(line): "), "\(error.message)")
            #expect(error.message.contains(key.name) && !error.message.contains("\n"))
            if error.message.contains(" is not ") {
                let written = header.split(separator: "\n")[0].dropFirst().dropLast()
                #expect(
                    error.message.hasPrefix(
                        "t.conf:\(line): [\(written)] \(key.name)=\(bad) is not "),
                    "\(error.message)")
            }
            // appd override refuses it too, naming the option it came from.
            if key.appSettable {
                var edit = AppOverrideEdit()
                edit.values = [(key.name, "--option", bad)]
                let refused = try #require(throws: AppdError.self) {
                    try edit.applied(to: AppOverride())
                }
                #expect(refused.message.hasPrefix("--option \(bad)"), "\(refused.message)")
            }
        }
    }

    @Test(
        "an undeclared key is refused, naming the section, with the key it was probably meant to be"
    )
    func undeclaredKey() throws {
        let error = try #require(throws: AppdError.self) {
            try AppdConfiguration.parse("[Sandbox]\nMemoryMx=1G\n", file: "t.conf")
        }
        #expect(error.message == "t.conf:2: unknown key MemoryMx in [Sandbox]")
        #expect(
            error.hint?.hasPrefix(
                "did you mean MemoryMax= (memory.max of each instance)? known keys: SystemPaths,")
                == true)
        // A host-only key is not a key of [App ID], in the file or through appd override.
        let app = try #require(throws: AppdError.self) {
            try AppdConfiguration.parse("[App com.example.x]\nPath=/bin\n", file: "t.conf")
        }
        #expect(app.message == "t.conf:2: unknown key Path in [App com.example.x]")
        var edit = AppOverrideEdit()
        edit.values = [("Path", "--path", "/bin")]
        #expect(throws: AppdError.self) { try edit.applied(to: AppOverride()) }
        // A key of one section is unknown in another.
        #expect(throws: AppdError.self) {
            try AppdConfiguration.parse("[Bundle]\nMemoryMax=1G\n", file: "t.conf")
        }
    }

    @Test("appd.conf(5) documents exactly the declared keys, section by section")
    func manPage() throws {
        let page = try String(
            contentsOf: Self.repository.appendingPathComponent("docs/man/appd.conf.5"),
            encoding: .utf8)
        // The keys of a `.TP`/`.TQ` tag line: `.BR MaxFiles= 100000`.
        var documented: [String: Set<String>] = [:]
        var section: String?
        var tag = false
        for line in page.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix(".SH ") {
                section = line.wholeMatch(of: #/\.SH \[(\w+).*/#).map { String($0.output.1) }
            } else if tag, let section {
                for match in line.matches(of: #/\b([A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*)=/#) {
                    documented[section, default: []].insert(String(match.output.1))
                }
            }
            tag = line == ".TP" || line == ".TQ"
        }
        for section in ConfigKey.Section.allCases {
            let declared = Set(ConfigKey.keys(of: section).map(\.name))
            let page = documented[section.rawValue] ?? []
            #expect(
                declared.subtracting(page).isEmpty,
                "appd.conf(5) [\(section.rawValue)] does not document \(declared.subtracting(page).sorted())"
            )
            #expect(
                page.subtracting(declared).isEmpty,
                "appd.conf(5) [\(section.rawValue)] documents undeclared \(page.subtracting(declared).sorted())"
            )
        }
    }

    @Test("config/appd.conf lists exactly the declared keys of the host's sections")
    func sampleConfig() throws {
        let sample = try String(
            contentsOf: Self.repository.appendingPathComponent("config/appd.conf"), encoding: .utf8)
        var sections: [String: String] = [:]
        var written: [String: Set<String>] = [:]
        var section: String?
        for line in sample.split(separator: "\n", omittingEmptySubsequences: false) {
            if let header = line.wholeMatch(of: #/\[(\w+)\]/#) {
                section = String(header.output.1)
            } else if let section {
                sections[section, default: ""] += String(line) + "\n"
                if let key = line.wholeMatch(of: #/#?([A-Z][A-Za-z0-9]*)=.*/#) {
                    written[section, default: []].insert(String(key.output.1))
                }
            }
        }
        for section in ConfigKey.Section.allCases where section != .signer && section != .app {
            let declared = ConfigKey.keys(of: section).map(\.name)
            let text = sections[section.rawValue] ?? ""
            for key in declared {
                #expect(
                    text.contains("\(key)="), "config/appd.conf [\(section.rawValue)] lacks \(key)="
                )
            }
            let extra = (written[section.rawValue] ?? []).subtracting(declared)
            #expect(
                extra.isEmpty,
                "config/appd.conf [\(section.rawValue)] has undeclared \(extra.sorted())")
        }
    }
}
