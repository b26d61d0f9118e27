import Sandbox

/// What an app in a container sees of its own paths (issue 37): the image's, not the host's.
/// Its bundle is at `/Name.app`, where the image put it and where `process.args[0]` and
/// `APPD_BUNDLE_PATH` name it; its data container at `/appd/data`, where a volume for it is
/// mounted (docs/oci-runtime.md, "The data container and the volume"), whether it lies in a
/// volume or in `/var/lib/appd-oci`. So `HOME`, `TMPDIR`, the passwd entry, the working
/// folder and `/tmp`'s link are the same on every node and in every pod, and the app learns
/// nothing of the host's layout (the engine's rootfs path, the container id). The daemon
/// keeps its own model: real, unguessable container paths.
enum AppPaths {
    static let data = "/appd/data"

    /// `subject` (made from the host's bundle and data container) shown at the image's paths,
    /// mounted from the host's.
    static func show(_ subject: inout SandboxSubject) {
        let folder = "/" + (subject.bundlePath.split(separator: "/").last.map(String.init) ?? "")
        let inBundle = subject.executable.dropFirst(subject.bundlePath.count)
        subject.bundleSource = subject.bundlePath
        subject.dataSource = subject.dataContainer
        // The bundle itself is the container the sandbox shows: the image's root holds
        // nothing else the app may read.
        subject.bundleContainer = folder
        subject.bundlePath = folder
        subject.executable = folder + inBundle
        subject.dataContainer = data
    }
}
