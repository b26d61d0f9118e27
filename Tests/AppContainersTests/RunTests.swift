import Foundation
import Testing

/// `appd run`: the in-process launch, without the daemon.
@Suite("appd run", .serialized, rootOnly)
struct RunTests {
    @Test("--json reports how the app ended as the API and appctl ps do: reason and code")
    func jsonExit() throws {
        // appd run puts its cgroups under /appd in each hierarchy; what this test made there goes.
        let made = DaemonProcess.cgroupHierarchies.filter {
            !FileManager.default.fileExists(atPath: "\($0)/appd")
        }
        defer { for hierarchy in made { DaemonProcess.removeCgroup("\(hierarchy)/appd") } }
        let scratch = Scratch()
        let root = scratch.sub("root")
        // A shell script: it names the host's shell and the program it runs.
        let bundle = try makeBundle(
            at: scratch.sub("src/Hello.app"), hostExecutables: ["/bin/sh", "/usr/bin/readlink"])
        try "#!/bin/sh\nreadlink /proc/self/fd/1\necho leaving\nexit 3\n".write(
            toFile: "\(bundle)/Hello", atomically: false, encoding: .utf8)
        #expect(try runAppd(["install", "--no-daemon", "--root", root, bundle]).status == 0)
        let started = Date()
        let run = try runAppd(["run", "--root", root, "--json", "com.example.hello"])
        // The relay ends with the app: appd run does not wait out the launcher's 5 s bound.
        #expect(Date().timeIntervalSince(started) < 4)
        #expect(run.status == 3, "\(run.stderr)")
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any],
            "\(run.stdout)")
        let exit = try #require(object["exit"] as? [String: Any], "\(run.stdout)")
        #expect(exit["reason"] as? String == "exited")
        #expect(exit["code"] as? Int == 3)
        #expect(object["bundleId"] as? String == "com.example.hello")
        // Its output went through a pipe (never a host file the app could truncate or grow)
        // into the log the relay wrote.
        let logPath = try #require(object["log"] as? String)
        let log = try String(contentsOfFile: logPath, encoding: .utf8)
        #expect(log.hasPrefix("pipe:[") && log.contains("\nleaving\n"), "\(log)")
    }
}
