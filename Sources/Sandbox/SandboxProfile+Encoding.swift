import LauncherProtocol

/// The text `appd-exec` reads on its profile fd (docs/launcher-protocol.md, version 1); the
/// records, their names and the field encoding are LauncherProtocol's, which the launcher
/// parses with.
extension SandboxProfile {
    public static let formatHeader = ProfileFormat.header

    public func encoded() -> String {
        var lines = [Self.formatHeader]
        func record(_ kind: ProfileRecord, _ fields: String...) {
            lines.append(ProfileField.record(kind, fields))
        }
        func octal(_ mode: UInt32?) -> String { String(mode ?? 0o755, radix: 8) }

        for path in cgroupProcs { record(.cgroup, path) }
        for path in relayCgroupProcs { record(.relayCgroup, path) }
        if !namespaces.isEmpty {
            lines.append(ProfileField.record(.unshare, namespaces.map(\.rawValue)))
        }
        if namespaces.contains(.uts) { record(.hostname, hostname) }
        if loopback { record(.loopback) }
        if let imageRoot {
            var fields = [
                ProfileFormat.imageRoot, imageRoot.source, imageRoot.readOnly ? "ro" : "rw",
            ]
            if imageRoot.owned == true { fields.append(ProfileFormat.ownedRoot) }
            lines.append(ProfileField.record(.root, fields))
        } else {
            record(.root, ProfileFormat.tmpfsRoot)
        }
        for mount in mounts {
            let fields = mount.kind.layout.map { field in
                switch field {
                case .source, .target: mount.source ?? ""
                case .destination: mount.destination
                case .mode: octal(mount.mode)
                case .content: mount.content ?? ""
                case .fsType: mount.fsType ?? ""
                case .options: mount.options ?? ""
                }
            }
            lines.append(ProfileField.record(.mount, [mount.kind.rawValue] + fields))
        }
        for sysctl in sysctls ?? [] { record(.sysctl, sysctl.name, sysctl.value) }
        if console { record(.console) }
        record(.uid, String(uid))
        record(.gid, String(gid))
        lines.append(ProfileField.record(.groups, groups.map { String($0) }))
        if let userNamespace {
            record(
                .userns, String(userNamespace.hostUID), String(userNamespace.hostGID),
                String(userNamespace.count))
        }
        if let capabilities {
            let sets: [(ProfileCapabilitySet, [String])] = [
                (.bounding, capabilities.bounding), (.effective, capabilities.effective),
                (.permitted, capabilities.permitted), (.inheritable, capabilities.inheritable),
                (.ambient, capabilities.ambient),
            ]
            for (set, names) in sets {
                lines.append(ProfileField.record(.capabilities, [set.rawValue] + names))
            }
        }
        if newPrivileges == true { record(.newPrivileges) }
        for limit in rlimits {
            record(
                .rlimit, limit.name, limit.soft.map { String($0) } ?? ProfileFormat.unlimited,
                limit.hard.map { String($0) } ?? ProfileFormat.unlimited)
        }
        record(.landlockMinABI, String(landlock.minimumABI))
        if landlock.minimumABI > 0 {
            for rule in landlock.paths { record(.landlockFS, rule.access.rawValue, rule.path) }
            for action in landlock.restrictedTCP { record(.landlockNetRestrict, action.rawValue) }
            for rule in landlock.ports {
                record(.landlockNet, rule.action.rawValue, String(rule.port))
            }
            for scope in landlock.scopes { record(.landlockScope, scope.rawValue) }
        }
        record(
            .seccomp,
            seccomp.required ? ProfileFormat.seccompRequired : ProfileFormat.seccompOptional)
        if logDenials { record(.logDenials) }
        if refuseExecGain { record(.mdwe) }
        if memfdNoexec { record(.memfdNoexec) }
        record(.chdir, workingDirectory)
        for variable in environment { record(.env, "\(variable.name)=\(variable.value)") }
        record(.exec, executable)
        for argument in arguments { record(.arg, argument) }
        return lines.joined(separator: "\n") + "\n"
    }
}
