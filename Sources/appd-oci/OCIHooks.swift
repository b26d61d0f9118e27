import AppContainers
import AppdBase
import Foundation
import Glibc
import PrintableText

/// A config's hooks (runtime-spec "Lifecycle"; docs/oci-runtime.md, "Hooks"), run when runc runs
/// them — `prestart` and `createRuntime` at `create` once the sandbox is built, `poststart` after
/// `start`, `poststop` after `delete` — each with the container's state on its stdin. A hook runs
/// as the host's root, outside any sandbox, and the config comes from whoever created the
/// container: only an executable the node's appd.conf lists (`[OCI] Hooks=`) may be one, and a
/// config naming any other is refused at `create`, before anything is made. The hooks that run
/// in the container's namespaces (`createContainer`, `startContainer`) are refused: nothing of
/// the host may enter the sandbox.
enum OCIHooks {
    /// Per phase, and the arguments and environment of each: bounded as the config is.
    static let maximumPerPhase = 16
    static let maximumStrings = 256
    /// Seconds, when a hook gives none (runc waits for ever) and at most.
    static let defaultTimeout = 30
    static let maximumTimeout = 600

    /// Refuses what may not run, naming the hook and the setting.
    static func check(_ hooks: OCISpec.Hooks?, allowed: [String]) throws {
        guard let hooks else { return }
        for (phase, list) in [
            ("createContainer", hooks.createContainer), ("startContainer", hooks.startContainer),
        ] where !(list ?? []).isEmpty {
            throw AppdError(
                .unsupported,
                "config.json's \(phase) hooks would run in the container's namespaces: appd-oci runs none there"
            )
        }
        let resolvedAllowed = Set(allowed.compactMap(resolve))
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
                guard let resolved = resolve(hook.path), resolvedAllowed.contains(resolved) else {
                    throw AppdError(
                        .permissionDenied,
                        "config.json's \(phase) hook \(hook.path) is not an executable this node allows: it would run as root outside the sandbox",
                        hint:
                            "list it in appd.conf's [OCI] Hooks= if the node's engine needs it (docker's bridge network: /usr/sbin/dockerd; or run with --network none)"
                    )
                }
            }
        }
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
        _ hooks: [OCISpec.Hook], phase: String, state: [UInt8], log: OCILog, warnOnly: Bool
    ) throws {
        for hook in hooks {
            let timeout = hook.timeout ?? defaultTimeout
            let command = HostCommand(
                path: hook.path, arguments: hook.args ?? [hook.path], environment: hook.env ?? [],
                input: state, timeoutSeconds: timeout)
            let failure: String
            do {
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

    private static func resolve(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
