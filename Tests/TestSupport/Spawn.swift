import CLinux
import Foundation
import Glibc

/// posix_spawn of `executable` with exactly `arguments` (argv[0] included) and `environment`,
/// fds 0-2 and the `placed` ones (the child's number: the parent's fd) and nothing else: tests
/// run side by side, and a child holding another test's pipe keeps that test from its EOF.
public func spawnPlaced(
    _ executable: String, arguments: [String], environment: [String],
    placing placed: [(child: Int32, parent: Int32)] = []
) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    for fd in placed { posix_spawn_file_actions_adddup2(&actions, fd.parent, fd.child) }
    appd_spawn_closefrom(&actions, max(2, placed.map(\.child).max() ?? 2) + 1)
    var cArgs = arguments.map { strdup($0) } + [nil]
    var cEnv = environment.map { strdup($0) } + [nil]
    defer { for pointer in cArgs + cEnv { free(pointer) } }
    var pid: pid_t = 0
    let result = posix_spawn(&pid, executable, &actions, nil, &cArgs, &cEnv)
    guard result == 0 else { throw SpawnFailure(executable: executable, errno: result) }
    return pid
}

public struct SpawnFailure: Error, CustomStringConvertible {
    public let executable: String
    public let errno: Int32
    public var description: String {
        "posix_spawn \(executable): \(String(cString: strerror(errno)))"
    }
}
