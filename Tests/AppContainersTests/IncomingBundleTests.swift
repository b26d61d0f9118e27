import AppdBase
import Foundation
import Testing

@testable import AppContainers

/// The one install sequence for archives (the daemon's and `appd install --no-daemon`'s).
@Suite("IncomingBundle: extracted into incoming/, installed from there", .serialized, rootOnly)
struct IncomingBundleTests {
    @Test("the tree written into its path is installed, and its folder goes with it")
    func installs() throws {
        let scratch = Scratch()
        let store = try store(scratch.path)
        var folder = ""
        do {
            let incoming = try IncomingBundle(store: store, name: "Hello.app")
            folder = incoming.folder
            #expect(incoming.path == "\(folder)/Hello.app")
            #expect(folder.hasPrefix("\(scratch.path)/incoming/"))
            try makeBundle(at: incoming.path, id: "com.example.incoming")
            let result = try incoming.install(digests: try digests(of: incoming.path))
            #expect(result.app.bundleID == "com.example.incoming")
        }
        #expect(access(folder, F_OK) != 0)
        #expect(entries("\(scratch.path)/incoming").isEmpty)
    }

    /// The error of installing a bundle without its executable from `incoming`.
    func refusal(_ incoming: IncomingBundle, id: String) throws -> AppdError? {
        try makeBundle(at: incoming.path, id: id)
        unlink("\(incoming.path)/Hello")
        do {
            _ = try incoming.install(digests: try digests(of: incoming.path))
        } catch let error as AppdError {
            return error
        }
        Issue.record("a bundle without its executable was installed")
        return nil
    }

    @Test("an error names the bundle as the person gave it, never the incoming folder")
    func errorsNameWhatWasGiven() throws {
        let scratch = Scratch()
        let store = try store(scratch.path)
        let incoming = try IncomingBundle(
            store: store, name: "Broken.app", shown: "Broken.ipa:Payload/Broken.app")
        // The bundle is the subject, shown here as the person gave it; the folder is in no
        // text, so there is nothing to take out of one.
        let error = try refusal(incoming, id: "com.example.broken")
        #expect(error?.subject == .init(.bundle, view: "Broken.ipa:Payload/Broken.app"))
        let text = error.map { "\($0)" } ?? ""
        #expect(text.hasPrefix("Broken.ipa:Payload/Broken.app: "), "\(text)")
        #expect(!text.contains("/incoming/"), "\(text)")
        // What the daemon sends: the subject without this side's view of it.
        let sent = try refusal(IncomingBundle(store: store, name: "Sent.app"), id: "com.x.sent")
        let wire = try JSONEncoder().encode(sent)
        #expect(!String(decoding: wire, as: UTF8.self).contains("incoming"))
        #expect(try JSONDecoder().decode(AppdError.self, from: wire).subject == .init(.bundle))
    }
}
