import AppdAPI
import Sandbox

extension AppExitStatus {
    /// The same status as the API and `appctl ps` show it (`{"reason":"exited","code":0}`).
    public var api: APIExit {
        switch self {
        case .exited(let code): APIExit(reason: .exited, code: code)
        case .signaled(let signal): APIExit(reason: .signaled, signal: signal)
        case .failedToLaunch(let message): APIExit(reason: .failedToLaunch, message: message)
        }
    }
}
