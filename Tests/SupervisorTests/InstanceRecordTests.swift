import AppdAPI
import Foundation
import Glibc
import Testing

@testable import Supervisor

/// The instance record across versions: what an older daemon wrote is read, and re-adopted, by
/// this one (an upgrade keeps the running instances); what this one writes is its own format,
/// which names its version.
@Suite("instance records: version 1 read and re-adopted, version 2 written")
struct InstanceRecordTests {
    /// Records written by the daemon before the versioned format (main at ae0e105), encoded by
    /// its own `InstanceRecord` and APICoding.
    static func fixture(_ name: String) throws -> String {
        // Tests/SupervisorTests/InstanceRecordTests.swift → Tests/Fixtures/instance-records
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(
                "Fixtures/instance-records/v1-\(name).json")
        return try String(contentsOf: url, encoding: .utf8)
    }

    /// A store holding `texts` as its records, by id.
    static func withRecords(_ texts: [String: String], _ body: (RecordStore) throws -> Void) throws
    {
        try RecordStoreTests.withStore { store in
            for (id, text) in texts {
                try Data(text.utf8).write(to: URL(fileURLWithPath: store.recordPath(id)))
            }
            try body(store)
        }
    }

    static func date(_ seconds: Double) -> Date { Date(timeIntervalSince1970: seconds) }

