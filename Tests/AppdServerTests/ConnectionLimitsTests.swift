import AppContainers
import AppdBase
import Foundation
import Testing

@testable import AppdConfig
@testable import AppdServer

@Suite("[API] connection limits: the policy")
struct ConnectionLimitsTests {
    static func limits(privileged: Set<uid_t> = []) -> ConnectionLimits {
        var settings = APISettings()
        settings.maxConnections = 10
        settings.reservedConnections = 3
        settings.maxConnectionsPerUser = 4
        settings.maxStreamsPerUser = 2
        return ConnectionLimits(settings: settings) { privileged.contains($0.uid) }
    }

    static func caller(_ uid: uid_t) -> Caller { Caller(uid: uid, gid: uid, pid: 1) }

    static func status(_ admission: ConnectionLimits.Admission) -> Int {
        switch admission {
        case .admitted: 200
        case .refused(let failure): failure.code.httpStatus
        case .dropped: 0
        }
    }

    @Test("a user past its own cap gets 429 naming the setting; its release makes room again")
    func perUser() {
        let limits = Self.limits()
        for _ in 0..<4 { #expect(Self.status(limits.admit(Self.caller(1000))) == 200) }
        guard case .refused(let failure) = limits.admit(Self.caller(1000)) else {
            Issue.record("a fifth connection was not refused")
            return
        }
        limits.refused()
        #expect(failure.code.httpStatus == 429)
        #expect(failure.message.contains("MaxConnectionsPerUser=4"))
        #expect(failure.hint != nil)
        limits.release(Self.caller(1000))
        #expect(Self.status(limits.admit(Self.caller(1000))) == 200)
    }

    @Test(
        "the reserve: others get 503 at MaxConnections - ReservedConnections; the admin group gets the rest, then 503 too; root is never refused"
    )
    func reserve() {
        let limits = Self.limits(privileged: [1500])
        for uid: uid_t in [1001, 1002] {
            for _ in 0..<(uid == 1001 ? 4 : 3) {
                #expect(Self.status(limits.admit(Self.caller(uid))) == 200)
            }
        }
        #expect(Self.status(limits.admit(Self.caller(1003))) == 503)
        limits.refused()
        // An admin into the reserve, up to the total.
        for _ in 0..<3 { #expect(Self.status(limits.admit(Self.caller(1500))) == 200) }
        #expect(Self.status(limits.admit(Self.caller(1500))) == 503)
        limits.refused()
        #expect(limits.counts.connections == 10)
        // root past every cap.
        for _ in 0..<6 { #expect(Self.status(limits.admit(Self.caller(0))) == 200) }
        #expect(limits.counts.connections == 16)
    }

    @Test("refusals under way are bounded: past them a connection is dropped unanswered")
    func refusalsBounded() {
        let limits = Self.limits()
        for _ in 0..<4 { _ = limits.admit(Self.caller(1000)) }
        for _ in 0..<ConnectionLimits.maxRefusing {
            #expect(Self.status(limits.admit(Self.caller(1000))) == 429)
        }
        #expect(Self.status(limits.admit(Self.caller(1000))) == 0)
        limits.refused()
        #expect(Self.status(limits.admit(Self.caller(1000))) == 429)
    }

    @Test(
        "stream slots: MaxStreamsPerUser for users, none for root; a slot is given back when it goes away"
    )
    func streams() throws {
        let limits = Self.limits()
        var slots = [
            try limits.openStream(Self.caller(1000)), try limits.openStream(Self.caller(1000)),
        ]
        #expect(throws: AppdError.self) { try limits.openStream(Self.caller(1000)) }
        for _ in 0..<5 { slots.append(try limits.openStream(Self.caller(0))) }
        slots.removeFirst()
        #expect(throws: Never.self) { _ = try limits.openStream(Self.caller(1000)) }
    }
}
