import AppContainers
import AppdBase
import AppdConfig
import Foundation
import Glibc

/// Who is on the other end of a connection, as the kernel reported it when it connected
/// (SO_PEERCRED). Nothing the client sends changes this.
public struct Caller: Sendable, Equatable {
    public var uid: uid_t
    public var gid: gid_t
    public var pid: pid_t

    public init(uid: uid_t, gid: gid_t, pid: pid_t) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
    }
}

/// What a caller may do; each implies the ones before it.
public enum Right: String, Sendable, Comparable, CaseIterable {
    case read, control, admin

    public static func < (a: Right, b: Right) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }

    var verb: String {
        switch self {
        case .read: "list apps and instances"
        case .control: "launch or control apps"
        case .admin: "install or uninstall apps"
        }
    }

    var configKey: String {
        switch self {
        case .read: "ReadAllowed"
        case .control: "ControlAllowed"
        case .admin: "AdminAllowed"
        }
    }
}

/// Decides rights from `[API]`. Group membership is the caller's primary gid (SO_PEERCRED)
/// plus the groups the user database gives its user (getgrouplist), the way sudo and polkit
/// read `@group`: a process that dropped a supplementary group is still its user's member.
public struct Authorizer: Sendable {
    public var settings: APISettings

    public init(settings: APISettings) { self.settings = settings }

    public func rights(of caller: Caller) -> [Right] {
        if caller.uid == 0 { return Right.allCases }
        let identity = Identity(caller)
        let lists = [settings.readAllowed, settings.controlAllowed, settings.adminAllowed]
        // The highest right granted brings the lower ones along.
        guard
            let highest = Array(zip(Right.allCases, lists)).last(where: { identity.matches($0.1) })?
                .0
        else { return [] }
        return Right.allCases.filter { $0 <= highest }
    }

    public func check(_ caller: Caller, _ right: Right) throws {
        guard rights(of: caller).contains(right) else {
            let list = [settings.readAllowed, settings.controlAllowed, settings.adminAllowed][
                Right.allCases.firstIndex(of: right)!]
            throw AppdError(
                .permissionDenied,
                "uid \(caller.uid) may not \(right.verb): [API] \(right.configKey)=\(list.description.isEmpty ? "(root only)" : list.description) in appd.conf",
                hint: "ask an admin to add you to one of those groups, or use sudo")
        }
    }

    /// The caller's user name and groups, read once per check.
    struct Identity {
        var user: String?
        var gids: Set<gid_t>

        init(_ caller: Caller) {
            gids = [caller.gid]
            guard let entry = getpwuid(caller.uid), let name = entry.pointee.pw_name else { return }
            user = String(cString: name)
            var count: Int32 = 64
            var list = [gid_t](repeating: 0, count: Int(count))
            if getgrouplist(name, caller.gid, &list, &count) < 0 {
                list = [gid_t](repeating: 0, count: Int(count))
                _ = getgrouplist(name, caller.gid, &list, &count)
            }
            gids.formUnion(list.prefix(Int(max(0, count))))
        }

        func matches(_ list: AccessList) -> Bool {
            if list.everyone { return true }
            if let user, list.users.contains(user) { return true }
            return list.groups.contains { name in
                guard let group = getgrnam(name) else { return false }
                return gids.contains(group.pointee.gr_gid)
            }
        }
    }
}
