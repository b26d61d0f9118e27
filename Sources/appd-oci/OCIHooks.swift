import AppdBase
import AppdConfig
import CLinux
import Foundation
import Glibc
import PrintableText

/// A config's hooks (runtime-spec "Lifecycle"; docs/oci-runtime.md, "Hooks"), run when runc runs
/// them — `prestart` and `createRuntime` at `create` once the sandbox is built, `poststart` after
/// `start`, `poststop` after `delete` — each with the container's state on its stdin. A hook runs
/// as the host's root, outside any sandbox, and the config comes from whoever created the
/// container: it runs only as appd.conf's `[OCI] Hooks=` allows (`HookRule`): an executable
/// listed there (the same file: device and inode, once the hook's path is opened), called with
/// the `args[0]` the entry names and given only the variables it lists. A config asking any
/// other is refused at `create`, before anything is made. Each hook is checked again when it
/// runs (the poststart and poststop ones kept in state.json too, against appd.conf as it is
/// then), and executed through the very fd that was checked (`/proc/self/fd/N`, glibc's
/// fexecve), never by its path resolved again. The hooks that run in the container's namespaces
/// (`createContainer`, `startContainer`) are refused: nothing of the host may enter the sandbox.
enum OCIHooks {
    /// Per phase, and the arguments and environment of each: bounded as the config is.
    static let maximumPerPhase = 16
    static let maximumStrings = 256
    /// Bytes of one argument or variable.
    static let maximumStringBytes = 4096
    /// Seconds, when a hook gives none (runc waits for ever) and at most.
    static let defaultTimeout = 30
    static let maximumTimeout = 600

    /// Refuses what may not run, naming the hook and the setting.
    static func check(_ hooks: OCISpec.Hooks?, allowed: [HookRule]) throws {
        guard let hooks else { return }
        for (phase, list) in [
            ("createContainer", hooks.createContainer), ("startContainer", hooks.startContainer),
        ] where !(list ?? []).isEmpty {
            throw AppdError(
                .unsupported,
                "config.json's \(phase) hooks would run in the container's namespaces: appd-oci runs none there"
            )
        }
        for (phase, list) in phases(hooks) {
            guard list.count <= maximumPerPhase else {
                throw AppdError(
                    .invalidConfig,
                    "config.json has \(list.count) \(phase) hooks, more than \(maximumPerPhase)")
            }
            for hook in list {
                guard hook.path.hasPrefix("/") else {
                    throw AppdError(
                        .invalidConfig, "config.json's \(phase) hook \(hook.path) is not absolute")
                }
                guard (hook.args?.count ?? 0) <= maximumStrings,
                    (hook.env?.count ?? 0) <= maximumStrings
                else {
                    throw AppdError(
                        .invalidConfig,
                        "config.json's \(phase) hook \(hook.path) has more than \(maximumStrings) arguments or variables"
                    )
                }
                if let timeout = hook.timeout, !(1...maximumTimeout).contains(timeout) {
                    throw AppdError(
                        .invalidConfig,
                        "config.json's \(phase) hook \(hook.path) has a timeout of \(timeout) s; 1-\(maximumTimeout) s"
                    )
                }
                close(try authorize(hook, phase: phase, allowed: allowed))
            }
        }
    }

