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

    @Test("an error names the bundle as the person gave it, never the incoming folder")
    func errorsNameWhatWasGiven() throws {
        let scratch = Scratch()
        let store = try store(scratch.path)
        let incoming = try IncomingBundle(
            store: store, name: "Broken.app", shown: "Broken.ipa:Payload/Broken.app")
        try makeBundle(at: incoming.path, id: "com.example.broken")
        unlink("\(incoming.path)/Hello")
        do {
            _ = try incoming.install(digests: try digests(of: incoming.path))
            Issue.record("a bundle without its executable was installed")
        } catch let error as AppdError {
            let text = "\(error.message) \(error.problems) \(error.hint ?? "")"
            #expect(text.contains("Broken.ipa:Payload/Broken.app"))
            #expect(!text.contains("/incoming/"))
        }
        // The daemon's: the name it was sent.
        let sent = try IncomingBundle(store: store, name: "Sent.app")
        let named = sent.naming(AppdError(.invalidBundle, "\(sent.path)/Info.plist: broken"))
        #expect(named.message == "Sent.app/Info.plist: broken")
    }
}
