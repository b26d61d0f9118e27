// `@preconcurrency`: Glibc's `stdout` is a mutable C global, which Swift 6 refuses to touch
// otherwise; it is used once, on the main thread, before the app starts any thread.
@preconcurrency import Glibc

enum StandardOutput {
    /// appd's log is a pipe, where stdout would be block-buffered: an app's lines would show up
    /// in `appctl logs` (and in tests) kilobytes late, or be lost when the app is killed.
    static func makeLineBuffered() {
        setvbuf(stdout, nil, _IOLBF, 0)
    }
}
