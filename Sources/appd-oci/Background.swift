import Glibc

/// A value computed on a thread of its own while the caller goes on. `create` is one thread's
/// work until the launcher starts, on hosts with a CPU to spare: the bundle's files are hashed
/// beside it. Without a thread (pthread_create failed) the work runs in `value()`.
final class Background<Value>: @unchecked Sendable {
    private let body: () throws -> Value
    private var result: Result<Value, any Error>?
    private var thread: pthread_t?

    init(_ body: @escaping () throws -> Value) {
        self.body = body
        thread = ThreadStart.spawn { [self] in result = Result { try body() } }
    }

    /// Waits for the thread (once) and returns its value or throws its error.
    func value() throws -> Value {
        if let thread {
            pthread_join(thread, nil)
            self.thread = nil
        }
        if result == nil { result = Result { try body() } }
        return try result!.get()
    }
}

/// pthread_create of a Swift closure (a C function pointer cannot be formed in a generic
/// context).
private final class ThreadStart {
    let work: () -> Void

    private init(_ work: @escaping () -> Void) { self.work = work }

    /// The thread, or nil when none could be started (the work has not run).
    static func spawn(_ work: @escaping () -> Void) -> pthread_t? {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(ThreadStart(work)).toOpaque()
        let started = pthread_create(
            &thread, nil,
            { context in
                guard let context else { return nil }
                Unmanaged<ThreadStart>.fromOpaque(context).takeRetainedValue().work()
                return nil
            }, context)
        guard started == 0 else {
            Unmanaged<ThreadStart>.fromOpaque(context).release()
            return nil
        }
        return thread
    }
}
