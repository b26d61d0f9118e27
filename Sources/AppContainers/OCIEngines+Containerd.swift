extension OCIEngines {
    /// Annotation patterns of a containerd runtime table that let `org.appd.plain` through.
    static let plainAnnotationPatterns: Set<String> = ["org.appd.plain", "org.appd.*", "*"]

    /// What a containerd runtime table calling appd-oci (`names`) needs besides its
    /// `BinaryName` (docs/kubernetes.md): the CRI passes an annotation to the runtime only when
    /// the table lists it in `pod_annotations` or `container_annotations`, so without
    /// `org.appd.plain` there a pod cannot run a sidecar image plain; and `SystemdCgroup = true`
    /// on a host where systemd is not running makes every pod fail at create.
    static func containerdNotes(_ text: String, names: Set<String>, systemdRunning: Bool)
        -> [String]
    {
        var annotated = Set<String>()
        var systemd = Set<String>()
        for (key, value) in TOMLLines(text) where key.count >= 3 {
            let last = key[key.count - 1]
            if key[key.count - 3] == "runtimes",
                last == "pod_annotations" || last == "container_annotations",
                value.strings.contains(where: plainAnnotationPatterns.contains)
            {
                annotated.insert(key[key.count - 2])
            }
            if key.count >= 4, key[key.count - 4] == "runtimes", key[key.count - 2] == "options",
                last == "SystemdCgroup", value.raw == "true"
            {
                systemd.insert(key[key.count - 3])
            }
        }
        var notes: [String] = []
        for name in names.sorted() {
            if !annotated.contains(name) {
                notes.append(
                    "containerd: runtime \(name) passes no org.appd.plain annotation (list it in pod_annotations and container_annotations): a pod cannot run a sidecar image plain"
                )
            }
            if systemd.contains(name) && !systemdRunning {
                notes.append(
                    "containerd: runtime \(name) has SystemdCgroup = true but systemd is not running here: every pod is refused at create; set SystemdCgroup = false"
                )
            }
        }
        return notes
    }
}