    @Test("a version 1 record reads back as the instance it describes, every field")
    func readsVersion1() throws {
        try Self.withRecords([
            "0a1b2c3d4e5f": Self.fixture("background"), "ffeeddccbbaa": Self.fixture("exited"),
        ]) { store in
            let loaded = store.loadAll()
            #expect(loaded.unreadable.isEmpty)
            let running = try #require(loaded.records.first { $0.id == "0a1b2c3d4e5f" })
            #expect(running.app == "com.example.upgrade")
            #expect(running.state == .background)
            #expect(running.pid == 4242)
            #expect(running.pidStartTime == 987_654)
            #expect(running.uid == 2_000_000_007)
            #expect(running.arguments == ["--flag", "value with spaces"])
            #expect(running.launchedBy == 1000)
            #expect(running.startedAt == Self.date(1_764_150_000.25))
            #expect(
                running.cgroupPath
                    == "/sys/fs/cgroup/appd.slice/app-com.example.upgrade/0a1b2c3d4e5f")
            #expect(running.log == "/var/lib/appd/logs/com.example.upgrade/0a1b2c3d4e5f.log")
            #expect(running.channel == .ready)
            #expect(running.backgroundTasks == 1)
            #expect(running.backgroundModes == ["audio"])
            #expect(running.stateSince == Self.date(1_764_150_060.5))
            #expect(running.lastActiveAt == Self.date(1_764_150_030.125))
            #expect(running.service == true)
            #expect(running.version == "1.2.3")
            #expect(running.outdated == true)
            #expect(running.request == .terminate)
            #expect(running.graceDeadline == Self.date(1_764_150_070))
            #expect(running.requestMessage == "asked by uid 1000")
            #expect(running.bundle == "5F0E1A2B-0000-4000-8000-00000000ABCD")
            let exited = try #require(loaded.records.first { $0.id == "ffeeddccbbaa" })
            #expect(exited.state == .exited)
            #expect(exited.endedAt == Self.date(1_764_140_100.75))
            #expect(
                exited.exit
                    == APIExit(
                        reason: .killedAfterGrace, signal: 9, message: "grace period of 5 s ran out"
                    ))
            #expect(exited.request == .killAfterGrace)
            #expect(exited.channel == .closed)
            #expect(exited.cgroupPath == nil)
        }
    }

    @Test(
        "re-adoption from a version 1 record: the same launcher is watched again, its channel closed, its tasks gone"
    )
    func readoptsVersion1() throws {
        // The fixture's launcher made this test process: its pid and start time.
        let pid = getpid()
        let started = try #require(ProcessInfoReader.startTime(of: pid))
        let text = try Self.fixture("background")
            .replacingOccurrences(of: "\"pid\":4242", with: "\"pid\":\(pid)")
            .replacingOccurrences(
                of: "\"pidStartTime\":987654", with: "\"pidStartTime\":\(started)")
        #expect(text.contains("\"pid\":\(pid)") && text.contains("\"pidStartTime\":\(started)"))
        try Self.withRecords(["0a1b2c3d4e5f": text, "ffeeddccbbaa": Self.fixture("exited")]) {
            store in
            let loaded = store.loadAll()
            let record = try #require(loaded.records.first { $0.id == "0a1b2c3d4e5f" })
            #expect(
                InstanceLifecycle.adoption(
                    of: record, launcherStartTime: ProcessInfoReader.startTime(of: pid))
                    == .watch(pid))
            let adopted = InstanceLifecycle.adopted(record)
            #expect(adopted.state == .background)
            #expect(adopted.channel == .closed)
            #expect(adopted.backgroundTasks == 0)
            #expect(adopted.graceDeadline == Self.date(1_764_150_070))
            // Another process under the pid (the launcher ended, the pid was reused): closed.
            #expect(
                InstanceLifecycle.adoption(of: record, launcherStartTime: started + 1)
                    == .closeAsEnded)
            #expect(InstanceLifecycle.adoption(of: record, launcherStartTime: nil) == .closeAsEnded)
            let exited = try #require(loaded.records.first { $0.id == "ffeeddccbbaa" })
            #expect(InstanceLifecycle.adoption(of: exited, launcherStartTime: nil) == .keepExited)
            #expect(InstanceLifecycle.adopted(exited).channel == .closed)
        }
    }

    @Test(
        "an upgraded record is saved as version 2, in the record's own fields, and reads back the same"
    )
    func writesVersion2() throws {
        try Self.withRecords([
            "0a1b2c3d4e5f": Self.fixture("background"), "ffeeddccbbaa": Self.fixture("exited"),
        ]) { store in
            let before = store.loadAll().records
            for instance in before { try store.save(instance) }
            let text = try String(contentsOfFile: store.recordPath("0a1b2c3d4e5f"), encoding: .utf8)
            #expect(text.contains("\"version\":2"))
            #expect(!text.contains("\"instance\""), "not the API's type nested")
            #expect(text.contains("\"appVersion\":\"1.2.3\""))
            let after = store.loadAll()
            #expect(after.unreadable.isEmpty)
            for old in before {
                let new = try #require(after.records.first { $0.id == old.id })
                #expect(new.api == old.api)
                #expect(new.pidStartTime == old.pidStartTime)
                #expect(new.request == old.request)
                #expect(new.graceDeadline == old.graceDeadline)
                #expect(new.requestMessage == old.requestMessage)
                #expect(new.bundle == old.bundle)
            }
        }
    }

    @Test(
        "a record of a version, state or exit reason this daemon does not know is unreadable, not guessed"
    )
    func unknownWordsRefused() throws {
        try Self.withRecords(["0a1b2c3d4e5f": Self.fixture("background")]) { store in
            let instance = try #require(store.loadAll().records.first)
            try store.save(instance)
        }
        var record = InstanceRecord(
            Instance(
                id: "aaaaaaaaaaaa", app: "com.example.words", uid: 2_000_000_001, arguments: [],
                launchedBy: 0, startedAt: Self.date(1_700_000_000), log: "/x.log", state: .active))
        #expect(throws: Never.self) {
            try InstanceRecord.decode(APICoding.encoder().encode(record))
        }
        var future = record
        future.version = 3
        #expect(throws: InstanceRecord.UnknownWord.self) {
            try InstanceRecord.decode(APICoding.encoder().encode(future))
        }
        record.state = "zombie"
        #expect(throws: InstanceRecord.UnknownWord.self) {
            try InstanceRecord.decode(APICoding.encoder().encode(record))
        }
        record.state = "exited"
        record.exit = .init(reason: "vanished")
        #expect(throws: InstanceRecord.UnknownWord.self) {
            try InstanceRecord.decode(APICoding.encoder().encode(record))
        }
    }

    @Test("the record's words are its own and name every state, exit reason and channel state once")
    func wordsRoundTrip() {
        let states = InstanceState.allCases.map(InstanceRecord.word)
        #expect(Set(states).count == InstanceState.allCases.count)
        let reasons = ExitReason.allCases.map(InstanceRecord.word)
        #expect(Set(reasons).count == ExitReason.allCases.count)
        let channels = InstanceRecord.channelStates.map(InstanceRecord.word)
        #expect(Set(channels).count == 4)
    }
}
