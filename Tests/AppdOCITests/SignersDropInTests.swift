import Foundation
import Glibc
import TestSupport
import Testing

/// Trust a fleet can ship as files (issue 37): `[Signer]` sections in `signers.d/*.conf` beside
/// appd.conf, as a ConfigMap or config management would place them, decide an appd-oci
/// `create` exactly as appd.conf's own; a drop-in cannot change anything but signers.
@Suite("appd-oci: [Signer] drop-ins in signers.d", .serialized, rootOnly)
struct SignersDropInTests {
    /// The image's appd.conf (its `[Signer test]`) moved to `signers.d/test.conf`, appd.conf
    /// left with `rest`.
    static func moveSigner(_ image: AppImageRunTests.Image, rest: String = "") throws {
        let conf = "\(image.directory)/appd.conf"
        let signer = try String(contentsOfFile: conf, encoding: .utf8)
        try FileManager.default.createDirectory(
            atPath: "\(image.directory)/signers.d", withIntermediateDirectories: true)
        try signer.write(
            toFile: "\(image.directory)/signers.d/test.conf", atomically: true, encoding: .utf8)
        try rest.write(toFile: conf, atomically: true, encoding: .utf8)
    }

    @Test("a signer only in signers.d/ trusts the image: it runs")
    func signerFromDropIn() throws {
        let image = try AppImageRunTests.Image()
        defer { image.remove() }
        try Self.moveSigner(image)
        let result = try image.run()
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout == "hello from the app\n", "\(result.stdout)")
    }

    @Test("without the drop-in the same image is refused (the signer is not trusted)")
    func noDropIn() throws {
        let image = try AppImageRunTests.Image()
        defer { image.remove() }
        try Self.moveSigner(image)
        unlink("\(image.directory)/signers.d/test.conf")
        let result = try image.run()
        #expect(result.code != 0)
        #expect(!result.stdout.contains("hello"), "\(result.stdout)")
        image.expectNothingLeft()
    }

    @Test("attack: a drop-in that sets [Signing] AllowUnsigned=yes is refused, naming the line")
    func onlySigners() throws {
        let image = try AppImageRunTests.Image()
        defer { image.remove() }
        try Self.moveSigner(image)
        try "[Signing]\nAllowUnsigned=yes\n".write(
            toFile: "\(image.directory)/signers.d/zz-open.conf", atomically: true,
            encoding: .utf8)
        let result = try image.run()
        #expect(result.code != 0)
        #expect(
            result.stderr.contains("zz-open.conf:1: [Signing] does not belong in signers.d"),
            "\(result.stderr)")
        image.expectNothingLeft()
    }

    @Test("a signer named twice (appd.conf and a drop-in) is refused")
    func duplicateName() throws {
        let image = try AppImageRunTests.Image()
        defer { image.remove() }
        let conf = try String(contentsOfFile: "\(image.directory)/appd.conf", encoding: .utf8)
        try Self.moveSigner(image, rest: conf)
        let result = try image.run()
        #expect(result.code != 0)
        #expect(result.stderr.contains("[Signer test] is also in appd.conf"), "\(result.stderr)")
    }
}
