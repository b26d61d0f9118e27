import Foundation
import Testing

/// appd-oci's launcher options (docs/oci-runtime.md, LauncherProtocol's `LauncherFlag`): the start
/// gate's two fds go together, entering a running sandbox takes nothing that builds one, and a
/// root without its mount namespace is refused, each before anything runs.
@Suite("appd-exec: appd-oci's arguments")
struct OCIArgumentTests {
    func expectRefused(
        _ extra: String, mentioning text: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        try expectArgumentsRefused(extra, mentioning: text, sourceLocation: sourceLocation)
    }

    @Test("the start gate: --ready-fd and --start-fd go together")
    func gateTogether() throws {
        try expectRefused(
            "--ready-fd 6 6</dev/null", mentioning: "--ready-fd and --start-fd go together")
        try expectRefused(
            "--start-fd 6 6</dev/null", mentioning: "--ready-fd and --start-fd go together")
    }

    @Test("--enter-fd takes no namespace, gate, output or channel option")
    func enterAlone() throws {
        let refusal = "--enter-fd takes no namespace, gate, output or channel options"
        try expectRefused("--enter-fd 6 --net-ns-fd 7 6</dev/null 7</dev/null", mentioning: refusal)
        try expectRefused(
            "--enter-fd 6 --ready-fd 7 --start-fd 8 6</dev/null 7</dev/null 8</dev/null",
            mentioning: refusal)
        try expectRefused(
            "--enter-fd 6 --channel-fd 7 6</dev/null 7</dev/null", mentioning: refusal)
    }

    @Test("--root-fd needs --mount-ns-fd; --init-signals takes no value")
    func rootAlone() throws {
        try expectRefused("--root-fd 6 6</tmp", mentioning: "--root-fd needs --mount-ns-fd")
        try expectRefused(
            "--init-signals --init-signals", mentioning: "--init-signals needs a value")
    }
}