    /// Opens the hook's executable and checks it, its arguments and its environment against
    /// `allowed`: the fd (close-on-exec, above 10) that `run` executes, or a one-line refusal.
    static func authorize(_ hook: OCISpec.Hook, phase: String, allowed: [HookRule]) throws
        -> Int32
    {
        let name = "config.json's \(phase) hook \(hook.path)"
        let setting = "appd.conf's [OCI] Hooks="
        let opened = open(hook.path, appd_o_path() | O_CLOEXEC)
        let fd = opened >= 0 ? fcntl(opened, F_DUPFD_CLOEXEC, 10) : -1
        if opened >= 0 { close(opened) }
        guard fd >= 0 else {
            throw AppdError(
                .permissionDenied,
                "\(name) is not an executable this node allows: it would run as root outside the sandbox",
                hint:
                    "list it in \(setting) if the node's engine needs it (docker's bridge network: /usr/sbin/dockerd:libnetwork-setkey; or run with --network none)"
            )
        }
        do {
            var info = stat()
            guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
                throw AppdError(.permissionDenied, "\(name) is not a regular file")
            }
            let rules = allowed.filter { rule in
                var listed = stat()
                return stat(rule.path, &listed) == 0 && listed.st_dev == info.st_dev
                    && listed.st_ino == info.st_ino
            }
            guard !rules.isEmpty else {
                throw AppdError(
                    .permissionDenied,
                    "\(name) is not an executable this node allows: it would run as root outside the sandbox",
                    hint:
                        "list it in \(setting) if the node's engine needs it (docker's bridge network: /usr/sbin/dockerd:libnetwork-setkey; or run with --network none)"
                )
            }
            let arguments = hook.args ?? []
            for text in arguments + (hook.env ?? [])
            where text.utf8.count > maximumStringBytes || text.utf8.contains(0) {
                throw AppdError(
                    .invalidConfig,
                    "\(name) has an argument or variable longer than \(maximumStringBytes) bytes or holding NUL"
                )
            }
            func lastComponent(_ path: String) -> String {
                String(path.split(separator: "/").last ?? "")
            }
            let callable = rules.filter { rule in
                guard let first = arguments.first else { return rule.argv0 == nil }
                if rule.argv0 == "*" { return true }
                if let argv0 = rule.argv0 { return first == argv0 }
                return [hook.path, rule.path, lastComponent(hook.path), lastComponent(rule.path)]
                    .contains(first)
            }
            guard !callable.isEmpty else {
                let wanted = rules.map { $0.argv0 ?? $0.path }.joined(separator: " or ")
                throw AppdError(
                    .permissionDenied,
                    "\(name) is called as '\(arguments.first ?? "")', not as \(setting) allows it (\(wanted))"
                )
            }
            for variable in hook.env ?? [] {
                let variableName = String(variable.prefix { $0 != "=" })
                guard callable.contains(where: { $0.environment.contains(variableName) }) else {
                    throw AppdError(
                        .permissionDenied,
                        "\(name) may not be given the variable \(variableName): \(setting) does not list it for that hook (PATH:ARGV0:NAME,NAME)"
                    )
                }
            }
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// The phases appd-oci runs, in the spec's order.
    static func phases(_ hooks: OCISpec.Hooks) -> [(String, [OCISpec.Hook])] {
        [
            ("prestart", hooks.prestart ?? []), ("createRuntime", hooks.createRuntime ?? []),
            ("poststart", hooks.poststart ?? []), ("poststop", hooks.poststop ?? []),
        ]
    }

    /// Runs `hooks` in order, `state` on each one's stdin. The first that fails (an exit status
    /// other than 0, a signal, its timeout) ends it: thrown with its output's first line, or
    /// only logged (`warnOnly`: poststart and poststop, whose failure the spec makes a
    /// warning, and the rest still run).
    static func run(
        _ hooks: [OCISpec.Hook], phase: String, state: [UInt8], allowed: [HookRule], log: OCILog,
        warnOnly: Bool
    ) throws {
        for hook in hooks {
            let timeout = hook.timeout ?? defaultTimeout
            let failure: String
            do {
                // Checked again now, and run by the fd that was checked.
                let executable = try authorize(hook, phase: phase, allowed: allowed)
                defer { close(executable) }
                var command = HostCommand(
                    path: hook.path, arguments: hook.args ?? [hook.path],
                    environment: hook.env ?? [], input: state, timeoutSeconds: timeout)
                command.executable = executable
                let result = try command.run()
                if result.status == 0 && !result.timedOut { continue }
                // What the hook printed is its own: shown escaped, its first line only.
                let first = result.output.split(separator: "\n").first.map {
                    ": \(Printable(String($0)))"
                }
                failure =
                    "the \(phase) hook \(hook.path) failed (\(result.describe(timeout: timeout)))"
                    + (first ?? "")
            } catch let error as AppdError {
                failure = "the \(phase) hook \(hook.path) could not run: \(error.message)"
            }
            if warnOnly {
                log.warning(failure)
            } else {
                throw AppdError(.unsupported, failure)
            }
        }
    }

    /// The state a hook reads (runtime-spec "State").
    static func state(
        id: String, status: String, pid: pid_t, bundle: String, annotations: [String: String]
    ) -> [UInt8] {
        let object: [String: Any] = [
            "ociVersion": OCIRuntime.specVersion, "id": id, "status": status, "pid": Int(pid),
            "bundle": bundle, "annotations": annotations,
        ]
        return
            (try? JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])).map(
                Array.init)
            ?? []
    }
}
