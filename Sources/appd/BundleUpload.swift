import AppBundle

/// The body of an install: the bundle folder as a tar stream (docs/api.md, "Installing
/// through the daemon"), read with the caller's permissions.
enum BundleUpload {
    static func archive(bundleAt path: String, to sink: (UnsafeRawBufferPointer) throws -> Void)
        throws
    {
        // The tar writer (BundleArchiveWriter, module BundleArchive) is not merged yet.
        throw AppdError(
            .unsupported,
            "installing through the daemon needs the bundle archive writer, not in this build",
            hint: "as root, install in-process: appd install --no-daemon \(path)")
    }
}
