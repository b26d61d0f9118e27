import AppdBase
import Testing

@testable import AppContainers
@testable import AppdConfig

@Suite("[Storage] in appd.conf")
struct StorageSettingsTests {
    static func level(_ value: String) throws -> StorageSettings.Level? {
        try AppdConfiguration.parse("[Storage]\nReclaimCachesBelow=\(value)\n", file: "t.conf")
            .storage.reclaimCachesBelow
    }

    @Test("ReclaimCachesBelow takes a share from 1% to 99% or a size; unset by default")
    func values() throws {
        #expect(AppdConfiguration().storage.reclaimCachesBelow == nil)
        #expect(try Self.level("10%") == .percent(10))
        #expect(try Self.level("2G") == .bytes(2 << 30))
        #expect(try Self.level("4096") == .bytes(4096))
    }

    @Test("a bad level is refused naming the file, line, key and what it takes")
    func refused() throws {
        for bad in ["0%", "100%", "-5%", "ten", "%", "0", "-1G", "99999999999999999999T", "1.5G"] {
            do {
                _ = try Self.level(bad)
                Issue.record("ReclaimCachesBelow=\(bad) was accepted")
            } catch let error as AppdError {
                #expect(error.code == .invalidConfig)
                #expect(error.message.contains("t.conf:2: [Storage] ReclaimCachesBelow=\(bad)"))
                #expect(error.message.contains("1% to 99%"), "\(error.message)")
            }
        }
        #expect(throws: AppdError.self) {
            try AppdConfiguration.parse("[Storage]\nReclaimCaches=10%\n", file: "t.conf")
        }
    }

    @Test(
        "BackupMaxBytes takes a size; unset by default; the signers' HostExecutables absolute paths"
    )
    func backupCapAndHostExecutables() throws {
        #expect(AppdConfiguration().storage.backupMaxBytes == nil)
        let parsed = try AppdConfiguration.parse(
            "[Storage]\nBackupMaxBytes=4G\n[Signing]\nUnsignedHostExecutables=/usr/bin/*\n"
                + "[Signer dev]\nKey=ed25519:\(String(repeating: "A", count: 43))=\n"
                + "HostExecutables=/usr/bin/python3 /opt/tools/*\n",
            file: "t.conf")
        #expect(parsed.storage.backupMaxBytes == 4 << 30)
        #expect(parsed.signing.unsignedHostExecutables == ["/usr/bin/*"])
        #expect(
            parsed.signing.signers.first?.hostExecutables == ["/usr/bin/python3", "/opt/tools/*"])
        for bad in [
            "[Storage]\nBackupMaxBytes=lots\n", "[Storage]\nBackupMaxBytes=0\n",
            "[Signing]\nUnsignedHostExecutables=python3\n",
        ] {
            #expect(throws: AppdError.self, "\(bad)") {
                try AppdConfiguration.parse(bad, file: "t.conf")
            }
        }
    }

    @Test("the level compares without overflow: a share of a huge filesystem, bytes")
    func comparison() {
        let space = FreeSpace(availableBytes: 10 << 20, totalBytes: 100 << 20)
        #expect(StorageSettings.Level.percent(10).isAbove(space))
        #expect(!StorageSettings.Level.percent(11).isAbove(space))
        #expect(StorageSettings.Level.bytes(10 << 20).isAbove(space))
        #expect(!StorageSettings.Level.bytes((10 << 20) + 1).isAbove(space))
        let huge = FreeSpace(availableBytes: .max / 2, totalBytes: .max)
        #expect(!StorageSettings.Level.percent(99).isAbove(huge))
        #expect(StorageSettings.Level.percent(49).isAbove(huge))
    }
}
