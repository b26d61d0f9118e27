/// The text `appd-exec` reads on its profile fd (docs/launcher-protocol.md, version 1).
extension SandboxProfile {
    public static let formatHeader = "appd-profile 1"

    public func encoded() -> String {
        var lines = [Self.formatHeader]
        func record(_ fields: String...) { lines.append(fields.map(Self.escape).joined(separator: " ")) }
        func octal(_ mode: UInt32?) -> String { String(mode ?? 0o755, radix: 8) }

        for path in cgroupProcs { record("cgroup", path) }
        if !namespaces.isEmpty {
            lines.append((["unshare"] + namespaces.map(\.rawValue)).joined(separator: " "))
        }
        if namespaces.contains(.uts) { record("hostname", hostname) }
        if loopback { record("loopback") }
        record("root", "tmpfs")
        for mount in mounts {
            switch mount.kind {
            case .roBind, .roBindTry, .rwBind, .devBind:
                record("mount", mount.kind.rawValue, mount.source ?? "", mount.destination)
            case .tmpfs, .dir:
                record("mount", mount.kind.rawValue, mount.destination, octal(mount.mode))
            case .proc, .dev:
                record("mount", mount.kind.rawValue, mount.destination)
            case .symlink:
                record("mount", "symlink", mount.source ?? "", mount.destination)
            case .file:
                record("mount", "file", mount.destination, octal(mount.mode), mount.content ?? "")
            }
        }
        if console { record("console") }
        record("uid", String(uid))
        record("gid", String(gid))
        lines.append((["groups"] + groups.map { String($0) }).joined(separator: " "))
        for limit in rlimits {
            record("rlimit", limit.name, limit.soft.map { String($0) } ?? "unlimited",
                limit.hard.map { String($0) } ?? "unlimited")
        }
        record("landlock-min-abi", String(landlock.minimumABI))
        if landlock.minimumABI > 0 {
            for rule in landlock.paths { record("landlock-fs", rule.access.rawValue, rule.path) }
            for action in landlock.restrictedTCP { record("landlock-net-restrict", action.rawValue) }
            for rule in landlock.ports {
                record("landlock-net", rule.action.rawValue, String(rule.port))
            }
            for scope in landlock.scopes { record("landlock-scope", scope.rawValue) }
        }
        record("seccomp", seccomp.required ? "required" : "optional")
        if logDenials { record("log-denials") }
        if refuseExecGain { record("mdwe") }
        if memfdNoexec { record("memfd-noexec") }
        record("chdir", workingDirectory)
        for variable in environment { record("env", "\(variable.name)=\(variable.value)") }
        record("exec", executable)
        for argument in arguments { record("arg", argument) }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Percent-encodes the bytes 0x00-0x20, `%` and 0x7F, so that a field never holds the
    /// separator or a line break, whatever a path or argument contains.
    static func escape(_ field: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(field.utf8.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in field.utf8 {
            if byte <= 0x20 || byte == 0x25 || byte == 0x7F {
                out += [0x25, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            } else {
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
